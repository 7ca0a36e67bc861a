internal import COpenSSL
import RainCore

/// Owns an `EVP_PKEY_CTX`, for key generation and key checks.
final class EVPKeyContext {
    let pointer: OpaquePointer

    /// A context for generating keys of the algorithm `name` (for example `"EC"`).
    /// - Throws: RAIN_502 when OpenSSL fails.
    init(algorithmName name: String) throws(RainError) {
        guard let pointer = EVP_PKEY_CTX_new_from_name(nil, name, nil) else {
            throw RainError.openSSL("EVP_PKEY_CTX_new_from_name(\(name))")
        }
        self.pointer = pointer
    }

    /// A context for operations on `key` (checks).
    /// - Throws: RAIN_502 when OpenSSL fails.
    init(key: EVPKey) throws(RainError) {
        guard let pointer = EVP_PKEY_CTX_new_from_pkey(nil, key.pointer, nil) else {
            throw RainError.openSSL("EVP_PKEY_CTX_new_from_pkey")
        }
        self.pointer = pointer
    }

    deinit { EVP_PKEY_CTX_free(pointer) }

    /// Runs OpenSSL's full public-key check (for EC: the point is on the curve and of the right order;
    /// for RSA: the modulus and exponent are sane). Clears the error queue on failure.
    static func isValidPublicKey(_ key: EVPKey) -> Bool {
        guard let context = try? EVPKeyContext(key: key) else { return false }
        guard EVP_PKEY_public_check(context.pointer) == 1 else {
            ERR_clear_error()
            return false
        }
        return true
    }
}

extension EVPKey {
    /// Parses a DER SubjectPublicKeyInfo (`d2i_PUBKEY`), refusing trailing bytes.
    /// - Returns: the key, or nil when OpenSSL refuses the encoding (the error queue is cleared).
    static func fromSubjectPublicKeyInfo(_ der: [UInt8]) -> EVPKey? {
        let parsed: (OpaquePointer?, Int) = der.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress, buffer.count > 0 else { return (nil, 0) }
            var cursor: UnsafePointer<UInt8>? = base
            let key = d2i_PUBKEY(nil, &cursor, buffer.count)
            let consumed = cursor.map { $0 - base } ?? 0
            return (key, consumed)
        }
        guard let pointer = parsed.0 else {
            ERR_clear_error()
            return nil
        }
        let key = EVPKey(takingOwnership: pointer)
        guard parsed.1 == der.count else { return nil }
        return key
    }

    /// The key as a DER SubjectPublicKeyInfo (`i2d_PUBKEY`).
    /// - Throws: RAIN_502 when OpenSSL fails.
    func subjectPublicKeyInfo() throws(RainError) -> [UInt8] {
        let length = i2d_PUBKEY(pointer, nil)
        guard length > 0 else { throw RainError.openSSL("i2d_PUBKEY") }
        var output = [UInt8](repeating: 0, count: Int(length))
        let written = output.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_PUBKEY(pointer, &cursor)
        }
        guard written == length else { throw RainError.openSSL("i2d_PUBKEY") }
        return output
    }

    /// Verifies `signature` over `message` with `digest` (nil for Ed25519).
    /// - Returns: `true` only for a valid signature; `false` on a bad signature or any failure.
    func verify(signature: [UInt8], message: [UInt8], digest: OpaquePointer?) -> Bool {
        guard !signature.isEmpty, let context = try? DigestContext() else { return false }
        guard EVP_DigestVerifyInit(context.pointer, nil, digest, nil, pointer) == 1 else {
            ERR_clear_error()
            return false
        }
        let status = withNonNullBytes(signature) { signaturePointer, signatureCount in
            withNonNullBytes(message) { messagePointer, messageCount in
                EVP_DigestVerify(context.pointer, signaturePointer, signatureCount, messagePointer, messageCount)
            }
        }
        guard status == 1 else {
            // 0 is a bad signature, below 0 a failure; either may leave entries in the error queue.
            ERR_clear_error()
            return false
        }
        return true
    }
}
