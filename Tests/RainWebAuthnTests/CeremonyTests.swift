import Foundation
import RainCore
import RainCrypto
import RainSoftAuthenticator
import RainSystem
import RainWebAuthn
import Testing

@Suite struct CeremonyTests {
    /// Registers with the software authenticator and verifies; returns what the RP would store.
    func register(
        _ authenticator: SoftAuthenticator, relyingParty: RelyingParty = TestRP.relyingParty, origin: String = TestRP.origin,
        excluding: [[UInt8]] = []
    ) throws(RainError) -> (VerifiedCredential, StoredCredential) {
        let challenge = try RelyingParty.makeChallenge()
        let options = relyingParty.creationOptions(challenge: challenge, user: TestRP.user, excludeCredentialIDs: excluding)
        let response = try authenticator.register(options: options, origin: origin)
        // Through JSON text, as over the socket.
        let decoded = try RegistrationResponseJSON.decode(json: try response.jsonString())
        let credential = try relyingParty.verifyRegistration(decoded, expectedChallenge: challenge)
        let stored = StoredCredential(
            id: credential.credentialID, publicKey: credential.publicKey.encoded, signCount: credential.signCount,
            isBackupEligible: credential.isBackupEligible, userHandle: TestRP.user.id.bytes)
        return (credential, stored)
    }

    func authenticate(
        _ authenticator: SoftAuthenticator, stored: StoredCredential, relyingParty: RelyingParty = TestRP.relyingParty,
        origin: String = TestRP.origin, allow: [[UInt8]] = []
    ) throws(RainError) -> VerifiedAssertion {
        let challenge = try RelyingParty.makeChallenge()
        let options = relyingParty.requestOptions(challenge: challenge, allowCredentialIDs: allow)
        let response = try authenticator.authenticate(options: options, origin: origin)
        let decoded = try AuthenticationResponseJSON.decode(json: try response.jsonString())
        return try relyingParty.verifyAuthentication(
            decoded, expectedChallenge: challenge, credential: stored, allowCredentialIDs: allow)
    }

    @Test(arguments: SignatureAlgorithm.allCases, SoftAuthenticator.Attestation.allCases)
    func registerThenAuthenticate(algorithm: SignatureAlgorithm, attestation: SoftAuthenticator.Attestation) throws {
        let authenticator = SoftAuthenticator(
            path: temporaryKeyFilePath(),
            configuration: .init(attestation: attestation, supportedAlgorithms: [algorithm.cose]))
        let (credential, stored) = try register(authenticator)
        #expect(credential.publicKey.algorithm == algorithm.cose)
        #expect(credential.attestationFormat == (attestation == .none ? "none" : "packed"))
        #expect(credential.signCount == 0)
        #expect(credential.aaguid == PasskeyKind.fileAAGUID)
        #expect(credential.isUserVerified)

        let first = try authenticate(authenticator, stored: stored)
        #expect(first.credentialID == credential.credentialID)
        #expect(first.signCount == 1)
        #expect(first.userHandle == TestRP.user.id.bytes)
        var updated = stored
        updated.signCount = first.signCount
        let second = try authenticate(authenticator, stored: updated, allow: [credential.credentialID])
        #expect(second.signCount == 2)
    }

    @Test func replayedAssertionIsRefused() throws {
        let authenticator = SoftAuthenticator(path: temporaryKeyFilePath())
        var (_, stored) = try register(authenticator)
        let challenge = try RelyingParty.makeChallenge()
        let options = TestRP.relyingParty.requestOptions(challenge: challenge)
        let response = try authenticator.authenticate(options: options, origin: TestRP.origin)
        let result = try TestRP.relyingParty.verifyAuthentication(response, expectedChallenge: challenge, credential: stored)
        stored.signCount = result.signCount
        expectFailure(.signCountRegression) { () throws(RainError) in
            _ = try TestRP.relyingParty.verifyAuthentication(response, expectedChallenge: challenge, credential: stored)
        }
    }

    @Test func packedSelfAttestationCanBeAskedPerCeremony() throws {
        let authenticator = SoftAuthenticator(path: temporaryKeyFilePath())
        let challenge = try RelyingParty.makeChallenge()
        let options = TestRP.relyingParty.creationOptions(challenge: challenge, user: TestRP.user)
        let response = try authenticator.register(options: options, origin: TestRP.origin, attestation: .packedSelf)
        #expect(try TestRP.relyingParty.verifyRegistration(response, expectedChallenge: challenge).attestationFormat == "packed")
    }

