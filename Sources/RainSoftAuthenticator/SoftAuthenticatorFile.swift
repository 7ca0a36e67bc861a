import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainSystem
import RainWebAuthn

/// The software authenticator's key file: JSON, mode 0600, replaced atomically on every change.
package struct SoftAuthenticatorFile: Codable, Sendable {
    /// One credential: its private key lives here in clear, as befits a development tool.
    struct Credential: Codable, Sendable {
        var id: Base64URLBytes
        var rpId: String
        var alg: COSEAlgorithm
        /// The P-256 private scalar or the Ed25519 seed (32 bytes).
        var privateKey: Base64URLBytes
        var userHandle: Base64URLBytes
        var userName: String
        var userDisplayName: String
        var signCount: UInt32
        var isBackupEligible: Bool
        var isBackedUp: Bool
        /// Seconds since 1970 when the credential was created.
        var createdAt: Double
    }

    static let currentVersion = 1

    var version: Int
    var credentials: [Credential]

    static let empty = SoftAuthenticatorFile(version: currentVersion, credentials: [])

    /// Reads the file; an absent file is empty.
    /// - Throws: RAIN_102 when the file allows group or other access or is not a valid key file;
    ///   RAIN_502 when it cannot be read.
    package static func load(from path: String) throws(RainError) -> SoftAuthenticatorFile {
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & 0o077 != 0 {
            throw RainError(
                .invalidArgument, "authenticator file \(path) is readable by others: run chmod 600 \(path)",
                details: RainError.Details(reason: "key_file_mode", field: "path"))
        }
        guard let bytes = try AtomicFile.read(path, limit: 16 << 20) else { return .empty }
        let file: SoftAuthenticatorFile
        do {
            file = try JSONDecoder().decode(SoftAuthenticatorFile.self, from: Data(bytes))
        } catch {
            throw RainError(
                .invalidArgument, "authenticator file \(path) is not a valid key file",
                details: RainError.Details(reason: "key_file_invalid", field: "path"))
        }
        guard file.version == currentVersion else {
            throw RainError(
                .invalidArgument, "authenticator file \(path) has version \(file.version), expected \(currentVersion)",
                details: RainError.Details(reason: "key_file_invalid", field: "path"))
        }
        return file
    }

    /// Replaces the file atomically with mode 0600, creating its directory (0700) when missing.
    /// - Throws: RAIN_502 when it cannot be written.
    func save(to path: String) throws(RainError) {
        let directory = PathText.deletingLastComponent(path)
        if !directory.isEmpty { try AtomicFile.makeDirectory(directory) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do {
            data = try encoder.encode(self)
        } catch {
            throw RainError(.internalError, "cannot encode the authenticator file", underlying: SendableErrorDescription(error))
        }
        try AtomicFile.write(Array(data) + [0x0A], to: path, mode: 0o600)
    }
}

/// A credential's private key, by algorithm.
enum SoftPrivateKey {
    case p256(P256PrivateKey)
    case ed25519(Ed25519PrivateKey)

    /// A new key for `algorithm` (ES256 or EdDSA).
    init(generating algorithm: COSEAlgorithm) throws(RainError) {
        switch algorithm {
        case .es256: self = .p256(try P256PrivateKey())
        case .edDSA: self = .ed25519(try Ed25519PrivateKey())
        default: throw RainError.invalid("the software authenticator does not support \(algorithm)", field: "alg")
        }
    }

    /// Restores a stored key.
    init(algorithm: COSEAlgorithm, rawRepresentation: [UInt8]) throws(RainError) {
        switch algorithm {
        case .es256: self = .p256(try P256PrivateKey(rawRepresentation: rawRepresentation))
        case .edDSA: self = .ed25519(try Ed25519PrivateKey(rawRepresentation: rawRepresentation))
        default: throw RainError.invalid("the software authenticator does not support \(algorithm)", field: "alg")
        }
    }

    var algorithm: COSEAlgorithm {
        switch self {
        case .p256: return .es256
        case .ed25519: return .edDSA
        }
    }

    var rawRepresentation: [UInt8] {
        switch self {
        case .p256(let key): return key.rawRepresentation
        case .ed25519(let key): return key.rawRepresentation
        }
    }

    var publicKey: COSEPublicKey {
        switch self {
        case .p256(let key): return COSEPublicKey(p256: key.publicKey)
        case .ed25519(let key): return COSEPublicKey(ed25519: key.publicKey)
        }
    }

    /// The WebAuthn signature of `message`: DER ECDSA-SHA256 or Ed25519.
    func signature(for message: [UInt8]) throws(RainError) -> [UInt8] {
        switch self {
        case .p256(let key): return try key.signature(for: message)
        case .ed25519(let key): return try key.signature(for: message)
        }
    }
}
