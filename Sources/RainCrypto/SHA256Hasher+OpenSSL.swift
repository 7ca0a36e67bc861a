internal import COpenSSL
import RainCore

/// SHA-256 over data given in pieces, for content too large to hold at once (an executable
/// hashed by the caller identity reader, read a block at a time).
public final class SHA256Hasher {
    private let context: OpaquePointer

    /// A new hasher.
    /// - Throws: RAIN_502 when OpenSSL cannot make a digest context.
    public init() throws(RainError) {
        guard let context = EVP_MD_CTX_new() else { throw RainError.openSSL("EVP_MD_CTX_new") }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            EVP_MD_CTX_free(context)
            throw RainError.openSSL("EVP_DigestInit_ex(SHA-256)")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds `bytes` to the digest.
    /// - Throws: RAIN_502 when `EVP_DigestUpdate` fails.
    public func update(_ bytes: UnsafeRawBufferPointer) throws(RainError) {
        guard bytes.count > 0, let base = bytes.baseAddress else { return }
        guard EVP_DigestUpdate(context, base, bytes.count) == 1 else { throw RainError.openSSL("EVP_DigestUpdate(SHA-256)") }
    }

    /// The digest of everything added (32 bytes). The hasher is spent afterwards.
    /// - Throws: RAIN_502 when `EVP_DigestFinal_ex` fails.
    public func finalize() throws(RainError) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: SHA256.byteCount)
        var length: UInt32 = 0
        let status = digest.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
        guard status == 1, length == UInt32(SHA256.byteCount) else { throw RainError.openSSL("EVP_DigestFinal_ex(SHA-256)") }
        return digest
    }
}
