internal import COpenSSL
import RainCore

/// Bitcoin's HASH160, RIPEMD-160(SHA-256(data)), for BIP-32 key fingerprints. RIPEMD-160 is in
/// OpenSSL 3.0's default provider from 3.0.7 on.
enum Hash160 {
    /// The digest length in bytes.
    static let byteCount = 20

    /// RIPEMD-160(SHA-256(`data`)).
    /// - Throws: RAIN_502 when `EVP_Digest` fails (for example without RIPEMD-160 support).
    static func hash(_ data: [UInt8]) throws(RainError) -> [UInt8] {
        let inner = SHA256.hash(data)
        var digest = [UInt8](repeating: 0, count: 64)
        var length: UInt32 = 0
        let status = digest.withUnsafeMutableBufferPointer { output in
            withNonNullBytes(inner) { pointer, count in
                EVP_Digest(pointer, count, output.baseAddress, &length, EVP_ripemd160(), nil)
            }
        }
        guard status == 1 else { throw RainError.openSSL("EVP_Digest(RIPEMD-160)") }
        guard length == UInt32(byteCount) else {
            throw RainError(.internalError, "EVP_Digest(RIPEMD-160) returned \(length) bytes")
        }
        return Array(digest.prefix(byteCount))
    }
}
