internal import COpenSSL
import RainCore

/// AES-256 in CBC mode without padding, as CTAP2's PIN/UV auth protocol 2 uses it (the caller
/// prepends its random IV and sends whole blocks only).
///
/// CBC is not authenticated: use it only where a MAC covers the ciphertext, or where the format
/// fixes it (CTAP2). Everything else seals with ``AESGCM``.
public enum AES256CBC {
    /// The AES block size, and the IV length, in bytes.
    public static let blockByteCount = 16
    /// The key length in bytes.
    public static let keyByteCount = 32

    /// Encrypts whole blocks.
    /// - Parameters:
    ///   - plaintext: a multiple of 16 bytes.
    ///   - key: 32 bytes.
    ///   - iv: 16 bytes; never reuse one under the same key for different messages.
    /// - Returns: the ciphertext, as long as `plaintext`.
    /// - Throws: RAIN_102 when a length is wrong; RAIN_502 when OpenSSL fails.
    public static func encrypt(_ plaintext: [UInt8], key: SymmetricKey, iv: [UInt8]) throws(RainError) -> [UInt8] {
        try crypt(plaintext, key: key, iv: iv, encrypting: true)
    }

    /// Decrypts whole blocks.
    /// - Parameters:
    ///   - ciphertext: a multiple of 16 bytes.
    ///   - key: 32 bytes.
    ///   - iv: the 16 bytes it was encrypted with.
    /// - Returns: the plaintext, as long as `ciphertext`.
    /// - Throws: RAIN_102 when a length is wrong; RAIN_502 when OpenSSL fails.
    public static func decrypt(_ ciphertext: [UInt8], key: SymmetricKey, iv: [UInt8]) throws(RainError) -> [UInt8] {
        try crypt(ciphertext, key: key, iv: iv, encrypting: false)
    }

    private static func crypt(_ input: [UInt8], key: SymmetricKey, iv: [UInt8], encrypting: Bool) throws(RainError) -> [UInt8] {
        guard key.byteCount == keyByteCount else { throw RainError.invalid("an AES-256 key is 32 bytes", field: "key") }
        guard iv.count == blockByteCount else { throw RainError.invalid("an AES-CBC IV is 16 bytes", field: "iv") }
        guard input.count % blockByteCount == 0, input.count <= Int(Int32.max) - blockByteCount else {
            throw RainError.invalid("AES-CBC without padding takes whole 16-byte blocks", field: "input")
        }
        let context = try CipherContext()
        let ctx = context.pointer
        let initialized = key.withUnsafeBytes { keyBytes in
            iv.withUnsafeBufferPointer { ivBytes in
                EVP_CipherInit_ex(
                    ctx, EVP_aes_256_cbc(), nil, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), ivBytes.baseAddress,
                    encrypting ? 1 : 0) == 1
            }
        }
        // Padding off: CTAP2 sends whole blocks, and a padded block would change every length.
        guard initialized, EVP_CIPHER_CTX_set_padding(ctx, 0) == 1 else {
            throw RainError.openSSL("EVP_CipherInit_ex(AES-256-CBC)")
        }
        guard !input.isEmpty else { return [] }
        var output = [UInt8](repeating: 0, count: input.count + blockByteCount)
        var written: Int32 = 0
        var finalWritten: Int32 = 0
        let done = output.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            let status = withNonNullBytes(input) { pointer, count in
                EVP_CipherUpdate(ctx, base, &written, pointer, Int32(count))
            }
            guard status == 1, written >= 0 else { return false }
            return EVP_CipherFinal_ex(ctx, base + Int(written), &finalWritten) == 1
        }
        guard done else { throw RainError.openSSL("AES-256-CBC") }
        let total = Int(written) + Int(finalWritten)
        guard total == input.count else {
            throw RainError(.internalError, "AES-256-CBC produced \(total) bytes for \(input.count)")
        }
        output.removeLast(output.count - total)
        return output
    }
}
