import Foundation
import RainCore
import RainTestSupport
import RainWire
import Testing

@testable import RainDevice

/// Backup contacts in the profile session: one pending verification beside the login's, a live
/// session required, sends never retried.
@Suite struct ContactSessionTests {
    @Test("a verification send is never retried on a transient failure")
    func sendNotRetried() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        let before = f.authority.sendCalls
        f.authority.failNextSends(1)
        let error = await rainErrorOf { _ = try await f.session.sendContactVerificationCode(.email("b@example.com")) }
        #expect(error?.code == .network)
        #expect(f.authority.sendCalls == before + 1)
    }

    @Test("verification needs a live session and a well-formed contact, checked before any request")
    func needsSessionAndContact() async throws {
        let f = try await SchedulerFixture()
        let noSession = await rainErrorOf { _ = try await f.session.sendContactVerificationCode(.email("b@example.com")) }
        #expect(noSession?.code == .sessionExpired)
        try await f.login()
        let before = f.authority.sendCalls
        let bad = await rainErrorOf { _ = try await f.session.sendContactVerificationCode(.phone("+44 (0)20 7946 0958")) }
        #expect(bad?.code == .invalidArgument)
        let missing = await rainErrorOf { _ = try await f.session.sendContactVerificationCode(nil) }
        #expect(missing?.code == .invalidArgument)
        #expect(f.authority.sendCalls == before)
    }

    @Test("the pending verification is separate from the pending login code")
    func separatePending() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        _ = try await f.session.sendContactVerificationCode(.email("b@example.com"))
        let verificationCode = try #require(f.sender.lastCode)
        // No login code is pending: the verification's code does not confirm a login.
        let asLogin = await rainErrorOf { _ = try await f.session.confirmLoginCode(verificationCode) }
        #expect(asLogin?.details.reason == "no_pending_code")
        let account = try await f.session.confirmContactVerification(verificationCode)
        #expect(account.contacts.contains(.email("b@example.com")))
        #expect(!account.needsBackupEmail)
        let again = await rainErrorOf { _ = try await f.session.confirmContactVerification(verificationCode) }
        #expect(again?.details.reason == "no_pending_code")
    }
}

/// The `RainError` `body` threw, or nil.
func rainErrorOf(_ body: () async throws -> Void) async -> RainError? {
    do {
        try await body()
        return nil
    } catch let error as RainError {
        return error
    } catch {
        Issue.record("expected a RainError, got \(error)")
        return nil
    }
}
