internal import COpenSSL
import RainCore

/// PBKDF2 (RFC 8018 §5.2) with HMAC-SHA512 through OpenSSL's `PKCS5_PBKDF2_HMAC`, for BIP-39
/// seeds.
enum PBKDF2HMACSHA512 {
    /// Fills `output` with PBKDF2-HMAC-SHA512 of `password` and `salt`.
    /// - Parameters:
    ///   - password: the password bytes (any bytes, including NUL).
    ///   - salt: the salt bytes.
    ///   - iterations: the iteration count, at least 1.
    ///   - output: where the derived key goes; its length is the key length (1 or more bytes).
    /// - Throws: RAIN_102 when an argument is out of OpenSSL's `int` range or not positive;
    ///   RAIN_502 when OpenSSL fails.
    static func deriveKey(
        password: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer, iterations: Int,
        into output: UnsafeMutableRawBufferPointer, isSHA256: Bool = false
    ) throws(RainError) {
        let limit = Int(Int32.max)
        guard iterations >= 1, iterations <= limit else {
            throw RainError.invalid("PBKDF2 iteration count must be positive", field: "iterations")
        }
        guard password.count <= limit, salt.count <= limit else {
            throw RainError.invalid("PBKDF2 password or salt is too long", field: "password")
        }
        guard output.count >= 1, output.count <= limit, let outputBase = output.baseAddress else {
            throw RainError.invalid("PBKDF2 output length is out of range", field: "outputByteCount")
        }
        let status = withNonNullBytes(password) { passwordPointer, passwordCount in
            withNonNullBytes(salt) { saltPointer, saltCount in
                // The password parameter is `const char *` but is read as bytes with a length.
                UnsafeRawPointer(passwordPointer).withMemoryRebound(to: CChar.self, capacity: max(passwordCount, 1)) {
                    PKCS5_PBKDF2_HMAC(
                        $0, Int32(passwordCount), saltPointer, Int32(saltCount), Int32(iterations),
                        isSHA256 ? EVP_sha256() : EVP_sha512(),
                        Int32(output.count), outputBase.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        guard status == 1 else { throw RainError.openSSL(isSHA256 ? "PKCS5_PBKDF2_HMAC(SHA-256)" : "PKCS5_PBKDF2_HMAC(SHA-512)") }
    }

    /// PBKDF2-HMAC-SHA512 into an ordinary array (for tests).
    static func deriveKey(
        password: [UInt8], salt: [UInt8], iterations: Int, outputByteCount: Int
    ) throws(RainError) -> [UInt8] {
        guard outputByteCount >= 1 else {
            throw RainError.invalid("PBKDF2 output length is out of range", field: "outputByteCount")
        }
        var key = [UInt8](repeating: 0, count: outputByteCount)
        let result = key.withUnsafeMutableBytes { output in
            password.withUnsafeBytes { passwordBytes in
                salt.withUnsafeBytes { saltBytes in
                    Result { () throws(RainError) in
                        try deriveKey(password: passwordBytes, salt: saltBytes, iterations: iterations, into: output)
                    }
                }
            }
        }
        try result.get()
        return key
    }
}

/// PBKDF2 (RFC 8018 §5.2) with HMAC-SHA256, for keys derived from a passphrase (the master-key
/// backup of `storage backup`).
public enum PBKDF2HMACSHA256 {
    /// A 32-byte key from `password` and `salt`, written straight into zeroed key memory.
    /// - Throws: RAIN_102 when the iteration count is not positive; RAIN_502 when OpenSSL fails.
    public static func deriveKey(password: [UInt8], salt: [UInt8], iterations: Int) throws(RainError) -> SymmetricKey {
        try SymmetricKey(byteCount: 32) { (output) throws(RainError) in
            let result = password.withUnsafeBytes { passwordBytes in
                salt.withUnsafeBytes { saltBytes in
                    Result { () throws(RainError) in
                        try PBKDF2HMACSHA512.deriveKey(
                            password: passwordBytes, salt: saltBytes, iterations: iterations, into: output, isSHA256: true)
                    }
                }
            }
            try result.get()
        }
    }
}