    @Test func theFirstOfferedAlgorithmItSupportsIsUsed() throws {
        let authenticator = SoftAuthenticator(path: temporaryKeyFilePath())
        var relyingParty = TestRP.relyingParty
        relyingParty.algorithms = [.rs256, .edDSA, .es256]
        #expect(try register(authenticator, relyingParty: relyingParty).0.publicKey.algorithm == .edDSA)
        relyingParty.algorithms = [.rs256]
        let error = expectRainError(.invalidArgument) { () throws(RainError) in
            _ = try authenticator.register(
                options: relyingParty.creationOptions(challenge: Array(repeating: 1, count: 32), user: TestRP.user),
                origin: TestRP.origin)
        }
        #expect(error?.details.reason == "algorithm_not_supported")
    }

    @Test func countersOffMeansZeroOnBothSides() throws {
        let authenticator = SoftAuthenticator(path: temporaryKeyFilePath(), configuration: .init(usesSignCounter: false))
        let (_, stored) = try register(authenticator)
        #expect(try authenticate(authenticator, stored: stored).signCount == 0)
        #expect(try authenticate(authenticator, stored: stored).signCount == 0)
    }

    @Test func syncedCredentialsCarryBackupFlags() throws {
        let authenticator = SoftAuthenticator(
            path: temporaryKeyFilePath(), configuration: .init(createsSyncedCredentials: true))
        let (credential, stored) = try register(authenticator)
        #expect(credential.isBackupEligible && credential.isBackedUp)
        #expect(try authenticate(authenticator, stored: stored).isBackedUp)
    }

    @Test func requiredUserVerificationIsEnforced() throws {
        var relyingParty = TestRP.relyingParty
        relyingParty.userVerification = .required
        let verifying = SoftAuthenticator(path: temporaryKeyFilePath())
        let (_, stored) = try register(verifying, relyingParty: relyingParty)
        #expect(try authenticate(verifying, stored: stored, relyingParty: relyingParty).isUserVerified)

        let notVerifying = SoftAuthenticator(path: temporaryKeyFilePath(), configuration: .init(isUserVerifying: false))
        let error = expectRainError(.invalidArgument) { () throws(RainError) in
            _ = try notVerifying.register(
                options: relyingParty.creationOptions(challenge: Array(repeating: 1, count: 32), user: TestRP.user),
                origin: TestRP.origin)
        }
        #expect(error?.details.reason == "user_verification_unavailable")
    }

    @Test func androidAppOrigin() throws {
        let authenticator = SoftAuthenticator(path: temporaryKeyFilePath())
        let origin = RelyingParty.androidOrigin(certificateSHA256: TestRP.androidFingerprint)
        let (_, stored) = try register(authenticator, origin: origin)
        _ = try authenticate(authenticator, stored: stored, origin: origin)
    }

    @Test func subdomainOriginMayUseTheParentRPID() throws {
        let authenticator = SoftAuthenticator(path: temporaryKeyFilePath())
        var relyingParty = TestRP.relyingParty
        relyingParty.allowedOrigins.insert("https://app.example.com")
        _ = try register(authenticator, relyingParty: relyingParty, origin: "https://app.example.com")
    }

    @Test(arguments: [
        "https://example.org", "https://notexample.com", "http://example.com", "https://example.com/path", "example.com",
    ])
    func originThatMayNotUseTheRPIDIsRefused(origin: String) throws {
        let authenticator = SoftAuthenticator(path: temporaryKeyFilePath())
        let error = expectRainError(.invalidArgument) { () throws(RainError) in
            _ = try authenticator.register(
                options: TestRP.relyingParty.creationOptions(challenge: Array(repeating: 1, count: 32), user: TestRP.user),
                origin: origin)
        }
        #expect(error?.details.reason == "rp_id_not_allowed")
    }

    @Test func excludedCredentialIsNotCreatedTwice() throws {
        let authenticator = SoftAuthenticator(path: temporaryKeyFilePath())
        let (credential, _) = try register(authenticator)
        let error = expectRainError(.invalidArgument) { () throws(RainError) in
            _ = try register(authenticator, excluding: [credential.credentialID])
        }
        #expect(error?.details.reason == "credential_excluded")
        #expect(try authenticator.credentials().count == 1)
    }

