import Foundation
import RainCore
import RainCrypto
import RainWebAuthn
import Testing

/// Bytes from a hex literal in a test vector; fails the test on a typo.
func hexBytes(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
    try #require(Hex.decode(text), "bad hex in test vector", sourceLocation: sourceLocation)
}

/// Runs `body` and returns the `RainError` it throws; records a failure when it returns normally.
@discardableResult
func expectRainError(
    _ code: RainError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws(RainError) -> Void
) -> RainError? {
    do {
        try body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    }
}

/// Expects RAIN_102 with `details.reason` naming `failure`.
func expectFailure(
    _ failure: WebAuthnFailure, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws(RainError) -> Void
) {
    guard let error = expectRainError(.invalidArgument, sourceLocation: sourceLocation, body) else { return }
    #expect(error.details.reason == failure.rawValue, "\(error)", sourceLocation: sourceLocation)
}

/// A fresh path for a key file in its own temporary directory.
func temporaryKeyFilePath(_ name: String = "authenticator.json") -> String {
    let directory = NSTemporaryDirectory() + "rain-webauthn-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
    return directory + "/" + name
}

/// The RP every ceremony test uses.
enum TestRP {
    static let rpID = "example.com"
    static let origin = "https://example.com"
    static let androidFingerprint: [UInt8] = Array(repeating: 0xAB, count: 32)
    static let origins = RelyingParty.origins(domain: rpID, androidCertificateSHA256: [androidFingerprint])
    static let relyingParty = RelyingParty(rpID: rpID, rpName: "Example", allowedOrigins: origins)
    static let user = PublicKeyCredentialUserEntityJSON(id: Array(repeating: 7, count: 32), name: "alice", displayName: "Alice")
}

/// A signing key of one of the algorithms the tests exercise.
enum TestKey: Sendable {
    case p256(P256PrivateKey)
    case ed25519(Ed25519PrivateKey)

    static func make(_ algorithm: COSEAlgorithm) throws -> TestKey {
        switch algorithm {
        case .es256: return .p256(try P256PrivateKey())
        case .edDSA: return .ed25519(try Ed25519PrivateKey())
        default: throw RainError.invalid("no test key for \(algorithm)")
        }
    }

    var algorithm: COSEAlgorithm {
        switch self {
        case .p256: return .es256
        case .ed25519: return .edDSA
        }
    }

    var publicKey: COSEPublicKey {
        switch self {
        case .p256(let key): return COSEPublicKey(p256: key.publicKey)
        case .ed25519(let key): return COSEPublicKey(ed25519: key.publicKey)
        }
    }

    func sign(_ message: [UInt8]) throws -> [UInt8] {
        switch self {
        case .p256(let key): return try key.signature(for: message)
        case .ed25519(let key): return try key.signature(for: message)
        }
    }
}

/// The algorithms the software authenticator and the forges cover.
enum SignatureAlgorithm: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case es256, edDSA
    var cose: COSEAlgorithm { self == .es256 ? .es256 : .edDSA }
    var testDescription: String { rawValue }
}

/// Builds a registration response from parts, so that a test can change exactly one of them; the
/// packed self-attestation signature is computed last, over the final bytes, unless a mutation
/// replaces it.
struct RegistrationForge {
    var key: TestKey
    var challenge: [UInt8] = Array(repeating: 0x5A, count: 32)
    var rpID = TestRP.rpID
    var type = "public-key"
    var credentialID: [UInt8] = Array(0..<16)
    var rawID: [UInt8]?
    var id: String?
    var clientData: CollectedClientData
    var clientDataJSON: [UInt8]?
    var rpIDHash: [UInt8]?
    var flags: AuthenticatorData.Flags = [.userPresent, .userVerified]
    var signCount: UInt32 = 0
    var includeAttestedCredentialData = true
    var coseKey: [UInt8]?
    var authenticatorDataSuffix: [UInt8] = []
    var authenticatorDataOverride: [UInt8]?
    var format = "none"
    var statement: CBORValue?
    var packedAlgorithm: Int64?
    var packedSignature: [UInt8]?
    var extraStatementEntries: [CBORValue.MapEntry] = []
    var attestationObject: [UInt8]?
    var attestationObjectSuffix: [UInt8] = []
    var authenticatorDataCopy: [UInt8]??
    var publicKeyAlgorithm: Int??

    init(key: TestKey, packed: Bool = false) {
        self.key = key
        self.format = packed ? "packed" : "none"
        self.clientData = CollectedClientData(
            type: CollectedClientData.createType, challenge: Array(repeating: 0x5A, count: 32), origin: TestRP.origin)
    }

    func authenticatorData() -> [UInt8] {
        if let authenticatorDataOverride { return authenticatorDataOverride }
        let attested =
            includeAttestedCredentialData
            ? AuthenticatorData.AttestedCredentialData(
                aaguid: Array(repeating: 0, count: 16), credentialID: credentialID,
                publicKeyBytes: coseKey ?? key.publicKey.encoded) : nil
        var data = AuthenticatorData(
            rpIDHash: rpIDHash ?? SHA256.hash(Array(rpID.utf8)), flags: flags, signCount: signCount,
            attestedCredentialData: attested)
        data.flags = flags.union(includeAttestedCredentialData ? [.attestedCredentialData] : [])
        return data.encoded + authenticatorDataSuffix
    }

