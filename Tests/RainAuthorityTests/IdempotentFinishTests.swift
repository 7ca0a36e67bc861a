import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainSoftAuthenticator
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

/// A passkey finish or a contact verification repeated with its idempotency key gets its
/// first outcome back (the same account, wallet and tokens; the contact verified), on SQLite and
/// PostgreSQL and across two PostgreSQL instances; nothing is applied twice.
@Suite("Idempotent passkey finish and contact verification")
struct IdempotentFinishTests {
    static let app = StoreFixture.app
    static let domain = PasskeyAuthorityTests.domain
    static let origin = PasskeyAuthorityTests.origin
    static let backup = RainWalletContact.email("backup@example.com")

    /// A passkey ceremony begun on `authority` and the authenticator's answer to it.
    static func ceremony(
        _ authority: EmbeddedAuthority, _ authenticator: SoftAuthenticator, login: Bool, device: String = "device-a",
        accessToken: String? = nil
    ) async throws -> (ceremony: PasskeyCeremony, response: String) {
        let begin = PasskeyAuthorityTests.begin(device: device, accessToken: accessToken)
        if login {
            let ceremony = try await authority.beginPasskeyAuthentication(begin)
            return (ceremony, try await authenticator.getAssertion(optionsJSON: ceremony.optionsJSON, origin: origin))
        }
        let ceremony = try await authority.beginPasskeyRegistration(begin)
        return (ceremony, try await authenticator.createCredential(optionsJSON: ceremony.optionsJSON, origin: origin))
    }

    /// The finish of `ceremony` with `response`, carrying `key`.
    static func finish(
        _ ceremony: PasskeyCeremony, _ response: String, key: [UInt8], device: String = "device-a"
    ) -> PasskeyFinishRequest {
        var request = PasskeyAuthorityTests.finish(ceremony, response, device: device)
        request.idempotencyKey = key
        return request
    }

    /// A code login of `contact` on `device`, its session bound to the fixture device's key.
    static func login(_ f: StoreFixture, _ contact: RainWalletContact = StoreFixture.email, device: String = "device-a")
        async throws -> LoginResult
    {
        let sent = try await f.authority.sendLoginCode(SendCodeRequest(appID: app, deviceID: device, contact: contact))
        return try await f.authority.confirmLoginCode(
            ConfirmCodeRequest(
                appID: app, deviceID: device, challengeID: sent.challengeID, code: try f.sender.lastCode(to: contact),
                devicePublicKey: FixtureDevice.key.publicKey.rawRepresentation))
    }

    /// A verification code for `contact` sent for the session of `token`, and its code.
    static func verification(
        _ f: StoreFixture, token: String, _ contact: RainWalletContact = backup, device: String = "device-a"
    ) async throws -> (challengeID: String, code: String) {
        let sent = try await f.authority.sendContactVerificationCode(
            appID: app, deviceID: device, accessToken: token, contact: contact)
        return (sent.challengeID, try f.sender.lastCode(to: contact))
    }

