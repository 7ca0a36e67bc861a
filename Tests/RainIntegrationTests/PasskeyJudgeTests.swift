import Foundation
import RainCore
import RainCrypto
import RainKeyStore
import RainPlatformAuthenticator
import RainSecurityKey
import RainSoftAuthenticator
import RainTestSupport
import RainWebAuthn
import Testing

/// An outside relying party (python-fido2's `Fido2Server`, pinned in tests/judges) verifies what
/// each of our authenticators produces, beside our own relying party: a registration, then
/// assertions. Both must accept the genuine ones and both must refuse a forged one, so the
/// judge's verdict can fail.
enum PasskeyJudge {
    static let rpID = "example.com"
    static let origin = "https://example.com"
    static let relyingParty = RelyingParty(
        rpID: rpID, rpName: "Example", allowedOrigins: RelyingParty.origins(domain: rpID, androidCertificateSHA256: []))

    /// One registration and `assertions` assertions through `authenticator`, each verified by our
    /// relying party; then the lot handed to the judge.
    /// - Returns: the judge's findings (`attestation`, `registration` and `assertions` flags) and
    ///   the request it was given, for tests that tamper with it.
    static func ceremonies(
        _ authenticator: any PasskeyAuthenticator, assertions: Int = 2,
        userVerification: UserVerificationRequirement = .preferred
    ) async throws -> (found: [String: Any], request: [String: Any]) {
        let party = RelyingParty(
            rpID: rpID, rpName: "Example", allowedOrigins: relyingParty.allowedOrigins, userVerification: userVerification)
        let challenge = try RelyingParty.makeChallenge()
        let user = PublicKeyCredentialUserEntityJSON(id: Array(repeating: 9, count: 32), name: "judge", displayName: "Judge")
        let registrationJSON = try await authenticator.createCredential(
            optionsJSON: try party.creationOptions(challenge: challenge, user: user).jsonString(), origin: origin)
        let credential = try party.verifyRegistration(
            try RegistrationResponseJSON.decode(json: registrationJSON), expectedChallenge: challenge)
        var request: [String: Any] = [
            "rpId": rpID,
            "registration": [
                "challenge": Base64URL.encode(challenge), "userVerification": userVerification.rawValue,
                "response": try jsonObject(registrationJSON),
            ],
        ]
        var authentications: [[String: Any]] = []
        var signCount: UInt32 = 0
        for _ in 0..<assertions {
            let assertionChallenge = try RelyingParty.makeChallenge()
            let assertionJSON = try await authenticator.getAssertion(
                optionsJSON: try party.requestOptions(challenge: assertionChallenge).jsonString(), origin: origin)
            let verified = try party.verifyAuthentication(
                try AuthenticationResponseJSON.decode(json: assertionJSON), expectedChallenge: assertionChallenge,
                credential: StoredCredential(
                    id: credential.credentialID, publicKey: credential.publicKey.encoded, signCount: signCount,
                    isBackupEligible: false))
            signCount = verified.signCount
            authentications.append([
                "challenge": Base64URL.encode(assertionChallenge), "userVerification": userVerification.rawValue,
                "response": try jsonObject(assertionJSON),
            ])
        }
        request["authentications"] = authentications
        let input = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
        return (try Judge.json("webauthn.py", [], input: input), request)
    }

    /// The judge's verdict on `request`: nil when it accepts, its refusal otherwise.
    static func refusal(_ request: [String: Any]) throws -> String? {
        let input = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
        let result = try Judge.run("webauthn.py", [], input: input)
        return result.status == 0 ? nil : result.stderr
    }

    /// `request` with the first assertion's signature changed in its last byte.
    static func withForgedSignature(_ request: [String: Any]) throws -> [String: Any] {
        var request = request
        var authentications = try #require(request["authentications"] as? [[String: Any]])
        var first = try #require(authentications.first)
        var response = try #require(first["response"] as? [String: Any])
        var inner = try #require(response["response"] as? [String: Any])
        let encoded = try #require(inner["signature"] as? String)
        var signature = try #require(Base64URL.decode(encoded))
        signature[signature.count - 1] ^= 0x01
        inner["signature"] = Base64URL.encode(signature)
        response["response"] = inner
        first["response"] = response
        authentications[0] = first
        request["authentications"] = authentications
        return request
    }

    /// `request` with the first assertion answering another challenge than the one issued.
    static func withOtherChallenge(_ request: [String: Any]) throws -> [String: Any] {
        var request = request
        var authentications = try #require(request["authentications"] as? [[String: Any]])
        authentications[0]["challenge"] = Base64URL.encode(try RelyingParty.makeChallenge())
        request["authentications"] = authentications
        return request
    }
}

/// A daemon authenticator as the judge's ceremonies drive it: the prompt confirms and asks nothing.
struct DaemonRun: PasskeyAuthenticator {
    struct QuietPrompt: DaemonAuthenticatorPrompt {
        func askSecret(_ question: SecretQuestion) async throws(RainError) -> SecretBytes {
            throw RainError(.userCancelled, "no PIN in this test")
        }
        func confirm(_ what: String) async throws(RainError) {}
        func whileWaiting<T: Sendable>(
            _ status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
        ) async throws(RainError) -> T { try await body() }
    }

