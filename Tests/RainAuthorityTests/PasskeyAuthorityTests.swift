import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainSoftAuthenticator
import RainTestSupport
import RainWebAuthn
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

/// Passkey ceremonies at the embedded authority, with the software authenticator.
@Suite("Passkeys at the authority")
struct PasskeyAuthorityTests {
    static let domain = "example.com"
    static let origin = "https://example.com"

    /// Runs `body` with a fixture and a software authenticator whose key file lives in the fixture's directory.
    static func with(
        settings: AuthoritySettings = AuthoritySettings(sendLimits: .unlimited),
        _ body: (AuthorityFixture, SoftAuthenticator) async throws -> Void
    ) async throws {
        try await AuthorityFixture.with(settings: settings) { f in
            try await body(f, SoftAuthenticator(path: f.directory + "/authenticator.json"))
        }
    }

    static func begin(
        _ domain: String = domain, device: String = "device-a", app: String = AuthorityFixture.app,
        accessToken: String? = nil
    ) -> PasskeyBeginRequest {
        PasskeyBeginRequest(
            appID: app, deviceID: device, rpID: domain, origins: ["https://" + domain], accessToken: accessToken)
    }

    static func finish(
        _ ceremony: PasskeyCeremony, _ response: String, device: String = "device-a", app: String = AuthorityFixture.app,
        key: Ed25519PrivateKey? = FixtureDevice.key
    ) -> PasskeyFinishRequest {
        PasskeyFinishRequest(
            appID: app, deviceID: device, ceremonyID: ceremony.ceremonyID, responseJSON: response,
            devicePublicKey: key?.publicKey.rawRepresentation ?? [])
    }