    @Test func dismissingIsUserCancelledAndChangesNothing() throws {
        let path = temporaryKeyFilePath()
        let authenticator = SoftAuthenticator(path: path)
        let (_, stored) = try register(authenticator)
        let before = try #require(try AtomicFile.read(path))
        authenticator.setDismissing(true)
        #expect(authenticator.isDismissing)
        let registration = expectRainError(.userCancelled) { () throws(RainError) in _ = try register(authenticator) }
        #expect(registration?.details.reason == "dismissed")
        let assertion = expectRainError(.userCancelled) { () throws(RainError) in
            _ = try authenticate(authenticator, stored: stored)
        }
        #expect(assertion == .userCancelled)
        #expect(try AtomicFile.read(path) == before)
        authenticator.setDismissing(false)
        _ = try authenticate(authenticator, stored: stored)
    }

    @Test func noPasskeyForTheDomainIsUserCancelled() throws {
        let authenticator = SoftAuthenticator(path: temporaryKeyFilePath())
        _ = try register(authenticator)
        var other = TestRP.relyingParty
        other.rpID = "example.org"
        other.allowedOrigins = ["https://example.org"]
        let error = expectRainError(.userCancelled) { () throws(RainError) in
            _ = try authenticator.authenticate(
                options: other.requestOptions(challenge: Array(repeating: 1, count: 32)), origin: "https://example.org")
        }
        #expect(error?.details.reason == "no_credentials")
        let notAllowed = expectRainError(.userCancelled) { () throws(RainError) in
            _ = try authenticator.authenticate(
                options: TestRP.relyingParty.requestOptions(
                    challenge: Array(repeating: 1, count: 32), allowCredentialIDs: [[1, 2, 3]]),
                origin: TestRP.origin)
        }
        #expect(notAllowed?.details.reason == "no_credentials")
    }

    @Test func keyFileIsPrivateAndSurvivesARestart() throws {
        let path = temporaryKeyFilePath()
        let (_, stored) = try register(SoftAuthenticator(path: path, configuration: .init(supportedAlgorithms: [.edDSA])))
        var status = stat()
        #expect(stat(path, &status) == 0)
        #expect(status.st_mode & 0o777 == 0o600)

        let restarted = SoftAuthenticator(path: path)
        let summaries = try restarted.credentials()
        #expect(summaries.count == 1)
        #expect(summaries.first?.rpID == TestRP.rpID)
        #expect(summaries.first?.algorithm == .edDSA)
        #expect(summaries.first?.userName == "alice")
        #expect(try authenticate(restarted, stored: stored).signCount == 1)
        #expect(try SoftAuthenticator(path: path).credentials().first?.signCount == 1)
    }

    @Test func keyFileReadableByOthersIsRefused() throws {
        let path = temporaryKeyFilePath()
        let authenticator = SoftAuthenticator(path: path)
        _ = try register(authenticator)
        #expect(chmod(path, 0o644) == 0)
        let error = expectRainError(.invalidArgument) { () throws(RainError) in _ = try authenticator.credentials() }
        #expect(error?.details.reason == "key_file_mode")
    }

    @Test func corruptKeyFileIsRefused() throws {
        let path = temporaryKeyFilePath()
        try AtomicFile.makeDirectory((path as NSString).deletingLastPathComponent)
        try AtomicFile.write(Array("{not json".utf8), to: path)
        let error = expectRainError(.invalidArgument) { () throws(RainError) in
            _ = try SoftAuthenticator(path: path).credentials()
        }
        #expect(error?.details.reason == "key_file_invalid")
    }

    @Test func passkeyAuthenticatorSpeaksJSONText() async throws {
        let authenticator: any PasskeyAuthenticator = SoftAuthenticator(path: temporaryKeyFilePath())
        let relyingParty = TestRP.relyingParty
        let challenge = try RelyingParty.makeChallenge()
        let creation = try relyingParty.creationOptions(challenge: challenge, user: TestRP.user).jsonString()
        let registrationJSON = try await authenticator.createCredential(optionsJSON: creation, origin: TestRP.origin)
        let credential = try relyingParty.verifyRegistration(
            try RegistrationResponseJSON.decode(json: registrationJSON), expectedChallenge: challenge)

        let assertionChallenge = try RelyingParty.makeChallenge()
        let request = try relyingParty.requestOptions(challenge: assertionChallenge).jsonString()
        let assertionJSON = try await authenticator.getAssertion(optionsJSON: request, origin: TestRP.origin)
        let result = try relyingParty.verifyAuthentication(
            try AuthenticationResponseJSON.decode(json: assertionJSON), expectedChallenge: assertionChallenge,
            credential: StoredCredential(
                id: credential.credentialID, publicKey: credential.publicKey.encoded, signCount: 0, isBackupEligible: false))
        #expect(result.signCount == 1)

        do {
            _ = try await authenticator.createCredential(optionsJSON: "{}", origin: TestRP.origin)
            Issue.record("malformed options were accepted")
        } catch {
            #expect((error as? RainError)?.details.reason == WebAuthnFailure.malformedResponse.rawValue)
        }
    }

