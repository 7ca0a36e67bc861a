internal import COpenSSL
import RainCore

/// An Ed25519 signing key (RFC 8032), for device signing keys.
///
/// Prints as `<redacted>`; the seed is kept in zeroing memory.
public struct Ed25519PrivateKey: Sendable {
    /// The seed length in bytes.
    static let byteCount = 32
    /// The signature length in bytes.
    static let signatureByteCount = 64

    private let seed: SymmetricKey
    private let key: EVPKey
    private let derivedPublicKey: Ed25519PublicKey

    /// Generates a new key from the CSPRNG.
    /// - Throws: RAIN_502 when the generator or OpenSSL fails.
    public init() throws(RainError) {
        try self.init(seed: SymmetricKey.random(byteCount: Self.byteCount))
    }

    /// Restores a key from its 32-byte seed (RFC 8032's "private key").
    /// - Parameter rawRepresentation: the seed.
    /// - Throws: RAIN_102 when it is not 32 bytes; RAIN_502 when OpenSSL fails.
    public init(rawRepresentation: [UInt8]) throws(RainError) {
        guard rawRepresentation.count == Self.byteCount else {
            throw RainError.invalid("an Ed25519 private key is 32 bytes", field: "rawRepresentation")
        }
        try self.init(seed: SymmetricKey(bytes: rawRepresentation))
    }

    private init(seed: SymmetricKey) throws(RainError) {
        let pointer = seed.withUnsafeBytes { bytes in
            withNonNullBytes(bytes) { pointer, count in
                EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, pointer, count)
            }
        }
        guard let pointer else { throw RainError.openSSL("EVP_PKEY_new_raw_private_key(Ed25519)") }
        let key = EVPKey(takingOwnership: pointer)

        var publicBytes = [UInt8](repeating: 0, count: Ed25519PublicKey.byteCount)
        var length = publicBytes.count
        let status = publicBytes.withUnsafeMutableBufferPointer { buffer in
            EVP_PKEY_get_raw_public_key(key.pointer, buffer.baseAddress, &length)
        }
        guard status == 1 else { throw RainError.openSSL("EVP_PKEY_get_raw_public_key(Ed25519)") }
        guard length == Ed25519PublicKey.byteCount else {
            throw RainError(.internalError, "Ed25519 public key has \(length) bytes")
        }
        self.seed = seed
        self.key = key
        self.derivedPublicKey = try Ed25519PublicKey(rawRepresentation: publicBytes)
    }

    /// The 32-byte seed. Secret: store it only in protected storage.
    public var rawRepresentation: [UInt8] {
        seed.withUnsafeBytes { Array($0) }
    }

    /// The matching public key.
    public var publicKey: Ed25519PublicKey { derivedPublicKey }

    /// Signs `message` (pure Ed25519, no prehash).
    /// - Parameter message: the message.
    /// - Returns: the 64-byte signature. Ed25519 signatures are deterministic.
    /// - Throws: RAIN_502 when OpenSSL fails.
    public func signature(for message: [UInt8]) throws(RainError) -> [UInt8] {
        let context = try DigestContext()
        // A nil digest: Ed25519 hashes internally.
        guard EVP_DigestSignInit(context.pointer, nil, nil, nil, key.pointer) == 1 else {
            throw RainError.openSSL("EVP_DigestSignInit(Ed25519)")
        }
        var signature = [UInt8](repeating: 0, count: Self.signatureByteCount)
        var length = signature.count
        let status = signature.withUnsafeMutableBufferPointer { output in
            withNonNullBytes(message) { pointer, count in
                EVP_DigestSign(context.pointer, output.baseAddress, &length, pointer, count)
            }
        }
        guard status == 1 else { throw RainError.openSSL("EVP_DigestSign(Ed25519)") }
        guard length == Self.signatureByteCount else {
            throw RainError(.internalError, "Ed25519 signature has \(length) bytes")
        }
        return signature
    }
}

extension Ed25519PrivateKey {
    /// Calls `body` with an `EVP_PKEY` made from the 32-byte `seed` in a caller's buffer (a slot of
    /// locked memory), and frees it (OpenSSL zeroes its copy of the seed) as soon as `body` returns.
    private static func withKey<R>(
        seed: UnsafeRawBufferPointer, _ body: (OpaquePointer) throws(RainError) -> R
    ) throws(RainError) -> R {
        guard seed.count == byteCount else {
            throw RainError.invalid("an Ed25519 private key is 32 bytes", field: "privateKey")
        }
        let pointer = withNonNullBytes(seed) { pointer, count in
            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, pointer, count)
        }
        guard let pointer else { throw RainError.openSSL("EVP_PKEY_new_raw_private_key(Ed25519)") }
        defer { EVP_PKEY_free(pointer) }
        return try body(pointer)
    }

    /// The 32-byte public key of the seed in `seed`, which is read in place.
    /// - Throws: RAIN_102 when `seed` is not 32 bytes; RAIN_502 when OpenSSL fails.
    static func publicKey(seed: UnsafeRawBufferPointer) throws(RainError) -> [UInt8] {
        try withKey(seed: seed) { (key) throws(RainError) in
            var publicBytes = [UInt8](repeating: 0, count: Ed25519PublicKey.byteCount)
            var length = publicBytes.count
            let status = publicBytes.withUnsafeMutableBufferPointer { buffer in
                EVP_PKEY_get_raw_public_key(key, buffer.baseAddress, &length)
            }
            guard status == 1 else { throw RainError.openSSL("EVP_PKEY_get_raw_public_key(Ed25519)") }
            guard length == Ed25519PublicKey.byteCount else {
                throw RainError(.internalError, "Ed25519 public key has \(length) bytes")
            }
            return publicBytes
        }
    }

    /// Signs `message` (pure Ed25519) with the seed in `seed`, which is read in place.
    /// - Returns: the 64-byte signature.
    /// - Throws: RAIN_102 when `seed` is not 32 bytes; RAIN_502 when OpenSSL fails.
    static func signature(for message: [UInt8], seed: UnsafeRawBufferPointer) throws(RainError) -> [UInt8] {
        try withKey(seed: seed) { (key) throws(RainError) in
            let context = try DigestContext()
            // A nil digest: Ed25519 hashes internally.
            guard EVP_DigestSignInit(context.pointer, nil, nil, nil, key) == 1 else {
                throw RainError.openSSL("EVP_DigestSignInit(Ed25519)")
            }
            var signature = [UInt8](repeating: 0, count: signatureByteCount)
            var length = signature.count
            let status = signature.withUnsafeMutableBufferPointer { output in
                withNonNullBytes(message) { pointer, count in
                    EVP_DigestSign(context.pointer, output.baseAddress, &length, pointer, count)
                }
            }
            guard status == 1 else { throw RainError.openSSL("EVP_DigestSign(Ed25519)") }
            guard length == signatureByteCount else {
                throw RainError(.internalError, "Ed25519 signature has \(length) bytes")
            }
            return signature
        }
    }
}

extension Ed25519PrivateKey: CustomStringConvertible, CustomDebugStringConvertible {
    /// `Ed25519PrivateKey(<redacted>)`: never the seed.
    public var description: String { "Ed25519PrivateKey(<redacted>)" }

    /// Same as ``description``.
    public var debugDescription: String { description }
}
