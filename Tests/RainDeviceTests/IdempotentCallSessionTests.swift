import Foundation
import RainCore
import RainTestSupport
import RainWire
import Testing

@testable import RainDevice

/// The device attaches an idempotency key to each logical confirm, passkey finish and
/// contact verification, and sends the same key again when the caller repeats a call whose answer
/// was lost, so the repeat gets the first outcome; another call gets a fresh key.
@Suite struct IdempotentCallSessionTests {
    @Test("a confirm whose answer was lost, repeated, sends the same key and gets the login that happened")
    func confirmRepeated() async throws {
        let f = try await SchedulerFixture()
        _ = try await f.session.sendLoginCode(.email("user@example.com"))
        let code = try #require(f.sender.lastCode)
        f.authority.loseNextAnswers(1)
        let lost = await rainErrorOf { _ = try await f.session.confirmLoginCode(code) }
        #expect(lost?.details.reason == "outcome_unknown")
        let login = try await f.session.confirmLoginCode(code)
        #expect(login.isAccountCreated)
        let keys = f.authority.idempotencyKeys
        #expect(keys.count == 2)
        #expect(keys.first?.count == 32)
        #expect(keys.first == keys.last)
    }

    @Test("a contact verification whose answer was lost, repeated, sends the same key and gets the contact verified")
    func contactVerificationRepeated() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        _ = try await f.session.sendContactVerificationCode(.email("b@example.com"))
        let code = try #require(f.sender.lastCode)
        f.authority.loseNextAnswers(1)
        let lost = await rainErrorOf { _ = try await f.session.confirmContactVerification(code) }
        #expect(lost?.details.reason == "outcome_unknown")
        let account = try await f.session.confirmContactVerification(code)
        #expect(account.contacts.contains(.email("b@example.com")))
        let keys = f.authority.idempotencyKeys.suffix(2)
        #expect(keys.count == 2)
        #expect(keys.first == keys.last)
        // The login's confirm had a key of its own.
        #expect(f.authority.idempotencyKeys.first != keys.first)
    }

    @Test("a passkey finish whose answer was lost keeps its ceremony and key for the repeat; another response gets a new key")
    func passkeyFinishRepeated() async throws {
        let f = try await SchedulerFixture(passkeyDomain: "example.com")
        // The response is not a valid assertion: what matters here is what the device sends.
        let first = try await f.session.beginPasskeyLogin()
        f.authority.loseNextAnswers(1)
        let lost = await rainErrorOf { _ = try await f.session.finishPasskey(ceremonyID: first.ceremonyID, responseJSON: "{}") }
        #expect(lost?.details.reason == "outcome_unknown")
        // Still pending on the device: the repeat reaches the authority, with the same key.
        let repeated = await rainErrorOf {
            _ = try await f.session.finishPasskey(ceremonyID: first.ceremonyID, responseJSON: "{}")
        }
        #expect(repeated?.details.reason == "challenge_expired")
        #expect(f.authority.idempotencyKeys.count == 2)
        #expect(f.authority.idempotencyKeys.first == f.authority.idempotencyKeys.last)
        // A definite answer ends the ceremony on the device: nothing more is sent.
        let ended = await rainErrorOf { _ = try await f.session.finishPasskey(ceremonyID: first.ceremonyID, responseJSON: "{}") }
        #expect(ended?.details.reason == "challenge_expired")
        #expect(f.authority.idempotencyKeys.count == 2)

        let second = try await f.session.beginPasskeyLogin()
        f.authority.loseNextAnswers(1)
        _ = await rainErrorOf { _ = try await f.session.finishPasskey(ceremonyID: second.ceremonyID, responseJSON: "{}") }
        _ = await rainErrorOf {
            _ = try await f.session.finishPasskey(ceremonyID: second.ceremonyID, responseJSON: #"{"id":"x"}"#)
        }
        let keys = f.authority.idempotencyKeys
        try #require(keys.count == 4)
        #expect(keys[2] != keys[3])
        #expect(keys[2] != keys[0])
    }
}
