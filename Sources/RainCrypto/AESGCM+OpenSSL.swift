internal import COpenSSL
import RainCore

/// Owns an `EVP_CIPHER_CTX`; freeing it also zeroes the key schedule it holds.
final class CipherContext {
    let pointer: OpaquePointer

    init() throws(RainError) {
        guard let pointer = EVP_CIPHER_CTX_new() else { throw RainError.openSSL("EVP_CIPHER_CTX_new") }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }
}

extension AESGCM {
    /// Inputs larger than this do not fit OpenSSL's `int` lengths; far beyond any record we seal.
    static let maximumInputByteCount = Int(Int32.max) - 64

    /// Seals with a caller-chosen nonce. Only for known-answer tests: reusing a nonce under one key
    /// destroys both confidentiality and authenticity.
    static func seal(
        _ plaintext: [UInt8], using key: SymmetricKey, nonce: [UInt8], authenticating aad: [UInt8]
    ) throws(RainError) -> SealedBox {
        try checkKey(key)
        guard nonce.count == nonceByteCount else {
            throw RainError.invalid("AES-GCM nonce must be 12 bytes", field: "nonce")
        }
        guard plaintext.count <= maximumInputByteCount, aad.count <= maximumInputByteCount else {
            throw RainError.invalid("AES-GCM input is too large", field: "plaintext")
        }
        let context = try gcmContext(key: key, nonce: nonce, authenticating: aad, encrypting: true)
        let ctx = context.pointer

        // GCM is a stream mode: the ciphertext is as long as the plaintext. The extra block of
        // room keeps the output pointer valid for an empty plaintext.
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + 16)
        var written: Int32 = 0
        var finalWritten: Int32 = 0
        let encrypted = ciphertext.withUnsafeMutableBufferPointer { output -> Bool in
            guard let outputBase = output.baseAddress else { return false }
            if !plaintext.isEmpty {
                let status = withNonNullBytes(plaintext) { pointer, count in
                    EVP_EncryptUpdate(ctx, outputBase, &written, pointer, Int32(count))
                }
                guard status == 1, written >= 0 else { return false }
            }
            return EVP_EncryptFinal_ex(ctx, outputBase + Int(written), &finalWritten) == 1
        }
        guard encrypted else { throw RainError.openSSL("AES-256-GCM encryption") }
        let total = Int(written) + Int(finalWritten)
        guard total == plaintext.count else {
            throw RainError(.internalError, "AES-256-GCM produced \(total) bytes for \(plaintext.count)")
        }
        ciphertext.removeLast(ciphertext.count - total)

