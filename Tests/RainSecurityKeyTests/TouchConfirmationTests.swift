import RainCore
import RainCrypto
import RainSecurityKey
import RainTestSupport
import RainWebAuthn
import Synchronization
import Testing

/// A security key's touch as a second confirmation: the credential the daemon makes for its own
/// relying party, the wait for the touch, and the verifier that ties one assertion to one action.
@Suite(.serialized) struct TouchConfirmationTests {
    /// The prompt as the ceremony sees it: records what it shows, answers a PIN when given one.
    final class RecordingPrompt: DaemonAuthenticatorPrompt {
        let pin: String?
        let statuses = Mutex<[String]>([])
        let secretsAsked = Mutex(0)

        init(pin: String? = nil) { self.pin = pin }

        func askSecret(_ question: SecretQuestion) async throws(RainError) -> SecretBytes {
            secretsAsked.withLock { $0 += 1 }
            var bytes = Array((pin ?? "").utf8)
            guard pin != nil, let secret = SecretBytes(taking: &bytes) else {
                throw RainError(.userCancelled, "no PIN in this test")
            }
            return secret
        }
        func confirm(_ what: String) async throws(RainError) {}
        func whileWaiting<T: Sendable>(
            _ status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
        ) async throws(RainError) -> T {
            statuses.withLock { $0.append(status) }
            return try await body()
        }
    }

    static let promptText = "confirm: export the recovery phrase of profile default for /usr/bin/wallet-app"
    static let request: [UInt8] = Array("export default".utf8)

    private func authenticator(_ keys: [SoftCTAP2Authenticator]) -> SecurityKeyAuthenticator {
        let listings = keys.map(\.listing)
        return SecurityKeyAuthenticator(list: { () throws(RainError) in try SecurityKeys.injected(listings) })
    }

    private func context(_ prompt: RecordingPrompt, timeout: Duration = .seconds(10)) -> DaemonAuthenticatorContext {
        DaemonAuthenticatorContext(origin: "https://\(TouchConfirmation.relyingPartyID)", timeout: timeout, prompt: prompt)
    }

