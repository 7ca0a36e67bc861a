internal import COpenSSL

/// Zeroing of secret memory, in a way the optimizer cannot remove.
enum SecureMemory {
    /// Overwrites `buffer` with zeros (`OPENSSL_cleanse`).
    static func cleanse(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        OPENSSL_cleanse(base, buffer.count)
    }

    /// Overwrites the array's bytes with zeros in place. Only the array's current storage is
    /// zeroed: copies made earlier are not.
    static func cleanse(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { cleanse($0) }
    }
}

/// Compares two byte strings in time that depends only on their length, not on where they differ
/// (`CRYPTO_memcmp`). Use it for MACs, tags and tokens.
///
/// - Returns: `true` when both have the same length and the same bytes; `false` when the lengths
///   differ (the length itself is not treated as secret).
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return a.withUnsafeBytes { x in
        b.withUnsafeBytes { y in
            guard let xBase = x.baseAddress, let yBase = y.baseAddress else { return false }
            return CRYPTO_memcmp(xBase, yBase, x.count) == 0
        }
    }
}
