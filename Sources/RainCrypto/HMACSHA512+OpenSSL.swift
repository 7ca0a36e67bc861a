internal import COpenSSL
import RainCore

/// HMAC-SHA512 (RFC 2104, FIPS 198-1) through OpenSSL's one-shot `HMAC`, for BIP-32 and SLIP-10
/// key derivation.
enum HMACSHA512 {
    /// The MAC length in bytes.
    static let byteCount = 64

    /// Writes the HMAC-SHA512 of `message` under `key` into the first 64 bytes of `output`.
    /// `output` may be secret scratch memory; OpenSSL zeroes its own copy of the key schedule.
    /// - Throws: RAIN_102 when the key is longer than 2 GiB; RAIN_502 when the output buffer is
    ///   too small or `HMAC` fails.
    static func authenticate(
        _ message: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(RainError) {
        guard output.count >= byteCount, let outputBase = output.baseAddress else {
            throw RainError(.internalError, "HMAC-SHA512 output buffer is too small")
        }
        guard key.count <= Int(Int32.max) else {
            throw RainError.invalid("HMAC key is too long", field: "key")
        }
        var length: UInt32 = 0
        let result = withNonNullBytes(key) { keyPointer, keyCount in
            withNonNullBytes(message) { messagePointer, messageCount in
                HMAC(
                    EVP_sha512(), keyPointer, Int32(keyCount), messagePointer, messageCount,
                    outputBase.assumingMemoryBound(to: UInt8.self), &length)
            }
        }
        guard result != nil else { throw RainError.openSSL("HMAC(SHA-512)") }
        guard length == UInt32(byteCount) else {
            throw RainError(.internalError, "HMAC(SHA-512) returned \(length) bytes")
        }
    }

    /// The HMAC-SHA512 of `data` under `key`, as an ordinary array (for tests and public inputs).
    /// - Throws: RAIN_502 when `HMAC` fails.
    static func authenticate(_ data: [UInt8], key: [UInt8]) throws(RainError) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: byteCount)
        let result = mac.withUnsafeMutableBytes { output in
            data.withUnsafeBytes { message in
                key.withUnsafeBytes { keyBytes in
                    Result { () throws(RainError) in try authenticate(message, key: keyBytes, into: output) }
                }
            }
        }
        try result.get()
        return mac
    }
}
