import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainSoftAuthenticator
import RainTestSupport
import RainWire
import Testing

/// Every change that can make a device's kept Account/Get or Wallet/Get stale notes its account
/// (`TouchedAccounts`): a change that noted nothing would be held for no reader, and a leased
/// device would answer it stale for up to a lease.
@Suite("Accounts noted for the read leases")
struct TouchedAccountsTests {
    static let caller = AuthorityCaller(proof: FixtureDevice.proof)
    static let app = RemoteFixture.app
    static let origin = "https://example.com"

    static func noted<T>(_ body: () async throws(RainError) -> T) async throws -> (T, Set<String>) {
        let (result, accounts) = await TouchedAccounts.collect(body)
        return (try result.get(), accounts)
    }

    @Test("a code login, token reads, a verified contact, a refresh and a logout each note the account; a code send notes none")
    func codeAccount() async throws {
        try await RemoteFixture.with { f in
            let e = f.embedded
            let (sent, sendNoted) = try await Self.noted { () async throws(RainError) in
                try await e.sendLoginCode(
                    SendCodeRequest(appID: Self.app, deviceID: RemoteFixture.device, contact: RemoteFixture.email),
                    caller: Self.caller)
            }
            #expect(sendNoted.isEmpty)
            let code = try f.sender.lastCode(to: RemoteFixture.email)
            let (login, loginNoted) = try await Self.noted { () async throws(RainError) in
                try await e.confirmLoginCode(
                    ConfirmCodeRequest(
                        appID: Self.app, deviceID: RemoteFixture.device, challengeID: sent.challengeID, code: code,
                        devicePublicKey: FixtureDevice.key.publicKey.rawRepresentation), caller: Self.caller)
            }
            let account: Set = [login.accountID]
            #expect(loginNoted == account)
            let token = login.tokens.accessToken
            let (_, readNoted) = try await Self.noted { () async throws(RainError) in
                try await e.getAccountInfo(
                    AuthorityAccountInfoRequest(appID: Self.app, accessToken: token), caller: Self.caller)
            }
            #expect(readNoted == account)
            let (_, walletNoted) = try await Self.noted { () async throws(RainError) in
                try await e.getWallet(AuthorityWalletRequest(appID: Self.app, accessToken: token), caller: Self.caller)
            }
            #expect(walletNoted == account)
            let backup = RainWalletContact.email("backup@example.com")
            let (challenge, sendContactNoted) = try await Self.noted { () async throws(RainError) in
                try await e.sendContactVerificationCode(
                    AuthoritySendContactVerificationRequest(
                        appID: Self.app, deviceID: RemoteFixture.device, accessToken: token, contact: backup),
                    caller: Self.caller)
            }
            #expect(sendContactNoted == account)
            let contactCode = try f.sender.lastCode(to: backup)
            let (_, confirmContactNoted) = try await Self.noted { () async throws(RainError) in
                try await e.confirmContactVerification(
                    AuthorityConfirmContactVerificationRequest(
                        appID: Self.app, deviceID: RemoteFixture.device, accessToken: token,
                        challengeID: challenge.challengeID, code: contactCode), caller: Self.caller)
            }
            #expect(confirmContactNoted == account)
            let (refreshed, refreshNoted) = try await Self.noted { () async throws(RainError) in
                try await e.refreshSession(
                    RefreshRequest(appID: Self.app, deviceID: RemoteFixture.device, refreshToken: login.tokens.refreshToken),
                    caller: Self.caller)
            }
            #expect(refreshNoted == account)
            let (_, logoutNoted) = try await Self.noted { () async throws(RainError) in
                try await e.revokeSession(
                    AuthorityRevokeSessionRequest(appID: Self.app, refreshToken: refreshed.tokens.refreshToken),
                    caller: Self.caller)
            }
            #expect(logoutNoted == account)
        }
    }

    @Test("a token presented with another device's key burns the family and notes its account, on a read and on a refresh")
    func stolenTokens() async throws {
        try await RemoteFixture.with { f in
            let e = f.embedded
            let thief = AuthorityCaller(
                proof: DeviceProof(
                    deviceID: RemoteFixture.device,
                    keys: [.ed25519(try Ed25519PrivateKey(rawRepresentation: Array(repeating: 7, count: 32)).publicKey)]))
            let first = try await f.login(via: e)
            let (read, readNoted) = await TouchedAccounts.collect { () async throws(RainError) in
                try await e.getAccountInfo(
                    AuthorityAccountInfoRequest(appID: Self.app, accessToken: first.tokens.accessToken), caller: thief)
            }
            #expect((try? read.get()) == nil)
            #expect(readNoted == [first.accountID])
            let second = try await f.login(via: e)
            let (refresh, refreshNoted) = await TouchedAccounts.collect { () async throws(RainError) in
                try await e.refreshSession(
                    RefreshRequest(appID: Self.app, deviceID: RemoteFixture.device, refreshToken: second.tokens.refreshToken),
                    caller: thief)
            }
            #expect((try? refresh.get()) == nil)
            #expect(refreshNoted == [second.accountID])
        }
    }

    @Test("a passkey added, a passkey login and a passkey removed each note the account")
    func passkeys() async throws {
        try await RemoteFixture.with { f in
            let e = f.embedded
            let key = FixtureDevice.key
            let anchor = SoftAuthenticator(path: f.directory + "/authenticator.json")
            let signUp = try await e.beginPasskeyRegistration(RemoteFixture.passkeyBegin(), caller: Self.caller)
            let created = try await e.finishPasskeyRegistration(
                RemoteFixture.passkeyFinish(
                    signUp, try await anchor.createCredential(optionsJSON: signUp.optionsJSON, origin: Self.origin), key: key),
                caller: Self.caller)
            let account: Set = [created.accountID]
            let add = try await e.beginPasskeyRegistration(
                RemoteFixture.passkeyBegin(accessToken: created.tokens.accessToken), caller: Self.caller)
            let second = SoftAuthenticator(path: f.directory + "/second.json")
            let response = try await second.createCredential(optionsJSON: add.optionsJSON, origin: Self.origin)
            let (_, addNoted) = try await Self.noted { () async throws(RainError) in
                try await e.finishPasskeyRegistration(
                    RemoteFixture.passkeyFinish(add, response, key: key), caller: Self.caller)
            }
            #expect(addNoted == account)
            let begin = try await e.beginPasskeyAuthentication(RemoteFixture.passkeyBegin(), caller: Self.caller)
            let assertion = try await second.getAssertion(optionsJSON: begin.optionsJSON, origin: Self.origin)
            let (login, loginNoted) = try await Self.noted { () async throws(RainError) in
                try await e.finishPasskeyAuthentication(
                    RemoteFixture.passkeyFinish(begin, assertion, key: key), caller: Self.caller)
            }
            #expect(loginNoted == account)
            let access = login.tokens.accessToken
            let listed = try await e.getAccountInfo(
                AuthorityAccountInfoRequest(appID: Self.app, accessToken: access), caller: Self.caller)
            let credential = try #require(listed.passkeys.first?.credentialID)
            let (_, removeNoted) = try await Self.noted { () async throws(RainError) in
                try await e.removePasskey(
                    AuthorityRemovePasskeyRequest(appID: Self.app, accessToken: access, credentialID: credential),
                    caller: Self.caller)
            }
            #expect(removeNoted == account)
        }
    }
}
