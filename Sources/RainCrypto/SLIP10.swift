import RainCore

/// SLIP-0010 key derivation for Ed25519, as Solana wallets use it (`m/44'/501'/0'/0'`).
///
/// The master key is HMAC-SHA512 with the key `"ed25519 seed"` over the seed; each child is
/// HMAC-SHA512(chain code, `00 ‖ k ‖ index`). The left half is the Ed25519 private key (RFC 8032's
/// 32-byte seed), the right half the chain code. Ed25519 has hardened children only.
public enum SLIP10Ed25519 {
    /// The HMAC key of the master key derivation.
    static let masterHMACKey: [UInt8] = Array("ed25519 seed".utf8)

    /// The Ed25519 private key and chain code at `path`.
    /// - Parameters:
    ///   - seed: 16 to 64 bytes, usually the 64-byte BIP-39 seed.
    ///   - path: `m` followed by hardened components (`'`, `h` or `H`), for example
    ///     `m/44'/501'/0'/0'`.
    /// - Returns: the 32-byte private key and 32-byte chain code. Both secret.
    /// - Throws: RAIN_102 (field `seed`) for a seed of the wrong length, (field `path`) for a
    ///   malformed path or a non-hardened component; RAIN_502 when OpenSSL fails.
    public static func derive(seed: [UInt8], path: String) throws(RainError) -> (privateKey: [UInt8], chainCode: [UInt8]) {
        let keys = try seed.withTypedUnsafeBytes { (bytes) throws(RainError) in try deriveKeys(seed: bytes, path: path) }
        return (keys.privateKey.withUnsafeBytes { Array($0) }, keys.chainCode.withUnsafeBytes { Array($0) })
    }

    /// ``derive(seed:path:)`` with the seed and the results in zeroing memory.
    static func deriveKeys(
        seed: UnsafeRawBufferPointer, path: String
    ) throws(RainError) -> (privateKey: SymmetricKey, chainCode: SymmetricKey) {
        guard (16...64).contains(seed.count) else {
            throw RainError.invalid("a SLIP-10 seed is 16 to 64 bytes", field: "seed")
        }
        let parsed = try DerivationPath(parsing: path)
        guard parsed.indices.allSatisfy({ $0 >= DerivationPath.hardenedOffset }) else {
            throw RainError.invalid(
                "SLIP-10 Ed25519 derives hardened children only: mark every index of the path with '", field: "path")
        }
        let dataByteCount = 1 + 32 + 4
        let size = HMACSHA512.byteCount * 2 + dataByteCount
        return try withSecretScratch(byteCount: size) { (scratch) throws(RainError) in
            // current = k ‖ c; next receives the child's I before it is copied over current.
            let current = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<64])
            let next = UnsafeMutableRawBufferPointer(rebasing: scratch[64..<128])
            let data = UnsafeMutableRawBufferPointer(rebasing: scratch[128..<size])
            try masterHMACKey.withTypedUnsafeBytes { (key) throws(RainError) in
                try HMACSHA512.authenticate(seed, key: key, into: current)
            }
            for index in parsed.indices {
                data[0] = 0
                UnsafeMutableRawBufferPointer(rebasing: data[1..<33])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: current[0..<32]))
                for byte in 0..<4 { data[33 + byte] = UInt8(truncatingIfNeeded: index >> UInt32(24 - 8 * byte)) }
                try HMACSHA512.authenticate(
                    UnsafeRawBufferPointer(data), key: UnsafeRawBufferPointer(rebasing: current[32..<64]), into: next)
                current.copyMemory(from: UnsafeRawBufferPointer(next))
            }
            return (
                try SymmetricKey.copying(UnsafeRawBufferPointer(rebasing: current[0..<32])),
                try SymmetricKey.copying(UnsafeRawBufferPointer(rebasing: current[32..<64]))
            )
        }
    }
}
