internal import COpenSSL
import RainCore

/// An Ed25519 public key (RFC 8032) that verifies signatures.
public struct Ed25519PublicKey: Sendable, Equatable {
    /// The key length in bytes.
    static let byteCount = 32

    private let bytes: [UInt8]
    private let key: EVPKey

    /// Creates a key from its 32-byte encoding.
    /// - Parameter rawRepresentation: the encoded point.
    /// - Throws: RAIN_102 when it is not 32 bytes or OpenSSL refuses it.
    public init(rawRepresentation: [UInt8]) throws(RainError) {
        guard rawRepresentation.count == Self.byteCount else {
            throw RainError.invalid("an Ed25519 public key is 32 bytes", field: "rawRepresentation")
        }
        let pointer = withNonNullBytes(rawRepresentation) { pointer, count in
            EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, pointer, count)
        }
        guard let pointer else {
            let error = RainError.openSSL("EVP_PKEY_new_raw_public_key(Ed25519)")
            throw RainError.invalid("not an Ed25519 public key: \(error.message)", field: "rawRepresentation")
        }
        self.bytes = rawRepresentation
        self.key = EVPKey(takingOwnership: pointer)
    }

    /// The 32-byte encoding.
    public var rawRepresentation: [UInt8] { bytes }

    /// Checks a signature over `message`.
    /// - Parameters:
    ///   - signature: the 64-byte signature.
    ///   - message: the signed message.
    /// - Returns: `true` only when the signature is valid for this key and message; `false` for a
    ///   wrong signature, a signature of the wrong length, or an OpenSSL failure.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard signature.count == Ed25519PrivateKey.signatureByteCount else { return false }
        // Ed25519 signs the message itself: no digest.
        return key.verify(signature: signature, message: message, digest: nil)
    }

    /// Keys are equal when their encodings are equal.
    public static func == (lhs: Ed25519PublicKey, rhs: Ed25519PublicKey) -> Bool {
        lhs.bytes == rhs.bytes
    }
}