    /// A passkey sign-up with `authenticator`; returns the login.
    static func signUp(
        _ f: AuthorityFixture, _ authenticator: SoftAuthenticator, domain: String = domain, device: String = "device-a"
    ) async throws -> LoginResult {
        let ceremony = try await f.authority.beginPasskeyRegistration(begin(domain, device: device))
        let response = try await authenticator.createCredential(
            optionsJSON: ceremony.optionsJSON, origin: "https://" + domain)
        return try #require(
            try await f.authority.finishPasskeyRegistration(finish(ceremony, response, device: device)))
    }

    /// A passkey login with `authenticator`.
    static func login(
        _ f: AuthorityFixture, _ authenticator: SoftAuthenticator, domain: String = domain, device: String = "device-a",
        app: String = AuthorityFixture.app
    ) async throws -> LoginResult {
        let ceremony = try await f.authority.beginPasskeyAuthentication(begin(domain, device: device, app: app))
        let response = try await authenticator.getAssertion(
            optionsJSON: ceremony.optionsJSON, origin: "https://" + domain)
        return try await f.authority.finishPasskeyAuthentication(finish(ceremony, response, device: device, app: app))
    }

    @Test("a sign-up creates an account and wallet; a login reaches the same ones and moves the counter")
    func signUpThenLogin() async throws {
        try await Self.with { f, authenticator in
            let created = try await Self.signUp(f, authenticator)
            #expect(created.accountCreated)
            let wallet = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: created.tokens.accessToken)
            #expect(wallet.walletID == created.walletID)
            #expect(wallet.ethereumAddress.hasPrefix("0x"))
            #expect(!wallet.solanaAddress.isEmpty)

            let again = try await Self.login(f, authenticator, device: "device-b")
            #expect(again.accountID == created.accountID)
            #expect(again.walletID == created.walletID)
            #expect(!again.accountCreated)
            // Logging in on device B revoked device A's session.
            #expect(try await f.session(created.accountID, device: "device-a").revokeReason == "revoked_elsewhere")
            let stored = try #require(try await f.store.passkeyCredentials(accountID: created.accountID).first)
            #expect(stored.rpID == Self.domain)
            #expect(stored.signCount >= 1)
            #expect(stored.lastUsedAt != nil)
        }
    }

    @Test("a passkey added to a code account logs in to that account; one account holds two domains")
    func addToCodeAccountAndTwoDomains() async throws {
        try await Self.with { f, authenticator in
            let code = try await f.login()
            for domain in [Self.domain, "example.org"] {
                let ceremony = try await f.authority.beginPasskeyRegistration(
                    Self.begin(domain, accessToken: code.tokens.accessToken))
                let response = try await authenticator.createCredential(
                    optionsJSON: ceremony.optionsJSON, origin: "https://" + domain)
                #expect(try await f.authority.finishPasskeyRegistration(Self.finish(ceremony, response)) == nil)
            }
            let credentials = try await f.store.passkeyCredentials(accountID: code.accountID)
            #expect(Set(credentials.map(\.rpID)) == [Self.domain, "example.org"])
            #expect(Set(credentials.map(\.userHandle)).count == 1)
            for domain in [Self.domain, "example.org"] {
                let login = try await Self.login(f, authenticator, domain: domain)
                #expect(login.accountID == code.accountID)
                #expect(login.walletID == code.walletID)
            }
        }
    }

    @Test("a passkey sign-up gets a new account and a different wallet from an existing code account")
    func signUpIsAlwaysNew() async throws {
        try await Self.with { f, authenticator in
            let code = try await f.login()
            let passkey = try await Self.signUp(f, authenticator, device: "device-b")
            #expect(passkey.accountID != code.accountID)
            #expect(passkey.walletID != code.walletID)
            let a = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: code.tokens.accessToken)
            let b = try await f.authority.wallet(appID: AuthorityFixture.app, accessToken: passkey.tokens.accessToken)
            #expect(a.ethereumAddress != b.ethereumAddress)
        }
    }

    @Test("a ceremony is single use: a finished, cancelled or replayed ceremony is refused")
    func singleUse() async throws {
        try await Self.with { f, authenticator in
            _ = try await Self.signUp(f, authenticator)
            let ceremony = try await f.authority.beginPasskeyAuthentication(Self.begin())
            let response = try await authenticator.getAssertion(optionsJSON: ceremony.optionsJSON, origin: Self.origin)
            _ = try await f.authority.finishPasskeyAuthentication(Self.finish(ceremony, response))
            let replay = try #require(
                await rainError { _ = try await f.authority.finishPasskeyAuthentication(Self.finish(ceremony, response)) })
            #expect(replay.webAuthnFailure == .challengeExpired)

            // The same assertion against a fresh ceremony fails its challenge check.
            let fresh = try await f.authority.beginPasskeyAuthentication(Self.begin())
            let mismatch = try #require(
                await rainError { _ = try await f.authority.finishPasskeyAuthentication(Self.finish(fresh, response)) })
            #expect(mismatch.webAuthnFailure == .challengeMismatch)

            let cancelled = try await f.authority.beginPasskeyAuthentication(Self.begin())
            try await f.authority.cancelPasskeyCeremony(
                appID: AuthorityFixture.app, deviceID: "device-a", ceremonyID: cancelled.ceremonyID)
            let late = try await authenticator.getAssertion(optionsJSON: cancelled.optionsJSON, origin: Self.origin)
            let refused = try #require(
                await rainError { _ = try await f.authority.finishPasskeyAuthentication(Self.finish(cancelled, late)) })
            #expect(refused.webAuthnFailure == .challengeExpired)
        }
    }

    @Test("a ceremony expires, and is bound to its device and kind")
    func expiryAndBinding() async throws {
        try await Self.with(settings: AuthoritySettings(passkeyCeremonyLifetime: .seconds(60), sendLimits: .unlimited)) {
            f, authenticator in
            let ceremony = try await f.authority.beginPasskeyRegistration(Self.begin())
            let response = try await authenticator.createCredential(optionsJSON: ceremony.optionsJSON, origin: Self.origin)
            // Another device cannot finish it (and does not consume it).
            let otherDevice = try #require(
                await rainError {
                    _ = try await f.authority.finishPasskeyRegistration(Self.finish(ceremony, response, device: "device-b"))
                })
            #expect(otherDevice.webAuthnFailure == .challengeExpired)
            f.clock.advance(by: .seconds(61))
            let expired = try #require(
                await rainError { _ = try await f.authority.finishPasskeyRegistration(Self.finish(ceremony, response)) })
            #expect(expired.webAuthnFailure == .challengeExpired)
            #expect(expired.message.contains("expired"))

            // A registration ceremony cannot finish a login.
            let registration = try await f.authority.beginPasskeyRegistration(Self.begin())
            let wrongKind = try #require(
                await rainError {
                    _ = try await f.authority.finishPasskeyAuthentication(Self.finish(registration, "{}"))
                })
            #expect(wrongKind.webAuthnFailure == .challengeExpired)

            // A day after expiry, pruning deletes the ceremonies.
            f.clock.advance(by: .seconds(2 * 86_400))
            try await f.authority.pruneExpired()
            #expect(try await f.store.dumpAllRows()["passkey_ceremonies"]?.isEmpty ?? true)
            let gone = try await f.store.takePasskeyCeremony(
                id: registration.ceremonyID, appID: AuthorityFixture.app, deviceID: "device-a", now: f.clock.now)
            #expect(gone == .unknown)
        }
    }

    @Test("a credential of another app is unknown")
    func unknownCredential() async throws {
        try await Self.with { f, authenticator in
            _ = try await Self.signUp(f, authenticator)
            let error = try #require(await rainError { _ = try await Self.login(f, authenticator, app: "app-two") })
            #expect(error.webAuthnFailure == .credentialUnknown)
        }
    }

    @Test("a passkey of the app's other domain is refused naming both domains, not as unknown")
    func otherDomainCredential() async throws {
        try await Self.with { f, authenticator in
            _ = try await Self.signUp(f, authenticator)
            let ceremony = try await f.authority.beginPasskeyAuthentication(Self.begin("other.com"))
            // An authenticator that answers with the example.com passkey all the same.
            let options = ceremony.optionsJSON.replacingOccurrences(of: #""other.com""#, with: #""example.com""#)
            let response = try await authenticator.getAssertion(optionsJSON: options, origin: Self.origin)
            let error = try #require(
                await rainError { _ = try await f.authority.finishPasskeyAuthentication(Self.finish(ceremony, response)) })
            #expect(error.webAuthnFailure == .credentialOtherDomain)
            // Naming both domains is the rule itself, so the message is checked here.
            #expect(error.message.contains("registered for example.com") && error.message.contains("now uses other.com"))
        }
    }

    @Test("a duplicate credential id is refused through the store, and nothing is created")
    func duplicateCredential() async throws {
        try await Self.with { f, authenticator in
            let first = try await Self.signUp(f, authenticator)
            let existing = try #require(try await f.store.passkeyCredentials(accountID: first.accountID).first)
            var copy = existing
            copy.accountID = "acct_other"
            let keys = try f.authority.newWalletKeyMaterial(walletID: "wal_other")
            let signUp = PasskeySignUpCompletion(
                appID: AuthorityFixture.app, deviceID: "device-c", accountID: "acct_other", walletID: "wal_other",
                walletKeys: keys, credential: copy,
                session: NewSession(
                    id: "ses_other", accessHash: Array(repeating: 1, count: 32), refreshHash: Array(repeating: 2, count: 32),
                    accessExpiresAt: f.clock.now.adding(.seconds(900)), devicePublicKey: nil),
                now: f.clock.now)
            let error = try #require(await rainError { _ = try await f.store.completePasskeySignUp(signUp) })
            #expect(error.webAuthnFailure == .credentialAlreadyRegistered)
            #expect(try await f.store.wallet(accountID: "acct_other") == nil)
            var added = existing
            added.accountID = first.accountID
            let again = try #require(await rainError { try await f.store.addPasskeyCredential(added) })
            #expect(again.webAuthnFailure == .credentialAlreadyRegistered)
        }
    }

    @Test("a sign count that does not increase is refused through the store")
    func signCountRegression() async throws {
        try await Self.with { f, authenticator in
            let created = try await Self.signUp(f, authenticator)
            _ = try await Self.login(f, authenticator)
            let stored = try #require(try await f.store.passkeyCredentials(accountID: created.accountID).first)
            #expect(stored.signCount > 0)
            let completion = PasskeyLoginCompletion(
                appID: AuthorityFixture.app, deviceID: "device-a", credentialID: stored.credentialID, rpID: Self.domain,
                signCount: stored.signCount, isBackedUp: false,
                session: NewSession(
                    id: "ses_clone", accessHash: Array(repeating: 3, count: 32), refreshHash: Array(repeating: 4, count: 32),
                    accessExpiresAt: f.clock.now.adding(.seconds(900)), devicePublicKey: nil),
                now: f.clock.now)
            let error = try #require(await rainError { _ = try await f.store.completePasskeyLogin(completion) })
            #expect(error.webAuthnFailure == .signCountRegression)
            #expect(try await f.store.passkeyCredentials(accountID: created.accountID).first?.signCount == stored.signCount)
            #expect(try await f.store.sessions(appID: AuthorityFixture.app, accountID: created.accountID).count == 2)
        }
    }

    @Test("adding a passkey needs a live access token")
    func addNeedsSession() async throws {
        try await Self.with { f, _ in
            let error = try #require(
                await rainError { _ = try await f.authority.beginPasskeyRegistration(Self.begin(accessToken: "rwa_nope")) })
            #expect(error.code == .sessionExpired)
        }
    }
}