    static func withAuthenticator(_ body: (SoftAuthenticator) async throws -> Void) async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await body(SoftAuthenticator(path: directory + "/authenticator.json"))
    }

    // MARK: - Passkey finish

    @Test(
        "a passkey sign-up and login repeated with their keys (on either instance) return the first outcome: one account, one session",
        arguments: StoreKind.allCases)
    func passkeyRepeatReturnsTheFirstOutcome(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            try await Self.withAuthenticator { authenticator in
                let (signUp, created) = try await Self.ceremony(f.authority, authenticator, login: false)
                let signUpKey = try SecureRandom.bytes(count: 32)
                let first = try #require(
                    try await f.authorities[0].finishPasskeyRegistration(Self.finish(signUp, created, key: signUpKey)))
                let again = try await f.authorities[1].finishPasskeyRegistration(Self.finish(signUp, created, key: signUpKey))
                #expect(again == first)

                let (login, assertion) = try await Self.ceremony(f.authority, authenticator, login: true)
                let key = try SecureRandom.bytes(count: 32)
                let request = Self.finish(login, assertion, key: key)
                let loggedIn = try await f.authorities[0].finishPasskeyAuthentication(request)
                let sessions = try await f.store.sessions(appID: Self.app, accountID: first.accountID).count
                f.clock.advance(by: .seconds(10))
                for authority in f.authorities {
                    let repeated = try await authority.finishPasskeyAuthentication(request)
                    #expect(repeated.accountID == first.accountID)
                    #expect(repeated.walletID == first.walletID)
                    #expect(!repeated.accountCreated)
                    #expect(repeated.tokens.accessToken == loggedIn.tokens.accessToken)
                    #expect(repeated.tokens.refreshToken == loggedIn.tokens.refreshToken)
                    #expect(repeated.tokens.accessLifetime == loggedIn.tokens.accessLifetime - .seconds(10))
                }
                #expect(try await f.store.sessions(appID: Self.app, accountID: first.accountID).count == sessions)
                #expect(try await f.violations().isEmpty)

                // Another key is another finish: the ceremony is used.
                let other = await rainError {
                    _ = try await f.authority.finishPasskeyAuthentication(
                        Self.finish(login, assertion, key: try SecureRandom.bytes(count: 32)))
                }
                #expect(other?.webAuthnFailure == .challengeExpired)
                // The key names this finish only: not another ceremony, not another device's.
                let (next, nextAssertion) = try await Self.ceremony(f.authority, authenticator, login: true)
                let reused = await rainError {
                    _ = try await f.authority.finishPasskeyAuthentication(Self.finish(next, nextAssertion, key: key))
                }
                #expect(reused?.code == .invalidArgument)
                #expect(reused?.details.reason == "idempotency_key_reused")
                let elsewhere = await rainError {
                    _ = try await f.authority.finishPasskeyAuthentication(
                        Self.finish(login, assertion, key: key, device: "device-b"))
                }
                #expect(elsewhere?.details.reason == "idempotency_key_reused")
                // Nor a confirm's.
                let sent = try await f.authority.sendLoginCode(
                    SendCodeRequest(appID: Self.app, deviceID: "device-a", contact: StoreFixture.email))
                let confirm = await rainError {
                    _ = try await f.authority.confirmLoginCode(
                        ConfirmCodeRequest(
                            appID: Self.app, deviceID: "device-a", challengeID: sent.challengeID,
                            code: try f.sender.lastCode(to: StoreFixture.email), idempotencyKey: key))
                }
                #expect(confirm?.details.reason == "idempotency_key_reused")
            }
        }
    }

    @Test("a passkey added with a key and repeated answers again without a second credential")
    func passkeyAddRepeated() async throws {
        try await StoreFixture.with(.sqlite) { f in
            try await Self.withAuthenticator { authenticator in
                let (signUp, created) = try await Self.ceremony(f.authority, authenticator, login: false)
                let account = try #require(
                    try await f.authority.finishPasskeyRegistration(
                        Self.finish(signUp, created, key: try SecureRandom.bytes(count: 32))))
                let second = SoftAuthenticator(path: authenticator.path + ".second")
                let (add, response) = try await Self.ceremony(
                    f.authority, second, login: false, accessToken: account.tokens.accessToken)
                let request = Self.finish(add, response, key: try SecureRandom.bytes(count: 32))
                #expect(try await f.authority.finishPasskeyRegistration(request) == nil)
                #expect(try await f.authority.finishPasskeyRegistration(request) == nil)
                #expect(try await f.store.passkeyCredentials(accountID: account.accountID).count == 2)
            }
        }
    }

    @Test("a repeat while the first finish with its key still runs is RAIN_501 outcome_unknown, not a used ceremony")
    func passkeyRepeatWhileTheFirstRuns() async throws {
        try await StoreFixture.with(.sqlite) { f in
            try await Self.withAuthenticator { authenticator in
                let (signUp, created) = try await Self.ceremony(f.authority, authenticator, login: false)
                let request = Self.finish(signUp, created, key: try SecureRandom.bytes(count: 32))
                // The first finish has taken the ceremony and claimed the key; its verification runs.
                let call = try #require(try IdempotentCall(request, keys: f.keys))
                let take = try await f.store.takePasskeyCeremony(
                    id: signUp.ceremonyID, appID: Self.app, deviceID: "device-a", now: f.clock.now, claim: call.claim)
                guard case .taken = take else {
                    Issue.record("expected the ceremony to be taken, got \(take)")
                    return
                }
                let running = await rainError { _ = try await f.authority.finishPasskeyRegistration(request) }
                #expect(running?.code == .provider)
                #expect(running?.details.reason == "outcome_unknown")
            }
        }
    }

    @Test(
        "a passkey finish repeated with its key and another response is RAIN_102 idempotency_key_reused",
        arguments: StoreKind.allCases)
    func passkeyRepeatWithAnotherResponse(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            try await Self.withAuthenticator { authenticator in
                let (signUp, created) = try await Self.ceremony(f.authority, authenticator, login: false)
                let key = try SecureRandom.bytes(count: 32)
                let first = try #require(
                    try await f.authorities[0].finishPasskeyRegistration(Self.finish(signUp, created, key: key)))
                // The same assertion with a byte more (still JSON) is another request.
                for authority in f.authorities {
                    let refused = await rainError {
                        _ = try await authority.finishPasskeyRegistration(Self.finish(signUp, created + " ", key: key))
                    }
                    #expect(refused?.code == .invalidArgument)
                    #expect(refused?.details.reason == "idempotency_key_reused")
                }
                #expect(try await f.authority.finishPasskeyRegistration(Self.finish(signUp, created, key: key)) == first)
            }
        }
    }

    @Test("a repeat with another response while the first finish with its key still runs is refused as reused")
    func passkeyRepeatWithAnotherResponseWhileTheFirstRuns() async throws {
        try await StoreFixture.with(.sqlite) { f in
            try await Self.withAuthenticator { authenticator in
                let (signUp, created) = try await Self.ceremony(f.authority, authenticator, login: false)
                let request = Self.finish(signUp, created, key: try SecureRandom.bytes(count: 32))
                let call = try #require(try IdempotentCall(request, keys: f.keys))
                let take = try await f.store.takePasskeyCeremony(
                    id: signUp.ceremonyID, appID: Self.app, deviceID: "device-a", now: f.clock.now, claim: call.claim)
                guard case .taken = take else {
                    Issue.record("expected the ceremony to be taken, got \(take)")
                    return
                }
                var other = request
                other.responseJSON = created + " "
                let refused = await rainError { _ = try await f.authority.finishPasskeyRegistration(other) }
                #expect(refused?.details.reason == "idempotency_key_reused")
            }
        }
    }

    @Test("a finish that fails releases its key: its repeat hears that the ceremony is used")
    func failedFinishReleasesItsKey() async throws {
        try await StoreFixture.with(.sqlite) { f in
            try await Self.withAuthenticator { authenticator in
                let (signUp, _) = try await Self.ceremony(f.authority, authenticator, login: false)
                let request = Self.finish(signUp, "{}", key: try SecureRandom.bytes(count: 32))
                let failed = await rainError { _ = try await f.authority.finishPasskeyRegistration(request) }
                #expect(failed?.code == .invalidArgument)
                let again = await rainError { _ = try await f.authority.finishPasskeyRegistration(request) }
                #expect(again?.webAuthnFailure == .challengeExpired)
            }
        }
    }

    @Test("two instances finishing one ceremony with one key at once: one session; each hears it or outcome_unknown")
    func concurrentPasskeyFinishesOnTwoInstances() async throws {
        try await StoreFixture.with(.postgres, instances: 2) { f in
            try await Self.withAuthenticator { authenticator in
                let (signUp, created) = try await Self.ceremony(f.authority, authenticator, login: false)
                let request = Self.finish(signUp, created, key: try SecureRandom.bytes(count: 32))
                async let a = Self.outcome { () throws(RainError) in try await f.authorities[0].finishPasskeyRegistration(request)
                }
                async let b = Self.outcome { () throws(RainError) in try await f.authorities[1].finishPasskeyRegistration(request)
                }
                let answers = await [a, b]
                let logins = answers.compactMap { (try? $0.get()) ?? nil }
                #expect(!logins.isEmpty)
                for case .failure(let error) in answers { #expect(error.details.reason == "outcome_unknown") }
                let final = try #require(try await f.authorities[1].finishPasskeyRegistration(request))
                for login in logins { #expect(login == final) }
                #expect(try await f.store.sessions(appID: Self.app, accountID: final.accountID).count == 1)
                #expect(try await f.violations().isEmpty)
            }
        }
    }

    static func outcome(_ body: () async throws(RainError) -> LoginResult?) async -> Result<LoginResult?, RainError> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    // MARK: - Contact verification

    @Test(
        "a contact verification repeated with its key (on either instance) answers the contact verified; nothing applied twice",
        arguments: StoreKind.allCases)
    func contactRepeatReturnsTheFirstOutcome(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            let token = try await Self.login(f).tokens.accessToken
            let (challengeID, code) = try await Self.verification(f, token: token)
            let key = try SecureRandom.bytes(count: 32)
            let first = try await f.authorities[0].confirmContactVerification(
                appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: challengeID, code: code,
                idempotencyKey: key)
            #expect(first.contacts.contains(Self.backup))
            for authority in f.authorities {
                let repeated = try await authority.confirmContactVerification(
                    appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: challengeID, code: code,
                    idempotencyKey: key)
                #expect(repeated == first)
            }
            #expect(try await f.violations().isEmpty)

            // Another key is another confirm: the code is used.
            let used = await rainError {
                _ = try await f.authority.confirmContactVerification(
                    appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: challengeID, code: code,
                    idempotencyKey: try SecureRandom.bytes(count: 32))
            }
            #expect(used?.code == .invalidLoginCode)
            #expect(used?.details.reason == "used")
            // The key names this verification only: not another challenge, not another account's.
            let (nextID, nextCode) = try await Self.verification(f, token: token, .email("third@example.com"))
            let reused = await rainError {
                _ = try await f.authority.confirmContactVerification(
                    appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: nextID, code: nextCode,
                    idempotencyKey: key)
            }
            #expect(reused?.details.reason == "idempotency_key_reused")
            let otherToken = try await Self.login(f, .email("other@example.com"), device: "device-a").tokens.accessToken
            let otherAccount = await rainError {
                _ = try await f.authority.confirmContactVerification(
                    appID: Self.app, deviceID: "device-a", accessToken: otherToken, challengeID: challengeID, code: code,
                    idempotencyKey: key)
            }
            #expect(otherAccount?.details.reason == "idempotency_key_reused")
        }
    }

    @Test(
        "a contact verification repeated with its key and a wrong code is RAIN_102 idempotency_key_reused",
        arguments: StoreKind.allCases)
    func contactRepeatWithAnotherCode(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            let token = try await Self.login(f).tokens.accessToken
            let (challengeID, code) = try await Self.verification(f, token: token)
            let key = try SecureRandom.bytes(count: 32)
            let first = try await f.authorities[0].confirmContactVerification(
                appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: challengeID, code: code,
                idempotencyKey: key)
            let wrong = code == "000000" ? "111111" : "000000"
            for authority in f.authorities {
                let refused = await rainError {
                    _ = try await authority.confirmContactVerification(
                        appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: challengeID,
                        code: wrong, idempotencyKey: key)
                }
                #expect(refused?.code == .invalidArgument)
                #expect(refused?.details.reason == "idempotency_key_reused")
            }
            let again = try await f.authority.confirmContactVerification(
                appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: challengeID, code: code,
                idempotencyKey: key)
            #expect(again == first)
        }
    }

    @Test(
        "a verification repeated while its first confirm commits on another instance is answered verified",
        arguments: StoreKind.allCases)
    func verificationRacingItsFirstConfirm(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 2) { f in
            let token = try await Self.login(f).tokens.accessToken
            // The repeat may look its key up before the first confirm commits and read the
            // challenge after: it must then find the first outcome, not the used code. (8 rounds:
            // the account's verification codes per hour are limited.)
            for round in 0..<8 {
                let contact = RainWalletContact.email("race-\(round)@example.com")
                let (challengeID, code) = try await Self.verification(f, token: token, contact)
                let key = try SecureRandom.bytes(count: 32)
                async let a = f.authorities[0].confirmContactVerification(
                    appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: challengeID, code: code,
                    idempotencyKey: key)
                async let b = f.authorities[1].confirmContactVerification(
                    appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: challengeID, code: code,
                    idempotencyKey: key)
                let (x, y) = try await (a, b)
                #expect(x.contacts.contains(contact) && y.contacts.contains(contact), "round \(round)")
            }
            #expect(try await f.violations().isEmpty)
        }
    }

    @Test("without a key, a repeated verification is refused as used (the old behaviour)")
    func contactWithoutAKey() async throws {
        try await StoreFixture.with(.sqlite) { f in
            let token = try await Self.login(f).tokens.accessToken
            let (challengeID, code) = try await Self.verification(f, token: token)
            _ = try await f.authority.confirmContactVerification(
                appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: challengeID, code: code)
            let again = await rainError {
                _ = try await f.authority.confirmContactVerification(
                    appID: Self.app, deviceID: "device-a", accessToken: token, challengeID: challengeID, code: code)
            }
            #expect(again?.details.reason == "used")
        }
    }

    // MARK: - Across the wire

    @Test("the keys cross the authority hop: a repeated finish and verification get their first outcomes")
    func overTheWire() async throws {
        try await RemoteFixture.with { f in
            let authenticator = SoftAuthenticator(path: f.directory + "/authenticator.json")
            let begin = try await f.remote.beginPasskeyRegistration(RemoteFixture.passkeyBegin())
            let response = try await authenticator.createCredential(optionsJSON: begin.optionsJSON, origin: Self.origin)
            var request = RemoteFixture.passkeyFinish(begin, response, key: FixtureDevice.key)
            request.idempotencyKey = try SecureRandom.bytes(count: 32)
            let created = try #require(try await f.remote.finishPasskeyRegistration(request))
            #expect(try await f.remote.finishPasskeyRegistration(request) == created)

            let token = created.tokens.accessToken
            let sent = try await f.remote.sendContactVerificationCode(
                appID: RemoteFixture.app, deviceID: RemoteFixture.device, accessToken: token, contact: Self.backup)
            let code = try f.sender.lastCode(to: Self.backup)
            let key = try SecureRandom.bytes(count: 32)
            for _ in 0..<2 {
                let info = try await f.remote.confirmContactVerification(
                    appID: RemoteFixture.app, deviceID: RemoteFixture.device, accessToken: token,
                    challengeID: sent.challengeID, code: code, idempotencyKey: key)
                #expect(info.contacts == [Self.backup])
            }
        }
    }

    @Test("the keys survive encoding and never print")
    func wireForm() throws {
        let key = Array(repeating: UInt8(7), count: 32)
        let finish = PasskeyFinishRequest(
            appID: "a", deviceID: "d", ceremonyID: "pkc_1", responseJSON: "{}", idempotencyKey: key)
        #expect(try PasskeyFinishRequest.decode(finish.encode()) == finish)
        #expect(!finish.description.contains("7, 7"))
        #expect(finish.description.contains("<redacted>"))
        let confirm = AuthorityConfirmContactVerificationRequest(
            appID: "a", deviceID: "d", accessToken: "t", challengeID: "chl_1", code: "123456", idempotencyKey: key)
        #expect(try AuthorityConfirmContactVerificationRequest.decode(confirm.encode()) == confirm)
        #expect(confirm.description.hasSuffix("idempotencyKey: <redacted>)"))
    }
}
