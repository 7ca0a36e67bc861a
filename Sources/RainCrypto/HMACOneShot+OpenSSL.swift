internal import COpenSSL
import RainCore

/// The one call both HMAC-SHA256 and HMAC-SHA512 make: OpenSSL's one-shot `HMAC` into a
/// caller-provided buffer (which may be secret scratch memory).
enum HMACOneShot {
    enum Digest {
        case sha256, sha512

        var byteCount: Int { self == .sha256 ? 32 : 64 }
        var name: String { self == .sha256 ? "SHA-256" : "SHA-512" }
    }

    /// Writes the HMAC of `message` under `key` into the first `digest.byteCount` bytes of `output`.
    /// - Throws: RAIN_102 when the key is longer than 2 GiB; RAIN_502 when the output buffer is too
    ///   small or `HMAC` fails.
    static func authenticate(
        _ digest: Digest, _ message: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws(RainError) {
        guard output.count >= digest.byteCount, let outputBase = output.baseAddress else {
            throw RainError(.internalError, "HMAC-\(digest.name) output buffer is too small")
        }
        guard key.count <= Int(Int32.max) else {
            throw RainError.invalid("HMAC key is too long", field: "key")
        }
        var length: UInt32 = 0
        let result = withNonNullBytes(key) { keyPointer, keyCount in
            withNonNullBytes(message) { messagePointer, messageCount in
                HMAC(
                    digest == .sha256 ? EVP_sha256() : EVP_sha512(), keyPointer, Int32(keyCount), messagePointer,
                    messageCount, outputBase.assumingMemoryBound(to: UInt8.self), &length)
            }
        }
        guard result != nil else { throw RainError.openSSL("HMAC(\(digest.name))") }
        guard length == UInt32(digest.byteCount) else {
            throw RainError(.internalError, "HMAC(\(digest.name)) returned \(length) bytes")
        }
    }
}