        var tag = [UInt8](repeating: 0, count: tagByteCount)
        let tagged = tag.withUnsafeMutableBytes { buffer in
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), buffer.baseAddress)
        }
        guard tagged == 1 else { throw RainError.openSSL("EVP_CTRL_GCM_GET_TAG") }
        return SealedBox(nonce: nonce, ciphertext: ciphertext, tag: tag)
    }

    /// Checks the tag and decrypts; the sizes of key, nonce and tag are already checked.
    static func decrypt(
        _ box: SealedBox, using key: SymmetricKey, authenticating aad: [UInt8]
    ) throws(RainError) -> [UInt8] {
        var plaintext = [UInt8](repeating: 0, count: box.ciphertext.count)
        let result = plaintext.withUnsafeMutableBytes { output in
            Result { () throws(RainError) in try decrypt(box, using: key, authenticating: aad, into: output) }
        }
        try result.get()
        return plaintext
    }

    /// Checks the tag and decrypts into `output`, which must be exactly as long as the ciphertext
    /// (a slot of locked memory, for a secret that must not pass through an ordinary array). The
    /// sizes of key, nonce and tag are already checked. On any failure `output` is zeroed: GCM
    /// writes the plaintext before the tag is checked.
    /// - Throws: ``authenticationFailed`` (RAIN_502) when the tag does not match; RAIN_502 when
    ///   `output` has the wrong size or OpenSSL fails.
    static func decrypt(
        _ box: SealedBox, using key: SymmetricKey, authenticating aad: [UInt8], into output: UnsafeMutableRawBufferPointer
    ) throws(RainError) {
        guard box.ciphertext.count <= maximumInputByteCount, aad.count <= maximumInputByteCount else {
            throw authenticationFailed
        }
        guard output.count == box.ciphertext.count else {
            throw RainError(.internalError, "AES-256-GCM needs \(box.ciphertext.count) bytes of output, not \(output.count)")
        }
        var isAuthenticated = false
        defer { if !isAuthenticated { SecureMemory.cleanse(output) } }
        let context = try gcmContext(key: key, nonce: box.nonce, authenticating: aad, encrypting: false)
        let ctx = context.pointer

        var written: Int32 = 0
        if let outputBase = output.baseAddress, !box.ciphertext.isEmpty {
            let status = withNonNullBytes(box.ciphertext) { pointer, count in
                EVP_DecryptUpdate(ctx, outputBase.assumingMemoryBound(to: UInt8.self), &written, pointer, Int32(count))
            }
            guard status == 1, written >= 0, Int(written) <= output.count else {
                throw RainError.openSSL("EVP_DecryptUpdate")
            }
        }

        // SET_TAG takes a mutable pointer; it only reads from it.
        var expectedTag = box.tag
        let tagSet = expectedTag.withUnsafeMutableBytes { buffer in
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), buffer.baseAddress)
        }
        guard tagSet == 1 else { throw RainError.openSSL("EVP_CTRL_GCM_SET_TAG") }

        // GCM is a stream mode: the final call only checks the tag and writes nothing, so it gets
        // a block of room of its own rather than the end of `output`, which may be full.
        var finalWritten: Int32 = 0
        var finalBlock: (UInt64, UInt64) = (0, 0)
        let verified = withUnsafeMutableBytes(of: &finalBlock) { block in
            EVP_DecryptFinal_ex(ctx, block.baseAddress?.assumingMemoryBound(to: UInt8.self), &finalWritten)
        }
        guard verified > 0 else {
            // A tag mismatch is reported through the return value and may leave an entry in the
            // error queue: clear it (the deferred cleanse zeroes the unauthenticated plaintext).
            ERR_clear_error()
            throw authenticationFailed
        }
        guard Int(written) == box.ciphertext.count, finalWritten == 0 else {
            throw RainError(
                .internalError, "AES-256-GCM produced \(Int(written) + Int(finalWritten)) bytes for \(box.ciphertext.count)")
        }
        isAuthenticated = true
    }

    /// A cipher context keyed for AES-256-GCM with `key` and the 12-byte `nonce`, in the given
    /// direction, that has already taken in `aad`.
    /// - Throws: RAIN_502 when OpenSSL fails.
    private static func gcmContext(
        key: SymmetricKey, nonce: [UInt8], authenticating aad: [UInt8], encrypting: Bool
    ) throws(RainError) -> CipherContext {
        let context = try CipherContext()
        let ctx = context.pointer
        let direction: Int32 = encrypting ? 1 : 0
        guard EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), nil, nil, nil, direction) == 1 else {
            throw RainError.openSSL("EVP_CipherInit_ex(AES-256-GCM)")
        }
        guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(nonceByteCount), nil) == 1 else {
            throw RainError.openSSL("EVP_CTRL_GCM_SET_IVLEN")
        }
        // -1 keeps the direction chosen above.
        let keyed = key.withUnsafeBytes { keyBytes in
            withNonNullBytes(keyBytes) { keyPointer, _ in
                withNonNullBytes(nonce) { noncePointer, _ in
                    EVP_CipherInit_ex(ctx, nil, nil, keyPointer, noncePointer, -1)
                }
            }
        }
        guard keyed == 1 else { throw RainError.openSSL("EVP_CipherInit_ex(key, nonce)") }

        if !aad.isEmpty {
            var ignored: Int32 = 0
            let status = withNonNullBytes(aad) { pointer, count in
                EVP_CipherUpdate(ctx, nil, &ignored, pointer, Int32(count))
            }
            guard status == 1 else { throw RainError.openSSL("EVP_CipherUpdate(aad)") }
        }
        return context
    }
}
