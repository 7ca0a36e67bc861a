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
        try HMACOneShot.authenticate(.sha512, message, key: key, into: output)
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