    @Test func theChallengeCoversThePromptTextItsCodeAndTheRequest() {
        let base = TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Self.request)
        #expect(base.count == 32)
        #expect(base == TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Self.request))
        // The same request asked twice shows another code: another challenge.
        #expect(base != TouchConfirmation.challenge(promptText: Self.promptText, code: "654321", request: Self.request))
        #expect(base != TouchConfirmation.challenge(promptText: Self.promptText + "!", code: "123456", request: Self.request))
        #expect(base != TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Self.request + [0]))
        // Bytes moved from one field to the next do not give the same hash.
        #expect(
            TouchConfirmation.challenge(promptText: "ab", code: "c", request: [])
                != TouchConfirmation.challenge(promptText: "a", code: "bc", request: []))
    }

    @Test func aKeyIsRegisteredForTheDaemonsOwnRelyingPartyWithoutADiscoverableCredential() async throws {
        let fixture = try SecurityKeyFixture()
        defer { fixture.key.detach() }
        let prompt = RecordingPrompt()
        let registered = try await authenticator([fixture.key]).registerConfirmationKey(context: context(prompt))
        #expect(registered.name == fixture.key.product)
        #expect(try COSEPublicKey(encoded: registered.publicKey).algorithm == .es256)
        #expect(prompt.statuses.withLock { $0 } == [TouchConfirmation.touchStatus])
        // Non-resident: a discoverable request finds nothing; only the stored credential ID works.
        let device = try await fixture.open()
        let discoverable = await rainError {
            _ = try await SecurityKeyFixture.blocking { () throws(RainError) in
                try device.getAssertion(rpID: TouchConfirmation.relyingPartyID, clientDataHash: [UInt8](repeating: 1, count: 32))
            }
        }
        #expect(discoverable?.details.reason == SecurityKeyFailure.noCredentials.rawValue)
        #expect(TouchConfirmation.relyingPartyID.hasSuffix(".invalid"))
    }

    @Test func theDaemonWaitsForTheTouchShowsItAndAcceptsTheAssertion() async throws {
        let key = try SoftCTAP2Authenticator(name: "confirm", touch: .immediately)
        defer { key.detach() }
        let authenticator = authenticator([key])
        let registered = try await authenticator.registerConfirmationKey(context: context(RecordingPrompt()))
        key.setTouchPolicy(.manual)
        let prompt = RecordingPrompt()
        let challenge = TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Self.request)
        let task = Task {
            try await authenticator.confirmTouch(keys: [registered], challenge: challenge, context: context(prompt))
        }
        let blinking = try await SecurityKeyFixture.blocking { () throws(RainError) in key.waitUntilBlinking() }
        #expect(blinking)
        #expect(prompt.statuses.withLock { $0 } == [TouchConfirmation.touchStatus])
        key.touch()
        try await task.value
    }

    @Test func aKeyWithAPINConfirmsWithATouchAloneAfterItsPINWasGivenOnceToRegister() async throws {
        let key = try SoftCTAP2Authenticator(name: "confirm", touch: .immediately, pin: "4321")
        defer { key.detach() }
        let authenticator = authenticator([key])
        let registered = try await authenticator.registerConfirmationKey(context: context(RecordingPrompt(pin: "4321")))
        let prompt = RecordingPrompt()
        let challenge = TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Self.request)
        try await authenticator.confirmTouch(keys: [registered], challenge: challenge, context: context(prompt))
        #expect(prompt.secretsAsked.withLock { $0 } == 0)
    }

    @Test func nobodyTouchingTheKeyIsRAIN401ConfirmationKeyTimeout() async throws {
        let key = try SoftCTAP2Authenticator(name: "confirm", touch: .immediately, userPresenceTimeout: 0.3)
        defer { key.detach() }
        let authenticator = authenticator([key])
        let registered = try await authenticator.registerConfirmationKey(context: context(RecordingPrompt()))
        key.setTouchPolicy(.never)
        let challenge = TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Self.request)
        let error = await rainError {
            try await authenticator.confirmTouch(keys: [registered], challenge: challenge, context: context(RecordingPrompt()))
        }
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == TouchConfirmationFailure.timeout.rawValue)
    }

    @Test func noKeyPluggedInOrOnlyAnotherKeyIsRAIN404ConfirmationKeyMissing() async throws {
        let key = try SoftCTAP2Authenticator(name: "confirm", touch: .immediately)
        defer { key.detach() }
        let registered = try await authenticator([key]).registerConfirmationKey(context: context(RecordingPrompt()))
        let challenge = TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Self.request)

        let none = await rainError {
            try await authenticator([]).confirmTouch(
                keys: [registered], challenge: challenge, context: context(RecordingPrompt()))
        }
        #expect(none?.code == .unavailable)
        #expect(none?.details.reason == TouchConfirmationFailure.missing.rawValue)

        // No registered key: no key is asked at all (it would look for discoverable credentials).
        // Asked, this key would blink until the call's time limit: it would end as a timeout.
        key.setTouchPolicy(.never)
        let unregistered = await rainError {
            try await authenticator([key]).confirmTouch(
                keys: [], challenge: challenge, context: context(RecordingPrompt(), timeout: .seconds(2)))
        }
        #expect(unregistered?.details.reason == TouchConfirmationFailure.missing.rawValue)
        key.setTouchPolicy(.immediately)

        let other = try SoftCTAP2Authenticator(name: "other", touch: .immediately)
        defer { other.detach() }
        let wrongKey = await rainError {
            try await authenticator([other]).confirmTouch(
                keys: [registered], challenge: challenge, context: context(RecordingPrompt()))
        }
        #expect(wrongKey?.code == .unavailable)
        #expect(wrongKey?.details.reason == TouchConfirmationFailure.missing.rawValue)
    }

    @Test func anAssertionMadeForOneActionIsRefusedForAnotherAction() async throws {
        let fixture = try SecurityKeyFixture()
        defer { fixture.key.detach() }
        let registered = try await authenticator([fixture.key]).registerConfirmationKey(context: context(RecordingPrompt()))
        let device = try await fixture.open()
        let first = TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Self.request)
        let firstAssertion = try await SecurityKeyFixture.blocking { () throws(RainError) in
            try device.getAssertion(
                rpID: TouchConfirmation.relyingPartyID, clientDataHash: first,
                allowCredentialIDs: [registered.credentialID])
        }.first
        let assertion = try #require(firstAssertion)
        try TouchConfirmation.verify(assertion, challenge: first, keys: [registered])

        // The same request asked again (a new code), another request, another prompt text.
        let others = [
            TouchConfirmation.challenge(promptText: Self.promptText, code: "654321", request: Self.request),
            TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Array("sign 0xdead".utf8)),
            TouchConfirmation.challenge(promptText: "confirm: approve /usr/bin/other", code: "123456", request: Self.request),
        ]
        for other in others {
            let error = await rainError { try TouchConfirmation.verify(assertion, challenge: other, keys: [registered]) }
            #expect(error?.code == .userCancelled)
            #expect(error?.details.reason == TouchConfirmationFailure.refused.rawValue)
        }
        // A credential that is not registered is refused before anything else.
        var unknown = registered
        unknown.credentialID = [0] + registered.credentialID
        let unregistered = await rainError { try TouchConfirmation.verify(assertion, challenge: first, keys: [unknown]) }
        #expect(unregistered?.details.reason == TouchConfirmationFailure.refused.rawValue)
    }

    @Test func anAssertionForAnotherRelyingPartyIsRefusedAndItsCredentialIsNotAConfirmationKey() async throws {
        let fixture = try SecurityKeyFixture()
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        let registration = try await SecurityKeyFixture.blocking { () throws(RainError) in
            try device.makeCredential(
                rpID: SecurityKeyFixture.rpID, rpName: "Example", clientDataHash: [UInt8](repeating: 7, count: 32),
                user: SecurityKeyUser(id: [1], name: "ana", displayName: "Ana"), residentKey: false)
        }
        let notConfirmation = await rainError { _ = try TouchConfirmation.key(from: registration, name: "x") }
        #expect(notConfirmation?.code == .invalidArgument)
        #expect(notConfirmation?.details.reason == "confirmation_key_invalid")

        // Stored anyway (as if the store were tampered with): its site assertion still does not confirm.
        let parsed = try AuthenticatorData(parsing: registration.authenticatorData)
        let publicKey = try #require(parsed.attestedCredentialData?.publicKeyBytes)
        let stored = ConfirmationKey(credentialID: registration.credentialID, publicKey: publicKey, name: "x")
        let challenge = TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Self.request)
        let firstAssertion = try await SecurityKeyFixture.blocking { () throws(RainError) in
            try device.getAssertion(
                rpID: SecurityKeyFixture.rpID, clientDataHash: challenge, allowCredentialIDs: [registration.credentialID])
        }.first
        let assertion = try #require(firstAssertion)
        let error = await rainError { try TouchConfirmation.verify(assertion, challenge: challenge, keys: [stored]) }
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == TouchConfirmationFailure.refused.rawValue)
    }

    /// Assertions signed here, so that only the flags differ between the accepted and the refused one.
    @Test func anAssertionWithoutUserPresenceIsRefusedTheSameWithUPIsAccepted() async throws {
        let privateKey = try P256PrivateKey()
        let key = ConfirmationKey(
            credentialID: [9, 9, 9], publicKey: COSEPublicKey(p256: privateKey.publicKey).encoded, name: "forged")
        let challenge = TouchConfirmation.challenge(promptText: Self.promptText, code: "123456", request: Self.request)
        func assertion(flags: UInt8) throws -> SecurityKeyAssertion {
            let data = SHA256.hash(Array(TouchConfirmation.relyingPartyID.utf8)) + [flags, 0, 0, 0, 1]
            return SecurityKeyAssertion(
                credentialID: key.credentialID, authenticatorData: data,
                signature: try privateKey.signature(for: data + challenge), userHandle: nil)
        }
        try TouchConfirmation.verify(try assertion(flags: 0x01), challenge: challenge, keys: [key])
        let error = await rainError {
            try TouchConfirmation.verify(try assertion(flags: 0x00), challenge: challenge, keys: [key])
        }
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == TouchConfirmationFailure.refused.rawValue)
    }
}
