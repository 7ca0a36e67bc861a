import RainCore
import RainCrypto
import RainWebAuthn
import Testing

/// One change to an otherwise valid registration response, and the check it must trip.
struct RegistrationMutation: Sendable, CustomTestStringConvertible {
    var name: String
    var reason: WebAuthnFailure
    var packed = false
    var requireUserVerification = false
    var allowedAlgorithms: [Int] = COSEAlgorithm.supported.map(\.rawValue)
    var apply: @Sendable (inout RegistrationForge) throws -> Void
    var testDescription: String { name }
}

@Suite struct RegistrationVerificationTests {
    static let mutations: [RegistrationMutation] = [
        .init(name: "type is not public-key", reason: .credentialTypeInvalid) { $0.type = "password" },
        .init(name: "id is not base64url(rawId)", reason: .idMismatch) { $0.id = Base64URL.encode([1, 2, 3]) },
        .init(name: "id is not base64url at all", reason: .idMismatch) { $0.id = "not base64url!" },
        .init(name: "clientDataJSON is not JSON", reason: .malformedClientData) { $0.clientDataJSON = Array("{type".utf8) },
        .init(name: "clientDataJSON is not UTF-8", reason: .malformedClientData) { $0.clientDataJSON = [0x7B, 0xFF, 0x7D] },
        .init(name: "clientDataJSON has no challenge", reason: .malformedClientData) {
            $0.clientDataJSON = Array(#"{"type":"webauthn.create","origin":"https://example.com"}"#.utf8)
        },
        .init(name: "clientDataJSON.crossOrigin is not a boolean", reason: .malformedClientData) {
            $0.clientDataJSON = Array(
                #"{"type":"webauthn.create","challenge":"WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlo","origin":"https://example.com","crossOrigin":1}"#
                    .utf8)
        },
        .init(name: "clientData type is webauthn.get", reason: .clientDataTypeMismatch) {
            $0.clientData.type = CollectedClientData.getType
        },
        .init(name: "challenge differs", reason: .challengeMismatch) {
            $0.clientData.challenge = Base64URL.encode(Array(repeating: 0x5B, count: 32))
        },
        .init(name: "challenge is a prefix", reason: .challengeMismatch) {
            $0.clientData.challenge = Base64URL.encode(Array(repeating: 0x5A, count: 31))
        },
        .init(name: "challenge is not base64url", reason: .challengeMismatch) { $0.clientData.challenge = "***" },
        .init(name: "origin of another site", reason: .originNotAllowed) { $0.clientData.origin = "https://evil.example" },
        .init(name: "origin with a port", reason: .originNotAllowed) { $0.clientData.origin = "https://example.com:8443" },
        .init(name: "origin over http", reason: .originNotAllowed) { $0.clientData.origin = "http://example.com" },
        .init(name: "origin of a subdomain", reason: .originNotAllowed) { $0.clientData.origin = "https://a.example.com" },
        .init(name: "origin of another Android app", reason: .originNotAllowed) {
            $0.clientData.origin = RelyingParty.androidOrigin(certificateSHA256: Array(repeating: 0xCD, count: 32))
        },
        .init(name: "crossOrigin is true", reason: .crossOriginNotAllowed) { $0.clientData.crossOrigin = true },
        .init(name: "topOrigin is present", reason: .topOriginUnexpected) { $0.clientData.topOrigin = "https://framer.example" },
        .init(name: "attestation object has a trailing byte", reason: .malformedAttestationObject) {
            $0.attestationObjectSuffix = [0x00]
        },
        .init(name: "attestation object is not a map", reason: .malformedAttestationObject) {
            $0.attestationObject = CBOREncoder.encode(.array([.text("none")]))
        },
        .init(name: "attestation object lacks fmt", reason: .malformedAttestationObject) {
            $0.attestationObject = CBOREncoder.encode(
                .map([.init(.text("attStmt"), .map([])), .init(.text("authData"), .bytes([]))]))
        },
        .init(name: "attestation object is not CBOR", reason: .malformedAttestationObject) {
            $0.attestationObject = [0x9A, 0x10, 0x00, 0x00, 0x00]
        },
        .init(name: "authData has a trailing byte without ED", reason: .malformedAuthenticatorData) {
            $0.authenticatorDataSuffix = [0x00]
        },
        .init(name: "authData COSE key truncated", reason: .malformedAuthenticatorData) {
            $0.coseKey = [0xA5]  // a map header whose five entries are missing
        },
        .init(name: "authData credential ID runs past the end", reason: .malformedAuthenticatorData) {
            $0.authenticatorDataOverride =
                SHA256.hash(Array(TestRP.rpID.utf8)) + [0x41, 0, 0, 0, 0] + Array(repeating: 0, count: 16) + [
                    0x04, 0x00, 1, 2, 3,
                ]
        },
        .init(name: "authData shorter than 37 bytes", reason: .malformedAuthenticatorData) {
            $0.authenticatorDataOverride = Array(repeating: 0, count: 36)
        },
        .init(name: "rpIdHash of another domain", reason: .rpIDHashMismatch) {
            $0.rpIDHash = SHA256.hash(Array("evil.example".utf8))
        },
        .init(name: "rpIdHash of a parent domain", reason: .rpIDHashMismatch) { $0.rpIDHash = SHA256.hash(Array("com".utf8)) },
        .init(name: "UP is not set", reason: .userNotPresent) { $0.flags.remove(.userPresent) },
        .init(name: "UV is not set but required", reason: .userNotVerified, requireUserVerification: true) {
            $0.flags.remove(.userVerified)
        },
        .init(name: "BS without BE", reason: .backupStateWithoutEligibility) { $0.flags.insert(.backupState) },
        .init(name: "AT is not set", reason: .attestedCredentialDataMissing) { $0.includeAttestedCredentialData = false },
        .init(name: "credential ID of 1024 bytes", reason: .credentialIDTooLong) {
            $0.credentialID = Array(repeating: 0x42, count: 1024)
        },
        .init(name: "rawId differs from the authData credential ID", reason: .credentialIDMismatch) {
            $0.rawID = Array(16..<32)
        },
        .init(name: "COSE key of an unknown kty", reason: .unsupportedPublicKey) {
            $0.coseKey = CBOREncoder.encode(.map([.init(.integer(1), .integer(4)), .init(.integer(3), .integer(-7))]))
        },
        .init(name: "COSE key x of 31 bytes", reason: .malformedPublicKey) {
            $0.coseKey = CBOREncoder.encode(
                .map([
                    .init(.integer(1), .integer(2)), .init(.integer(3), .integer(-7)), .init(.integer(-1), .integer(1)),
                    .init(.integer(-2), .bytes(Array(repeating: 1, count: 31))),
                    .init(.integer(-3), .bytes(Array(repeating: 1, count: 32))),
                ]))
        },
        .init(name: "COSE key point not on P-256", reason: .publicKeyNotOnCurve) {
            $0.coseKey = CBOREncoder.encode(
                .map([
                    .init(.integer(1), .integer(2)), .init(.integer(3), .integer(-7)), .init(.integer(-1), .integer(1)),
                    .init(.integer(-2), .bytes(Array(repeating: 1, count: 32))),
                    .init(.integer(-3), .bytes(Array(repeating: 1, count: 32))),
                ]))
        },
        .init(name: "algorithm not offered", reason: .algorithmNotAllowed, allowedAlgorithms: [COSEAlgorithm.rs256.rawValue]) {
            _ in
        },
        .init(name: "publicKeyAlgorithm differs from the key", reason: .publicKeyAlgorithmMismatch) {
            $0.publicKeyAlgorithm = -257
        },
        .init(name: "response.authenticatorData differs", reason: .authenticatorDataMismatch) {
            $0.authenticatorDataCopy = Array(repeating: 0, count: 37)
        },
        .init(name: "attestation format fido-u2f", reason: .attestationFormatUnsupported) { $0.format = "fido-u2f" },
        .init(name: "attestation format Packed (case)", reason: .attestationFormatUnsupported) { $0.format = "Packed" },
        .init(name: "none with a non-empty attStmt", reason: .attestationStatementNotEmpty) {
            $0.extraStatementEntries = [.init(.text("alg"), .integer(-7))]
        },
        .init(name: "packed with x5c", reason: .attestationCertificateUnsupported, packed: true) {
            $0.extraStatementEntries = [.init(.text("x5c"), .array([.bytes([0x30, 0x00])]))]
        },
        .init(name: "packed without sig", reason: .malformedAttestationStatement, packed: true) {
            $0.statement = .map([.init(.text("alg"), .integer(Int64($0.key.algorithm.rawValue)))])
        },
        .init(name: "packed with an unknown member", reason: .malformedAttestationStatement, packed: true) {
            $0.extraStatementEntries = [.init(.text("ecdaaKeyId"), .bytes([1]))]
        },
        .init(name: "packed alg is not the key's", reason: .attestationAlgorithmMismatch, packed: true) {
            $0.packedAlgorithm = -257
        },
        .init(name: "packed signature corrupted", reason: .attestationSignatureInvalid, packed: true) {
            var signature = try $0.key.sign($0.authenticatorData() + SHA256.hash($0.clientData.serialized))
            signature[signature.count / 2] ^= 0x01
            $0.packedSignature = signature
        },
        .init(name: "packed signature over other client data", reason: .attestationSignatureInvalid, packed: true) {
            $0.packedSignature = try $0.key.sign($0.authenticatorData() + SHA256.hash(Array("{}".utf8)))
        },
        .init(name: "packed signature by another key", reason: .attestationSignatureInvalid, packed: true) {
            let other = try TestKey.make($0.key.algorithm)
            $0.packedSignature = try other.sign($0.authenticatorData() + SHA256.hash($0.clientData.serialized))
        },
    ]

    @Test(arguments: SignatureAlgorithm.allCases, [false, true])
    func validResponsePasses(algorithm: SignatureAlgorithm, packed: Bool) throws {
        let forge = RegistrationForge(key: try TestKey.make(algorithm.cose), packed: packed)
        let credential = try forge.verify(requireUserVerification: true)
        #expect(credential.credentialID == forge.credentialID)
        #expect(credential.publicKey.algorithm == algorithm.cose)
        #expect(credential.publicKey.encoded == forge.key.publicKey.encoded)
        #expect(credential.attestationFormat == (packed ? "packed" : "none"))
        #expect(credential.isUserVerified)
        #expect(!credential.isBackupEligible && !credential.isBackedUp)
        #expect(credential.transports == ["internal"])
    }

    @Test(arguments: mutations, SignatureAlgorithm.allCases)
    func eachCheckRefusesItsMutation(mutation: RegistrationMutation, algorithm: SignatureAlgorithm) throws {
        var forge = RegistrationForge(key: try TestKey.make(algorithm.cose), packed: mutation.packed)
        // The unmutated response passes with the same settings.
        _ = try forge.verify(
            allowedAlgorithms: COSEAlgorithm.supported.map(\.rawValue),
            requireUserVerification: mutation.requireUserVerification)
        try mutation.apply(&forge)
        let allowed = mutation.allowedAlgorithms
        let requireUV = mutation.requireUserVerification
        expectFailure(mutation.reason) { () throws(RainError) in
            _ = try forge.verify(allowedAlgorithms: allowed, requireUserVerification: requireUV)
        }
    }

    @Test func backupFlagsAreReported() throws {
        var forge = RegistrationForge(key: try TestKey.make(.es256))
        forge.flags.formUnion([.backupEligible, .backupState])
        let credential = try forge.verify()
        #expect(credential.isBackupEligible && credential.isBackedUp)
        forge.flags.remove(.backupState)
        let eligibleOnly = try forge.verify()
        #expect(eligibleOnly.isBackupEligible && !eligibleOnly.isBackedUp)
    }

    @Test func userVerificationIsOptionalUnlessRequired() throws {
        var forge = RegistrationForge(key: try TestKey.make(.edDSA))
        forge.flags.remove(.userVerified)
        #expect(try !forge.verify(requireUserVerification: false).isUserVerified)
    }

    @Test func credentialIDOf1023BytesIsAccepted() throws {
        var forge = RegistrationForge(key: try TestKey.make(.es256))
        forge.credentialID = Array(repeating: 0x42, count: 1023)
        #expect(try forge.verify().credentialID.count == 1023)
    }

    @Test func optionalResponseMembersMayBeAbsent() throws {
        var forge = RegistrationForge(key: try TestKey.make(.es256))
        forge.publicKeyAlgorithm = .some(nil)
        forge.authenticatorDataCopy = .some(nil)
        var response = try forge.build()
        response.clientExtensionResults = nil
        response.response.transports = nil
        let json = try response.jsonString()
        let decoded = try RegistrationResponseJSON.decode(json: json)
        let credential = try RelyingParty.verifyRegistration(
            response: decoded, expectedChallenge: forge.challenge, rpID: TestRP.rpID, allowedOrigins: TestRP.origins,
            allowedAlgorithms: [-7], requireUserVerification: false)
        #expect(credential.transports.isEmpty)
    }

    @Test func androidAppOriginIsAccepted() throws {
        var forge = RegistrationForge(key: try TestKey.make(.es256), packed: true)
        forge.clientData.origin = RelyingParty.androidOrigin(certificateSHA256: TestRP.androidFingerprint)
        _ = try forge.verify()
    }

    @Test func authenticatorExtensionsAreAccepted() throws {
        var forge = RegistrationForge(key: try TestKey.make(.es256), packed: true)
        let extensions = CBOREncoder.encode(.map([.init(.text("credProtect"), .integer(2))]))
        forge.authenticatorDataSuffix = extensions
        forge.flags.insert(.extensionData)
        _ = try forge.verify()
    }

    @Test func x5cRefusalSaysWhatToDo() throws {
        var forge = RegistrationForge(key: try TestKey.make(.es256), packed: true)
        forge.extraStatementEntries = [.init(.text("x5c"), .array([.bytes([0x30, 0x00])]))]
        let error = expectRainError(.invalidArgument) { () throws(RainError) in _ = try forge.verify() }
        #expect(error?.webAuthnFailure == .attestationCertificateUnsupported)
        #expect(error?.message.contains("x5c") == true)
    }
}
