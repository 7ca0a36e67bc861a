import RainCore
import RainCrypto
import RainWebAuthn
import Testing

/// One change to an otherwise valid authentication response, and the check it must trip.
struct AssertionMutation: Sendable, CustomTestStringConvertible {
    var name: String
    var reason: WebAuthnFailure
    var requireUserVerification = false
    var apply: @Sendable (inout AssertionForge) throws -> Void
    var testDescription: String { name }
}

@Suite struct AuthenticationVerificationTests {
    static let mutations: [AssertionMutation] = [
        .init(name: "type is not public-key", reason: .credentialTypeInvalid) { $0.type = "public-key2" },
        .init(name: "id is not base64url(rawId)", reason: .idMismatch) { $0.id = Base64URL.encode([9, 9]) },
        .init(name: "rawId names another credential", reason: .credentialMismatch) {
            $0.rawID = Array(200..<232)
        },
        .init(name: "credential not in allowCredentials", reason: .credentialNotAllowed) {
            $0.allowCredentialIDs = [Array(repeating: 1, count: 16), Array(repeating: 2, count: 16)]
        },
        .init(name: "userHandle of another account", reason: .userHandleMismatch) {
            $0.userHandle = Array(repeating: 8, count: 32)
        },
        .init(name: "clientDataJSON is not JSON", reason: .malformedClientData) { $0.clientDataJSON = Array("[]".utf8) },
        .init(name: "clientDataJSON origin is a number", reason: .malformedClientData) {
            $0.clientDataJSON = Array(
                #"{"type":"webauthn.get","challenge":"a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s","origin":7}"#.utf8)
        },
        .init(name: "clientData type is webauthn.create", reason: .clientDataTypeMismatch) {
            $0.clientData.type = CollectedClientData.createType
        },
        .init(name: "clientData type is empty", reason: .clientDataTypeMismatch) { $0.clientData.type = "" },
        .init(name: "challenge differs", reason: .challengeMismatch) {
            $0.clientData.challenge = Base64URL.encode(Array(repeating: 0x6C, count: 32))
        },
        .init(name: "challenge of the registration ceremony", reason: .challengeMismatch) {
            $0.clientData.challenge = Base64URL.encode(Array(repeating: 0x5A, count: 32))
        },
        .init(name: "origin of another site", reason: .originNotAllowed) { $0.clientData.origin = "https://example.org" },
        .init(name: "origin with a trailing slash", reason: .originNotAllowed) { $0.clientData.origin = "https://example.com/" },
        .init(name: "crossOrigin is true", reason: .crossOriginNotAllowed) { $0.clientData.crossOrigin = true },
        .init(name: "topOrigin is present", reason: .topOriginUnexpected) {
            $0.clientData.crossOrigin = false
            $0.clientData.topOrigin = "https://example.com"
        },
        .init(name: "authData shorter than 37 bytes", reason: .malformedAuthenticatorData) {
            $0.authenticatorData = Array(repeating: 0, count: 36)
        },
        .init(name: "authData with a trailing byte", reason: .malformedAuthenticatorData) { $0.authenticatorDataSuffix = [0xA0] },
        .init(name: "ED set without extensions", reason: .malformedAuthenticatorData) { $0.flags.insert(.extensionData) },
        .init(name: "extensions are not a map", reason: .malformedAuthenticatorData) {
            $0.extensions = CBOREncoder.encode(.array([]))
        },
        .init(name: "extensions with a duplicate key", reason: .malformedAuthenticatorData) {
            $0.extensions = [0xA2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02]
        },
        .init(name: "AT set without attested credential data", reason: .malformedAuthenticatorData) {
            $0.flags.insert(.attestedCredentialData)
        },
        .init(name: "rpIdHash of another domain", reason: .rpIDHashMismatch) {
            $0.rpIDHash = SHA256.hash(Array("example.org".utf8))
        },
        .init(name: "UP is not set", reason: .userNotPresent) { $0.flags.remove(.userPresent) },
        .init(name: "UV is not set but required", reason: .userNotVerified, requireUserVerification: true) {
            $0.flags.remove(.userVerified)
        },
        .init(name: "BS without BE", reason: .backupStateWithoutEligibility) { $0.flags.insert(.backupState) },
        .init(name: "BE appears on a single-device credential", reason: .backupEligibilityChanged) {
            $0.flags.insert(.backupEligible)
        },
        .init(name: "BE disappears from a synced credential", reason: .backupEligibilityChanged) {
            $0.stored.isBackupEligible = true
        },
        .init(name: "signature corrupted", reason: .signatureInvalid) { $0.corruptSignature = true },
        .init(name: "signature by another key", reason: .signatureInvalid) {
            $0.signingKey = try TestKey.make($0.key.algorithm)
        },
        .init(name: "signature empty", reason: .signatureInvalid) { $0.signature = [] },
        .init(name: "signature over other client data", reason: .signatureInvalid) {
            $0.signature = try $0.key.sign($0.authenticatorDataBytes() + SHA256.hash(Array("{}".utf8)))
        },
        .init(name: "sign count equal to the stored one", reason: .signCountRegression) { $0.signCount = 4 },
        .init(name: "sign count lower than the stored one", reason: .signCountRegression) { $0.signCount = 3 },
        .init(name: "sign count zero after a non-zero one", reason: .signCountRegression) { $0.signCount = 0 },
    ]

    @Test(arguments: SignatureAlgorithm.allCases)
    func validResponsePasses(algorithm: SignatureAlgorithm) throws {
        let forge = AssertionForge(key: try TestKey.make(algorithm.cose))
        let result = try forge.verify(requireUserVerification: true)
        #expect(result.credentialID == forge.credentialID)
        #expect(result.signCount == 5)
        #expect(result.isUserVerified)
        #expect(!result.isBackedUp)
        #expect(result.userHandle == forge.userHandle)
    }

    @Test(arguments: mutations, SignatureAlgorithm.allCases)
    func eachCheckRefusesItsMutation(mutation: AssertionMutation, algorithm: SignatureAlgorithm) throws {
        var forge = AssertionForge(key: try TestKey.make(algorithm.cose))
        _ = try forge.verify(requireUserVerification: mutation.requireUserVerification)
        try mutation.apply(&forge)
        let requireUV = mutation.requireUserVerification
        expectFailure(mutation.reason) { () throws(RainError) in
            _ = try forge.verify(requireUserVerification: requireUV)
        }
    }

    @Test func zeroCountersOnBothSidesAreAccepted() throws {
        var forge = AssertionForge(key: try TestKey.make(.es256))
        forge.signCount = 0
        forge.stored.signCount = 0
        #expect(try forge.verify().signCount == 0)
    }

    @Test func countersMayJump() throws {
        var forge = AssertionForge(key: try TestKey.make(.edDSA))
        forge.signCount = UInt32.max
        #expect(try forge.verify().signCount == UInt32.max)
    }

    @Test func backupStateIsReportedForSyncedCredentials() throws {
        var forge = AssertionForge(key: try TestKey.make(.es256))
        forge.stored.isBackupEligible = true
        forge.flags.formUnion([.backupEligible, .backupState])
        #expect(try forge.verify().isBackedUp)
        forge.flags.remove(.backupState)
        #expect(try !forge.verify().isBackedUp)
    }

    @Test func allowCredentialsContainingTheCredentialPasses() throws {
        var forge = AssertionForge(key: try TestKey.make(.es256))
        forge.allowCredentialIDs = [Array(repeating: 1, count: 16), forge.credentialID]
        _ = try forge.verify()
    }

    @Test func absentUserHandleIsAccepted() throws {
        var forge = AssertionForge(key: try TestKey.make(.es256))
        forge.userHandle = nil
        #expect(try forge.verify().userHandle == nil)
    }

    @Test func emptyUserHandleMeansNone() throws {
        var forge = AssertionForge(key: try TestKey.make(.es256))
        forge.userHandle = []
        #expect(try forge.verify().userHandle == nil)
    }

    @Test func extensionsAreAccepted() throws {
        var forge = AssertionForge(key: try TestKey.make(.edDSA))
        forge.extensions = CBOREncoder.encode(.map([.init(.text("example"), .bool(true))]))
        _ = try forge.verify()
    }

    @Test func byteOrderMarkInClientDataIsDropped() throws {
        var forge = AssertionForge(key: try TestKey.make(.es256))
        forge.clientDataJSON = [0xEF, 0xBB, 0xBF] + forge.clientData.serialized
        _ = try forge.verify()
    }

    @Test func unknownClientDataMembersAreIgnored() throws {
        var forge = AssertionForge(key: try TestKey.make(.es256))
        var json = forge.clientData.serialized
        json.removeLast()
        json += Array(#","other_keys_can_be_added_here":"do not compare clientDataJSON against a template"}"#.utf8)
        forge.clientDataJSON = json
        _ = try forge.verify()
    }

    @Test func corruptStoredKeyIsRefused() throws {
        var forge = AssertionForge(key: try TestKey.make(.es256))
        forge.stored.publicKey = [0xA0]
        expectFailure(.malformedPublicKey) { () throws(RainError) in _ = try forge.verify() }
    }
}
