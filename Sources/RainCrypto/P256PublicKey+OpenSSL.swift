internal import COpenSSL
import RainCore

/// An ECDSA public key on NIST P-256 (secp256r1, `prime256v1`) that verifies ECDSA-SHA256
/// signatures (COSE ES256).
///
/// Every initializer refuses a point that is not on the curve.
public struct P256PublicKey: Sendable, Equatable {
    /// The length of one coordinate in bytes.
    static let coordinateByteCount = 32
    /// The DER SubjectPublicKeyInfo header for an uncompressed P-256 point (id-ecPublicKey,
    /// prime256v1, BIT STRING of 66 bytes); the 65-byte `04‖x‖y` point follows it.
    static let subjectPublicKeyInfoPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
        0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]

    private let point: [UInt8]
    /// The OpenSSL key, for key agreement (`P256KeyAgreement`) as well as verification.
    let key: EVPKey

    /// Creates a key from its affine coordinates, as a COSE EC2 key carries them.
    /// - Parameters:
    ///   - x: the x coordinate, 32 bytes big-endian.
    ///   - y: the y coordinate, 32 bytes big-endian.
    /// - Throws: RAIN_102 with `details.reason` `wrong_length` when a coordinate is not 32 bytes, or
    ///   `not_on_curve` when the point is not on P-256.
    public init(x: [UInt8], y: [UInt8]) throws(RainError) {
        guard x.count == Self.coordinateByteCount, y.count == Self.coordinateByteCount else {
            throw RainError.invalid("a P-256 coordinate is 32 bytes", field: "publicKey", reason: "wrong_length")
        }
        try self.init(x963Representation: [0x04] + x + y)
    }

    /// Creates a key from its uncompressed SEC 1 encoding `04‖x‖y` (65 bytes).
    /// - Throws: RAIN_102 with `details.reason` `wrong_length` or `not_on_curve`.
    public init(x963Representation: [UInt8]) throws(RainError) {
        guard x963Representation.count == 1 + 2 * Self.coordinateByteCount, x963Representation.first == 0x04 else {
            throw RainError.invalid(
                "an uncompressed P-256 point is 65 bytes starting with 04", field: "publicKey", reason: "wrong_length")
        }
        guard let key = EVPKey.fromSubjectPublicKeyInfo(Self.subjectPublicKeyInfoPrefix + x963Representation),
            EVPKeyContext.isValidPublicKey(key)
        else {
            throw RainError.invalid("the point is not on the P-256 curve", field: "publicKey", reason: "not_on_curve")
        }
        self.point = x963Representation
        self.key = key
    }

    /// Creates a key from a DER SubjectPublicKeyInfo holding an uncompressed P-256 point.
    /// - Throws: RAIN_102 with `details.reason` `malformed` when it is not such a structure, or
    ///   `not_on_curve`.
    public init(derRepresentation: [UInt8]) throws(RainError) {
        guard derRepresentation.count == Self.subjectPublicKeyInfoPrefix.count + 65,
            Array(derRepresentation.prefix(Self.subjectPublicKeyInfoPrefix.count)) == Self.subjectPublicKeyInfoPrefix
        else {
            throw RainError.invalid(
                "not a P-256 SubjectPublicKeyInfo with an uncompressed point", field: "publicKey", reason: "malformed")
        }
        try self.init(x963Representation: Array(derRepresentation.suffix(65)))
    }

    /// The uncompressed SEC 1 encoding `04‖x‖y`.
    public var x963Representation: [UInt8] { point }

    /// The x coordinate (32 bytes).
    public var x: [UInt8] { Array(point[1...32]) }

    /// The y coordinate (32 bytes).
    public var y: [UInt8] { Array(point[33...64]) }

    /// The DER SubjectPublicKeyInfo.
    public var derRepresentation: [UInt8] { Self.subjectPublicKeyInfoPrefix + point }

    /// Checks an ECDSA-SHA256 signature in DER form (`SEQUENCE { r INTEGER, s INTEGER }`), as WebAuthn
    /// carries ES256 signatures.
    /// - Parameters:
    ///   - derSignature: the DER signature.
    ///   - message: the signed message (hashed here with SHA-256).
    /// - Returns: `true` only for a valid signature; `false` for a wrong or malformed signature.
    public func isValidSignature(derSignature: [UInt8], for message: [UInt8]) -> Bool {
        // A DER ECDSA P-256 signature is at most 72 bytes; longer input is malformed.
        guard derSignature.count <= 80 else { return false }
        return key.verify(signature: derSignature, message: message, digest: EVP_sha256())
    }

    /// Keys are equal when their points are equal.
    public static func == (lhs: P256PublicKey, rhs: P256PublicKey) -> Bool { lhs.point == rhs.point }

    /// The key for `P256PrivateKey`, whose point OpenSSL computed.
    init(validatedPoint: [UInt8], key: EVPKey) {
        self.point = validatedPoint
        self.key = key
    }
}
