import RainCore

/// The public half of a device key, with its algorithm: part of the device's identity.
///
/// On the wire and in the authority's store a device key is its bytes alone, and the length says
/// the algorithm: 32 bytes are a raw Ed25519 key (software keys: the `file` and `secret-service`
/// providers); 65 bytes starting with `04` are an uncompressed P-256 point (ECDSA-SHA256: the key
/// a TPM creates, which never leaves it). Signatures are 64 raw bytes for Ed25519 and DER for P-256.
public enum DevicePublicKey: Sendable, Equatable, CustomStringConvertible {
    /// An Ed25519 key.
    case ed25519(Ed25519PublicKey)
    /// An ECDSA key on NIST P-256.
    case p256(P256PublicKey)

    /// Reads a device key from its wire bytes.
    /// - Throws: RAIN_102 (`details.field` `devicePublicKey`, reason `device_key_malformed`) for
    ///   bytes that are neither a raw Ed25519 key nor an uncompressed P-256 point on the curve.
    public init(wireBytes bytes: [UInt8]) throws(RainError) {
        func malformed() -> RainError {
            RainError.invalid(
                "devicePublicKey must be a raw 32-byte Ed25519 key or a 65-byte uncompressed P-256 point",
                field: "devicePublicKey", reason: "device_key_malformed")
        }
        switch bytes.count {
        case Ed25519PublicKey.byteCount:
            guard let key = try? Ed25519PublicKey(rawRepresentation: bytes) else { throw malformed() }
            self = .ed25519(key)
        case 65:
            guard let key = try? P256PublicKey(x963Representation: bytes) else { throw malformed() }
            self = .p256(key)
        default:
            throw malformed()
        }
    }

    /// The bytes the wire and the store carry.
    public var wireBytes: [UInt8] {
        switch self {
        case .ed25519(let key): key.rawRepresentation
        case .p256(let key): key.x963Representation
        }
    }

    /// `ed25519` or `ecdsa-p256`, as status output names it.
    public var algorithm: String {
        switch self {
        case .ed25519: "ed25519"
        case .p256: "ecdsa-p256"
        }
    }

    /// A short public id of the key: the first 16 hex characters of SHA-256(algorithm ‖ 0x00 ‖ wire bytes).
    public var keyID: String {
        Hex.encode(Array(SHA256.hash(Array(algorithm.utf8) + [0] + wireBytes).prefix(8)))
    }

    /// Whether `signature` is this key's signature over `message` (Ed25519, or ECDSA-SHA256 in DER).
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        switch self {
        case .ed25519(let key): key.isValidSignature(signature, for: message)
        case .p256(let key): key.isValidSignature(derSignature: signature, for: message)
        }
    }

    public var description: String { "DevicePublicKey(\(algorithm), \(keyID))" }
}
