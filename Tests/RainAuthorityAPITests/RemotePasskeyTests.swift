import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainSoftAuthenticator
import RainTestSupport
import RainWebAuthn
import RainWire
import Testing

@testable import RainStore

@Suite("Passkeys over the authority hop")
struct RemotePasskeyTests {
    static let origin = "https://example.com"

    @Test("sign up, add, log in, list, remove and cancel across the wire; refusals keep their reason")
    func ceremonies() async throws {
        try await RemoteFixture.with { f in
            let anchor = SoftAuthenticator(path: f.directory + "/authenticator.json")
            let key = FixtureDevice.key

            let signUp = try await f.remote.beginPasskeyRegistration(RemoteFixture.passkeyBegin())
            let created = try #require(
                try await f.remote.finishPasskeyRegistration(
                    RemoteFixture.passkeyFinish(
                        signUp, try await anchor.createCredential(optionsJSON: signUp.optionsJSON, origin: Self.origin),
                        key: key)))
            #expect(created.accountCreated)
            #expect(
                try await f.store.session(device: RemoteFixture.device, accountID: created.accountID, app: RemoteFixture.app)?
                    .devicePublicKey
                    == key.publicKey.rawRepresentation)

            let add = try await f.remote.beginPasskeyRegistration(
                RemoteFixture.passkeyBegin(accessToken: created.tokens.accessToken))
            let second = SoftAuthenticator(path: f.directory + "/second.json")
            let added = try await f.remote.finishPasskeyRegistration(
                RemoteFixture.passkeyFinish(
                    add, try await second.createCredential(optionsJSON: add.optionsJSON, origin: Self.origin), key: key))
            #expect(added == nil)
            #expect(try await f.store.passkeyCredentials(accountID: created.accountID).count == 2)

            let login = try await f.remote.beginPasskeyAuthentication(RemoteFixture.passkeyBegin())
            let assertion = try await second.getAssertion(optionsJSON: login.optionsJSON, origin: Self.origin)
            let loggedIn = try await f.remote.finishPasskeyAuthentication(RemoteFixture.passkeyFinish(login, assertion, key: key))
            #expect(loggedIn.accountID == created.accountID)
            #expect(loggedIn.walletID == created.walletID)
            let replay = try #require(
                await rainError {
                    _ = try await f.remote.finishPasskeyAuthentication(RemoteFixture.passkeyFinish(login, assertion, key: key))
                })
            #expect(replay.webAuthnFailure == .challengeExpired)

            // Listed with their kind and removed across the wire; the last one stays.
            let caller = AuthorityCaller(proof: FixtureDevice.proof)
            let access = loggedIn.tokens.accessToken
            let listed = try await f.remote.getAccountInfo(
                AuthorityAccountInfoRequest(appID: RemoteFixture.app, accessToken: access), caller: caller)
            #expect(listed.passkeys.map(\.kind) == [.file, .file], "\(listed.passkeys)")
            let first = try #require(listed.passkeys.first?.credentialID)
            let after = try await f.remote.removePasskey(
                AuthorityRemovePasskeyRequest(appID: RemoteFixture.app, accessToken: access, credentialID: first),
                caller: caller)
            #expect(after.passkeys.count == 1 && after.passkeys.first?.credentialID != first)
            let last = try #require(
                await rainError {
                    _ = try await f.remote.removePasskey(
                        AuthorityRemovePasskeyRequest(
                            appID: RemoteFixture.app, accessToken: access,
                            credentialID: after.passkeys.first?.credentialID ?? ""),
                        caller: caller)
                })
            #expect(last.details.reason == "last_login_method", "\(last)")

            let cancelled = try await f.remote.beginPasskeyAuthentication(RemoteFixture.passkeyBegin())
            try await f.remote.cancelPasskeyCeremony(
                appID: RemoteFixture.app, deviceID: RemoteFixture.device, ceremonyID: cancelled.ceremonyID)
            let late = try await anchor.getAssertion(optionsJSON: cancelled.optionsJSON, origin: Self.origin)
            let refused = try #require(
                await rainError {
                    _ = try await f.remote.finishPasskeyAuthentication(RemoteFixture.passkeyFinish(cancelled, late, key: key))
                })
            #expect(refused.webAuthnFailure == .challengeExpired)
        }
    }
}

extension SQLiteAuthorityStore {
    /// The newest session of `accountID` on `device`.
    func session(device: String, accountID: String, app: String) async throws -> SessionRecord? {
        try await sessions(appID: app, accountID: accountID).last { $0.deviceID == device }
    }
}