    func build() throws -> RegistrationResponseJSON {
        let authData = authenticatorData()
        let clientDataBytes = clientDataJSON ?? clientData.serialized
        var attStmt: CBORValue
        if let statement {
            attStmt = statement
        } else if format == "packed" {
            let signature = try packedSignature ?? key.sign(authData + SHA256.hash(clientDataBytes))
            attStmt = .map(
                [
                    .init(.text("alg"), .integer(packedAlgorithm ?? Int64(key.algorithm.rawValue))),
                    .init(.text("sig"), .bytes(signature)),
                ] + extraStatementEntries)
        } else {
            attStmt = .map(extraStatementEntries)
        }
        let object =
            attestationObject
            ?? CBOREncoder.encode(
                .map([
                    .init(.text("fmt"), .text(format)), .init(.text("attStmt"), attStmt),
                    .init(.text("authData"), .bytes(authData)),
                ])) + attestationObjectSuffix
        let raw = rawID ?? credentialID
        var response = RegistrationResponseJSON(
            rawId: raw,
            response: AuthenticatorAttestationResponseJSON(
                clientDataJSON: clientDataBytes, attestationObject: object,
                authenticatorData: authenticatorDataCopy ?? authData, transports: ["internal"],
                publicKeyAlgorithm: publicKeyAlgorithm ?? key.algorithm.rawValue))
        response.type = type
        if let id { response.id = id }
        return response
    }

    /// Verifies with the test RP's settings.
    func verify(
        allowedAlgorithms: [Int] = COSEAlgorithm.supported.map(\.rawValue), requireUserVerification: Bool = false
    ) throws(RainError) -> VerifiedCredential {
        let response: RegistrationResponseJSON
        do {
            response = try build()
        } catch {
            throw RainError.wrapping(error, context: "forge")
        }
        return try RelyingParty.verifyRegistration(
            response: response, expectedChallenge: challenge, rpID: TestRP.rpID, allowedOrigins: TestRP.origins,
            allowedAlgorithms: allowedAlgorithms, requireUserVerification: requireUserVerification)
    }
}

/// Builds an authentication response and the stored credential it is checked against; the
/// signature is computed last, over the final bytes, unless a mutation replaces it.
struct AssertionForge {
    var key: TestKey
    var signingKey: TestKey?
    var challenge: [UInt8] = Array(repeating: 0x6B, count: 32)
    var rpID = TestRP.rpID
    var type = "public-key"
    var credentialID: [UInt8] = Array(100..<132)
    var rawID: [UInt8]?
    var id: String?
    var clientData: CollectedClientData
    var clientDataJSON: [UInt8]?
    var rpIDHash: [UInt8]?
    var flags: AuthenticatorData.Flags = [.userPresent, .userVerified]
    var signCount: UInt32 = 5
    var extensions: [UInt8]?
    var authenticatorData: [UInt8]?
    var authenticatorDataSuffix: [UInt8] = []
    var signature: [UInt8]?
    var corruptSignature = false
    var userHandle: [UInt8]? = Array(repeating: 7, count: 32)
    var stored: StoredCredential
    var allowCredentialIDs: [[UInt8]] = []

    init(key: TestKey) {
        self.key = key
        self.clientData = CollectedClientData(
            type: CollectedClientData.getType, challenge: Array(repeating: 0x6B, count: 32), origin: TestRP.origin)
        self.stored = StoredCredential(
            id: Array(100..<132), publicKey: key.publicKey.encoded, signCount: 4, isBackupEligible: false,
            userHandle: Array(repeating: 7, count: 32))
    }

    func authenticatorDataBytes() -> [UInt8] {
        if let authenticatorData { return authenticatorData }
        var data = AuthenticatorData(
            rpIDHash: rpIDHash ?? SHA256.hash(Array(rpID.utf8)), flags: flags, signCount: signCount, extensions: extensions)
        data.flags = flags.union(extensions != nil ? [.extensionData] : [])
        return data.encoded + authenticatorDataSuffix
    }

    func build() throws -> AuthenticationResponseJSON {
        let authData = authenticatorDataBytes()
        let clientDataBytes = clientDataJSON ?? clientData.serialized
        var sig = try signature ?? (signingKey ?? key).sign(authData + SHA256.hash(clientDataBytes))
        if corruptSignature { sig[sig.count / 2] ^= 0x01 }
        var response = AuthenticationResponseJSON(
            rawId: rawID ?? credentialID,
            response: AuthenticatorAssertionResponseJSON(
                clientDataJSON: clientDataBytes, authenticatorData: authData, signature: sig, userHandle: userHandle))
        response.type = type
        if let id { response.id = id }
        return response
    }

    func verify(requireUserVerification: Bool = false) throws(RainError) -> VerifiedAssertion {
        let response: AuthenticationResponseJSON
        do {
            response = try build()
        } catch {
            throw RainError.wrapping(error, context: "forge")
        }
        return try RelyingParty.verifyAuthentication(
            response: response, expectedChallenge: challenge, rpID: TestRP.rpID, allowedOrigins: TestRP.origins,
            credential: stored, requireUserVerification: requireUserVerification, allowCredentialIDs: allowCredentialIDs)
    }
}
