import Foundation
import RainAuthorityAPI
import RainCore
import RainTestSupport
import Synchronization
import Testing

/// Waits for a completion-style call and returns what it delivered.
func completion<T: Sendable>(_ start: (@escaping @Sendable (Result<T, RainError>) -> Void) -> Void) async -> Result<T, RainError>
{
    await withCheckedContinuation { continuation in
        start { continuation.resume(returning: $0) }
    }
}

/// `EmbeddedAuthority.directReads` on the SQLite store's second connection: the same answers and the
/// same refusals as the async API, and never an answer older than a write that came before it.
@Suite("Direct reads of the embedded authority")
struct DirectReadsTests {
    static func reads(_ f: AuthorityFixture) throws -> any DirectAuthorityReads {
        try #require(f.authority.directReads, "an authority on SQLite has direct reads")
    }

    @Test("Account/Get and Wallet/Get answer exactly what the async API answers")
    func sameAnswers() async throws {
        try await AuthorityFixture.with { f in
            let token = try await f.login().tokens.accessToken
            let reads = try Self.reads(f)
            let account = try await completion {
                reads.accountInfo(appID: AuthorityFixture.app, accessToken: token, completion: $0)
            }.get()
            #expect(account == (try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: token)))
            #expect(account.contacts == [AuthorityFixture.email])
            let wallet = try await completion { reads.wallet(appID: AuthorityFixture.app, accessToken: token, completion: $0) }
                .get()
            #expect(wallet == (try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: token)))
            #expect(wallet.ethereumAddress.hasPrefix("0x"))
        }
    }

    @Test(
        "an unknown token, another app's token, an expired one and one revoked elsewhere are RAIN_201 with the async API's reasons"
    )
    func refusals() async throws {
        try await AuthorityFixture.with { f in
            let reads = try Self.reads(f)
            let app = AuthorityFixture.app
            func reason(_ token: String, app: String = AuthorityFixture.app) async -> String? {
                let account = await completion { reads.accountInfo(appID: app, accessToken: token, completion: $0) }
                let wallet = await completion { reads.wallet(appID: app, accessToken: token, completion: $0) }
                guard case .failure(let a) = account, case .failure(let w) = wallet else {
                    Issue.record("a refused token was answered")
                    return nil
                }
                #expect(a.code == .sessionExpired && w.code == .sessionExpired)
                #expect(a.details.reason == w.details.reason)
                return a.details.reason
            }
            #expect(await reason("not-a-token") == "invalid_token")
            let first = try await f.login().tokens.accessToken
            #expect(await reason(first, app: "app-two") == "invalid_token")

            // Expired: the access lifetime passed (no refresh).
            f.clock.advance(by: f.authority.settings.accessTokenLifetime + .seconds(1))
            #expect(await reason(first) == "access_expired")
            #expect(
                await sessionRefusal { _ = try await f.authority.accountInfo(appID: app, accessToken: first) } == "access_expired"
            )

            // Revoked elsewhere: the same account logs in on another device.
            let second = try await f.login().tokens.accessToken
            _ = try await f.login(device: "device-b")
            #expect(await reason(second) == "revoked_elsewhere")
        }
    }

    @Test("a read sees every write committed before it (a contact added, a session revoked)")
    func neverStale() async throws {
        try await AuthorityFixture.with { f in
            let reads = try Self.reads(f)
            let app = AuthorityFixture.app
            let token = try await f.login().tokens.accessToken
            // Warm the reader's statements first, so a cached statement that kept its snapshot would show.
            for _ in 0..<3 {
                _ = try await completion { reads.accountInfo(appID: app, accessToken: token, completion: $0) }.get()
            }
            let (challenge, code) = try await ContactVerificationTests.send(f, token: token)
            _ = try await ContactVerificationTests.confirm(f, token: token, challenge, code: code)
            let after = try await completion { reads.accountInfo(appID: app, accessToken: token, completion: $0) }.get()
            #expect(after.contacts.contains(ContactVerificationTests.backup))

            _ = try await f.login(device: "device-b")
            let revoked = await completion { reads.accountInfo(appID: app, accessToken: token, completion: $0) }
            guard case .failure(let error) = revoked else {
                Issue.record("a revoked session was answered")
                return
            }
            #expect(error.details.reason == "revoked_elsewhere")
        }
    }

    @Test("after the store closes, a direct read fails with RAIN_502")
    func closedStore() async throws {
        try await AuthorityFixture.with { f in
            let token = try await f.login().tokens.accessToken
            let reads = try Self.reads(f)
            await f.store.close()
            let result = await completion { reads.accountInfo(appID: AuthorityFixture.app, accessToken: token, completion: $0) }
            guard case .failure(let error) = result else {
                Issue.record("a closed store answered")
                return
            }
            #expect(error.code == .internalError)
        }
    }
}
