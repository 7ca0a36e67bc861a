internal import COpenSSL
import RainCore

/// An ECDSA signing key on NIST P-256 (COSE ES256), for the software WebAuthn authenticator.
///
/// Prints as `<redacted>`; the private scalar is kept in zeroing memory.
public struct P256PrivateKey: Sendable {
    /// The private scalar length in bytes.
    static let byteCount = 32

    private let scalar: SymmetricKey
    /// The OpenSSL key, for key agreement (`sharedSecret(with:)`) as well as signing.
    let key: EVPKey
    private let derivedPublicKey: P256PublicKey

    /// Generates a new key (`EVP_PKEY_CTX_new_from_name("EC")`, group `prime256v1`).
    /// - Throws: RAIN_502 when OpenSSL fails.
    public init() throws(RainError) {
        let context = try EVPKeyContext(algorithmName: "EC")
        guard EVP_PKEY_keygen_init(context.pointer) == 1 else { throw RainError.openSSL("EVP_PKEY_keygen_init(EC)") }
        guard EVP_PKEY_CTX_set_group_name(context.pointer, "prime256v1") == 1 else {
            throw RainError.openSSL("EVP_PKEY_CTX_set_group_name(prime256v1)")
        }
        var generated: OpaquePointer?
        guard EVP_PKEY_generate(context.pointer, &generated) == 1, let generated else {
            throw RainError.openSSL("EVP_PKEY_generate(P-256)")
        }
        let key = EVPKey(takingOwnership: generated)
        let scalar = try Self.exportScalar(key)
        try self.init(key: key, scalar: scalar)
    }

    /// Restores a key from its 32-byte big-endian private scalar.
    /// - Parameter rawRepresentation: the scalar, in `1..<n`.
    /// - Throws: RAIN_102 when it is not 32 bytes or not a valid P-256 private key; RAIN_502 when
    ///   OpenSSL fails.
    public init(rawRepresentation: [UInt8]) throws(RainError) {
        guard rawRepresentation.count == Self.byteCount else {
            throw RainError.invalid("a P-256 private key is 32 bytes", field: "rawRepresentation")
        }
        // SEC 1 ECPrivateKey { version 1, privateKey, [0] prime256v1 } without the public key:
        // OpenSSL computes the public point from the scalar.
        var der: [UInt8] = [0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20]
        der += rawRepresentation
        der += [0xa0, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07]
        defer { SecureMemory.cleanse(&der) }
        let pointer: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_PrivateKey(EVP_PKEY_EC, nil, &cursor, buffer.count)
        }
        guard let pointer else {
            let error = RainError.openSSL("d2i_PrivateKey(EC)")
            throw RainError.invalid("not a P-256 private key: \(error.message)", field: "rawRepresentation")
        }
        let key = EVPKey(takingOwnership: pointer)
        let context = try EVPKeyContext(key: key)
        guard EVP_PKEY_check(context.pointer) == 1 else {
            ERR_clear_error()
            throw RainError.invalid("not a valid P-256 private key", field: "rawRepresentation")
        }
        try self.init(key: key, scalar: SymmetricKey(bytes: rawRepresentation))
    }

    private init(key: EVPKey, scalar: SymmetricKey) throws(RainError) {
        var groupName = [CChar](repeating: 0, count: 32)
        var groupLength = 0
        guard EVP_PKEY_is_a(key.pointer, "EC") == 1,
            EVP_PKEY_get_group_name(key.pointer, &groupName, groupName.count, &groupLength) == 1,
            String(decoding: groupName.prefix(groupLength).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1"
        else {
            ERR_clear_error()
            throw RainError.invalid("not a P-256 key", field: "rawRepresentation")
        }
        let spki = try key.subjectPublicKeyInfo()
        let prefix = P256PublicKey.subjectPublicKeyInfoPrefix
        guard spki.count == prefix.count + 65, Array(spki.prefix(prefix.count)) == prefix else {
            throw RainError(.internalError, "unexpected P-256 SubjectPublicKeyInfo encoding")
        }
        self.scalar = scalar
        self.key = key
        self.derivedPublicKey = P256PublicKey(validatedPoint: Array(spki.suffix(65)), key: key)
    }

    /// Reads the private scalar into zeroing memory.
    private static func exportScalar(_ key: EVPKey) throws(RainError) -> SymmetricKey {
        var number: OpaquePointer?
        guard EVP_PKEY_get_bn_param(key.pointer, "priv", &number) == 1, let number else {
            throw RainError.openSSL("EVP_PKEY_get_bn_param(priv)")
        }
        defer { BN_clear_free(number) }
        return try SymmetricKey(byteCount: byteCount) { (buffer) throws(RainError) in
            guard let base = buffer.baseAddress,
                BN_bn2binpad(number, base.assumingMemoryBound(to: UInt8.self), Int32(byteCount)) == Int32(byteCount)
            else { throw RainError.openSSL("BN_bn2binpad") }
        }
    }

    /// The 32-byte private scalar. Secret: store it only in protected storage.
    public var rawRepresentation: [UInt8] {
        scalar.withUnsafeBytes { Array($0) }
    }

    /// The matching public key.
    public var publicKey: P256PublicKey { derivedPublicKey }

    /// Signs `message` with ECDSA over SHA-256.
    /// - Parameter message: the message (hashed here).
    /// - Returns: the DER signature (`SEQUENCE { r, s }`), as WebAuthn carries ES256 signatures.
    /// - Throws: RAIN_502 when OpenSSL fails.
    public func signature(for message: [UInt8]) throws(RainError) -> [UInt8] {
        let context = try DigestContext()
        guard EVP_DigestSignInit(context.pointer, nil, EVP_sha256(), nil, key.pointer) == 1 else {
            throw RainError.openSSL("EVP_DigestSignInit(ES256)")
        }
        var signature = [UInt8](repeating: 0, count: 80)
        var length = signature.count
        let status = signature.withUnsafeMutableBufferPointer { output in
            withNonNullBytes(message) { pointer, count in
                EVP_DigestSign(context.pointer, output.baseAddress, &length, pointer, count)
            }
        }
        guard status == 1, length <= signature.count else { throw RainError.openSSL("EVP_DigestSign(ES256)") }
        return Array(signature.prefix(length))
    }
}

extension P256PrivateKey: CustomStringConvertible, CustomDebugStringConvertible {
    /// `P256PrivateKey(<redacted>)`: never the scalar.
    public var description: String { "P256PrivateKey(<redacted>)" }

    /// Same as ``description``.
    public var debugDescription: String { description }
}