    let authenticator: any DaemonAuthenticator

    func context(_ origin: String) -> DaemonAuthenticatorContext {
        DaemonAuthenticatorContext(origin: origin, timeout: .seconds(20), prompt: QuietPrompt())
    }
    func createCredential(optionsJSON: String, origin: String) async throws -> String {
        try await authenticator.register(optionsJSON: optionsJSON, context: context(origin))
    }
    func getAssertion(optionsJSON: String, origin: String) async throws -> String {
        try await authenticator.authenticate(optionsJSON: optionsJSON, context: context(origin))
    }
}

@Suite("Passkeys judged by python-fido2's Fido2Server")
struct PasskeyJudgeTests {
    @Test(
        "the file authenticator's registration and assertions pass the outside relying party; a forged signature or another challenge does not"
    )
    func fileAuthenticator() async throws {
        let directory = NSTemporaryDirectory() + "rain-judge-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let authenticator = SoftAuthenticator(path: directory + "/keys.json")
        let (found, request) = try await PasskeyJudge.ceremonies(authenticator)

        #expect(found["attestation"] as? String == "none", "\(found)")
        let assertions = try #require(found["assertions"] as? [[String: Any]])
        #expect(assertions.count == 2)
        #expect(assertions.allSatisfy { $0["userPresent"] as? Bool == true }, "\(assertions)")
        // The counter moves on each assertion, as our relying party checked too.
        #expect(assertions.compactMap { $0["signCount"] as? Int } == [1, 2], "\(assertions)")

        let forged = try PasskeyJudge.refusal(try PasskeyJudge.withForgedSignature(request))
        #expect(forged?.contains("Invalid signature") == true, "\(forged ?? "accepted")")
        let replayed = try PasskeyJudge.refusal(try PasskeyJudge.withOtherChallenge(request))
        #expect(replayed?.contains("Wrong challenge") == true, "\(replayed ?? "accepted")")
    }

    @Test(
        "the TPM platform authenticator's registration and assertions, with a PIN (UV), pass the outside relying party, device-bound; a forged signature does not"
    )
    func platformAuthenticator() async throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let directory = "/tmp/rain-judge-\(UUID().uuidString.prefix(8).lowercased())"
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let provider = TPM2KeyProvider(stateDirectory: directory, tcti: tpm.tcti)
        let hooks = PlatformAuthenticatorHooks(
            confirmPresence: { _ throws(RainError) in },
            askPIN: { _ throws(RainError) -> PlatformPIN? in
                var digits = Array("246810".utf8)
                return try PlatformPIN(digits: &digits)
            })
        let authenticator = try TPM2PlatformAuthenticator.make(
            provider: provider, storageKey: try provider.loadOrCreateSecret(.storage),
            directory: directory + "/platform", hooks: hooks)
        let (found, request) = try await PasskeyJudge.ceremonies(authenticator, userVerification: .required)

        #expect(found["attestation"] as? String == "none", "\(found)")
        let registration = try #require(found["registration"] as? [String: Any])
        #expect(registration["backupEligible"] as? Bool == false && registration["backedUp"] as? Bool == false)
        let assertions = try #require(found["assertions"] as? [[String: Any]])
        #expect(assertions.count == 2)
        #expect(
            assertions.allSatisfy { $0["userPresent"] as? Bool == true && $0["userVerified"] as? Bool == true },
            "\(assertions)")
        // No counter: the key cannot leave the TPM, so none is kept (WebAuthn reads 0 as none).
        #expect(assertions.compactMap { $0["signCount"] as? Int } == [0, 0], "\(assertions)")

        let forged = try PasskeyJudge.refusal(try PasskeyJudge.withForgedSignature(request))
        #expect(forged?.contains("Invalid signature") == true, "\(forged ?? "accepted")")
    }

    @Test(
        "a security key's registration and assertions, run as the daemon runs them (real libfido2, a software CTAP2 key), pass the outside relying party; a forged signature does not"
    )
    func securityKey() async throws {
        let key = try SoftCTAP2Authenticator(name: "judge", touch: .immediately)
        let listing = key.listing
        let authenticator = SecurityKeyAuthenticator(list: { () throws(RainError) in try SecurityKeys.injected([listing]) })
        let (found, request) = try await PasskeyJudge.ceremonies(DaemonRun(authenticator: authenticator))

        // Sent as attestation none, as a browser does unless the site asks for more.
        #expect(found["attestation"] as? String == "none", "\(found)")
        let assertions = try #require(found["assertions"] as? [[String: Any]])
        #expect(assertions.count == 2 && assertions.allSatisfy { $0["userPresent"] as? Bool == true }, "\(assertions)")
        let counts = assertions.compactMap { $0["signCount"] as? Int }
        #expect(counts.count == 2 && counts[1] > counts[0], "the key's counter moves: \(counts)")

        let forged = try PasskeyJudge.refusal(try PasskeyJudge.withForgedSignature(request))
        #expect(forged?.contains("Invalid signature") == true, "\(forged ?? "accepted")")
    }
}