    @Test func dismissalThroughTheProtocolIsRAIN401() async throws {
        let soft = SoftAuthenticator(path: temporaryKeyFilePath())
        soft.setDismissing(true)
        let authenticator: any PasskeyAuthenticator = soft
        let creation = try TestRP.relyingParty.creationOptions(challenge: Array(repeating: 1, count: 32), user: TestRP.user)
            .jsonString()
        do {
            _ = try await authenticator.createCredential(optionsJSON: creation, origin: TestRP.origin)
            Issue.record("a dismissed ceremony returned")
        } catch {
            // Through the protocol (plain throws) the error is still the authenticator's RainError.
            #expect((error as? RainError) == .userCancelled)
        }
    }

    // MARK: - RS256 (fixed vector)

    static func rs256Key() throws -> COSEPublicKey {
        let rsa = try RSAPublicKey(
            modulus: try hexBytes(RS256Vector.modulus.filter { !$0.isWhitespace }), exponent: try hexBytes(RS256Vector.exponent))
        return COSEPublicKey(rsa: rsa)
    }

    @Test func rs256RegistrationWithPackedSelfAttestation() throws {
        let key = try Self.rs256Key()
        let authData = try hexBytes(RS256Vector.registrationAuthenticatorData.filter { !$0.isWhitespace })
        // The COSE key the vector carries is the canonical encoding this module produces.
        let parsed = try AuthenticatorData(parsing: authData)
        #expect(parsed.attestedCredentialData?.publicKeyBytes == key.encoded)
        #expect(parsed.encoded == authData)

        let statement = CBORValue.map([
            .init(.text("alg"), .integer(-257)),
            .init(.text("sig"), .bytes(try hexBytes(RS256Vector.registrationSignature.filter { !$0.isWhitespace }))),
        ])
        let object = AttestationObject(format: "packed", statement: statement, authenticatorData: parsed)
        let credentialID = Array(UInt8(0xA0)...UInt8(0xAF))
        let response = RegistrationResponseJSON(
            rawId: credentialID,
            response: AuthenticatorAttestationResponseJSON(
                clientDataJSON: Array(RS256Vector.registrationClientDataJSON.utf8), attestationObject: object.encoded))
        let challenge = Array(UInt8(1)...UInt8(32))
        let credential = try RelyingParty.verifyRegistration(
            response: response, expectedChallenge: challenge, rpID: "example.com", allowedOrigins: ["https://example.com"],
            allowedAlgorithms: [-257], requireUserVerification: true)
        #expect(credential.publicKey.algorithm == .rs256)
        #expect(credential.attestationFormat == "packed")

        expectFailure(.algorithmNotAllowed) { () throws(RainError) in
            _ = try RelyingParty.verifyRegistration(
                response: response, expectedChallenge: challenge, rpID: "example.com",
                allowedOrigins: ["https://example.com"], allowedAlgorithms: [-7, -8], requireUserVerification: false)
        }
    }

    @Test func rs256Assertion() throws {
        let key = try Self.rs256Key()
        let authData = SHA256.hash(Array("example.com".utf8)) + [0x05, 0, 0, 0, 7]
        let credentialID = Array(UInt8(0xA0)...UInt8(0xAF))
        var signature = try hexBytes(RS256Vector.assertionSignature.filter { !$0.isWhitespace })
        let stored = StoredCredential(id: credentialID, publicKey: key.encoded, signCount: 6, isBackupEligible: false)
        func response(_ signature: [UInt8]) -> AuthenticationResponseJSON {
            AuthenticationResponseJSON(
                rawId: credentialID,
                response: AuthenticatorAssertionResponseJSON(
                    clientDataJSON: Array(RS256Vector.assertionClientDataJSON.utf8), authenticatorData: authData,
                    signature: signature))
        }
        let challenge = Array(UInt8(1)...UInt8(32))
        let result = try RelyingParty.verifyAuthentication(
            response: response(signature), expectedChallenge: challenge, rpID: "example.com",
            allowedOrigins: ["https://example.com"], credential: stored, requireUserVerification: true)
        #expect(result.signCount == 7)

        signature[0] ^= 0x80
        let corrupted = response(signature)
        expectFailure(.signatureInvalid) { () throws(RainError) in
            _ = try RelyingParty.verifyAuthentication(
                response: corrupted, expectedChallenge: challenge, rpID: "example.com",
                allowedOrigins: ["https://example.com"], credential: stored, requireUserVerification: false)
        }
    }
}
