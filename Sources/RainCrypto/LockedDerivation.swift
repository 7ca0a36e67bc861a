import RainCore

/// The steps from a wallet's entropy to its two private keys, each writing its output into a
/// caller's buffer (a slot of ``LockedSecrets``) and reading its input from one: the mnemonic
/// sentence (BIP-39), its seed (PBKDF2-HMAC-SHA512), the Ethereum key at `m/44'/60'/0'/0/0`
/// (BIP-32) and the Solana key at `m/44'/501'/0'/0'` (SLIP-10 Ed25519). No secret passes
/// through an ordinary array or string; ``WalletKeys`` derives the same keys for export.
enum LockedDerivation {
    /// The longest sentence: 24 words of at most 8 letters and 23 spaces.
    static let maximumSentenceByteCount = 24 * 9 - 1
    /// The scratch ``writeBIP32PrivateKey(seed:path:scratch:into:)`` needs: chain code, HMAC data
    /// (`00 ‖ k ‖ index` or `public key ‖ index`) and HMAC output.
    static let bip32ScratchByteCount = 32 + bip32DataByteCount + HMACSHA512.byteCount
    /// The scratch ``writeSLIP10Ed25519PrivateKey(seed:path:scratch:into:)`` needs: the current
    /// key and chain code, the next ones, and the HMAC data `00 ‖ k ‖ index`.
    static let slip10ScratchByteCount = 2 * HMACSHA512.byteCount + bip32DataByteCount
    /// `00 ‖ k ‖ index` and `compressed public key ‖ index` are both 37 bytes.
    private static let bip32DataByteCount = 1 + Secp256k1.scalarByteCount + 4

    /// BIP-39's salt without a passphrase: `"mnemonic"` (ASCII, so its own NFKD form).
    private static let seedSalt: [UInt8] = Array("mnemonic".utf8)

    /// The English wordlist as one run of ASCII bytes, with where each word starts (and, at the
    /// end, where the run ends), so a word is copied from public bytes, never through a `String`.
    private static let wordTable: (bytes: [UInt8], starts: [Int]) = {
        var bytes: [UInt8] = []
        var starts: [Int] = []
        starts.reserveCapacity(BIP39.englishWordlist.count + 1)
        for word in BIP39.englishWordlist {
            starts.append(bytes.count)
            bytes.append(contentsOf: word.utf8)
        }
        starts.append(bytes.count)
        return (bytes, starts)
    }()

    /// Writes the mnemonic sentence of `entropy`, its words joined by single spaces, into `output`.
    ///
    /// The words are those ``BIP39/mnemonic(fromEntropy:)`` gives; their English letters are
    /// ASCII, so the sentence is already in the NFKD form BIP-39 hashes.
    /// - Parameters:
    ///   - entropy: 16, 20, 24, 28 or 32 bytes.
    ///   - hash: 32 bytes of scratch for SHA-256 of the entropy, whose leading bits are the checksum.
    ///   - output: at least ``maximumSentenceByteCount`` bytes.
    /// - Returns: the sentence's length in bytes.
    /// - Throws: RAIN_102 (field `entropy`) for another entropy length; RAIN_502 when a buffer is
    ///   too small or OpenSSL fails.
    static func writeMnemonicSentence(
        entropy: UnsafeRawBufferPointer, hash: UnsafeMutableRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(RainError) -> Int {
        guard BIP39.entropyByteCounts.contains(entropy.count) else {
            throw RainError.invalid("BIP-39 entropy must be 16, 20, 24, 28 or 32 bytes", field: "entropy")
        }
        guard output.count >= maximumSentenceByteCount else {
            throw RainError(.internalError, "the mnemonic sentence needs \(maximumSentenceByteCount) bytes")
        }
        try SHA256.hash(entropy, into: hash)
        let entropyBits = entropy.count * 8
        let wordCount = (entropyBits + entropyBits / 32) / 11
        var length = 0
        wordTable.bytes.withUnsafeBytes { table in
            for word in 0..<wordCount {
                var index = 0
                for bit in (word * 11)..<(word * 11 + 11) {
                    // Bits past the entropy are the checksum: the leading bits of SHA-256(entropy).
                    let byte = bit < entropyBits ? entropy[bit / 8] : hash[(bit - entropyBits) / 8]
                    index = index << 1 | Int((byte >> (7 - UInt8(bit % 8))) & 1)
                }
                if word > 0 {
                    output[length] = UInt8(ascii: " ")
                    length += 1
                }
                let letters = wordTable.starts[index]..<wordTable.starts[index + 1]
                UnsafeMutableRawBufferPointer(rebasing: output[length..<(length + letters.count)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: table[letters]))
                length += letters.count
            }
        }
        return length
    }

    /// Writes the 64-byte BIP-39 seed of `sentence` without a passphrase into `output`:
    /// PBKDF2-HMAC-SHA512 with the salt `"mnemonic"`, 2048 iterations.
    /// - Throws: RAIN_502 when `output` is not 64 bytes or OpenSSL fails.
    static func writeSeed(sentence: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(RainError) {
        guard output.count == BIP39.seedByteCount else {
            throw RainError(.internalError, "a BIP-39 seed is \(BIP39.seedByteCount) bytes")
        }
        try seedSalt.withTypedUnsafeBytes { (salt) throws(RainError) in
            try PBKDF2HMACSHA512.deriveKey(password: sentence, salt: salt, iterations: BIP39.iterations, into: output)
        }
    }

    /// Writes the BIP-32 private key at `path` below the master key of `seed` into `key`.
    ///
    /// The master key is HMAC-SHA512(`"Bitcoin seed"`, seed); each child's I is
    /// HMAC-SHA512(chain code, data), with data `00 ‖ k ‖ index` for a hardened index and
    /// `compressed public key ‖ index` otherwise; the child key is (IL + k) mod n and its chain
    /// code IR. All the arithmetic is libsecp256k1's.
    /// - Parameters:
    ///   - seed: the 64-byte BIP-39 seed.
    ///   - path: the child indices, hardened ones with 2^31 added.
    ///   - scratch: at least ``bip32ScratchByteCount`` bytes.
    ///   - key: 32 bytes, the result.
    /// - Throws: RAIN_502 with reason `invalid_derived_key` when IL ≥ n or a key is 0
    ///   (probability below 2^-127); RAIN_502 when a buffer is too small or OpenSSL fails.
    static func writeBIP32PrivateKey(
        seed: UnsafeRawBufferPointer, path: [UInt32], scratch: UnsafeMutableRawBufferPointer,
        into key: UnsafeMutableRawBufferPointer
    ) throws(RainError) {
        guard scratch.count >= bip32ScratchByteCount, key.count == Secp256k1.scalarByteCount else {
            throw RainError(.internalError, "BIP-32 derivation buffers are too small")
        }
        let chainCode = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<32])
        let data = UnsafeMutableRawBufferPointer(rebasing: scratch[32..<(32 + bip32DataByteCount)])
        let digest = UnsafeMutableRawBufferPointer(rebasing: scratch[(32 + bip32DataByteCount)..<bip32ScratchByteCount])
        let left = UnsafeRawBufferPointer(rebasing: digest[0..<32])
        let right = UnsafeRawBufferPointer(rebasing: digest[32..<64])

        try BIP32ExtendedKey.masterHMACKey.withTypedUnsafeBytes { (hmacKey) throws(RainError) in
            try HMACSHA512.authenticate(seed, key: hmacKey, into: digest)
        }
        guard try Secp256k1.isValidSecretKey(left) else { throw Secp256k1.invalidDerivedKey }
        key.copyMemory(from: left)
        chainCode.copyMemory(from: right)

        for index in path {
            if index >= DerivationPath.hardenedOffset {
                data[0] = 0
                UnsafeMutableRawBufferPointer(rebasing: data[1..<33]).copyMemory(from: UnsafeRawBufferPointer(key))
            } else {
                try Secp256k1.writePublicKey(
                    privateKey: UnsafeRawBufferPointer(key), compressed: true,
                    into: UnsafeMutableRawBufferPointer(rebasing: data[0..<33]))
            }
            writeBigEndian(index, into: UnsafeMutableRawBufferPointer(rebasing: data[33..<37]))
            try HMACSHA512.authenticate(UnsafeRawBufferPointer(data), key: UnsafeRawBufferPointer(chainCode), into: digest)
            try Secp256k1.addTweak(left, toKeyInPlace: key)
            chainCode.copyMemory(from: right)
        }
    }

    /// Writes the SLIP-10 Ed25519 private key (RFC 8032's 32-byte seed) at `path` below the master
    /// key of `seed` into `key`.
    ///
    /// The master key is HMAC-SHA512(`"ed25519 seed"`, seed); each child is
    /// HMAC-SHA512(chain code, `00 ‖ k ‖ index`); the left half is the key, the right half the
    /// chain code.
    /// - Parameters:
    ///   - seed: the 64-byte BIP-39 seed.
    ///   - path: the child indices, all hardened (2^31 added).
    ///   - scratch: at least ``slip10ScratchByteCount`` bytes.
    ///   - key: 32 bytes, the result.
    /// - Throws: RAIN_102 (field `path`) for an index that is not hardened; RAIN_502 when a buffer
    ///   is too small or OpenSSL fails.
    static func writeSLIP10Ed25519PrivateKey(
        seed: UnsafeRawBufferPointer, path: [UInt32], scratch: UnsafeMutableRawBufferPointer,
        into key: UnsafeMutableRawBufferPointer
    ) throws(RainError) {
        guard scratch.count >= slip10ScratchByteCount, key.count == 32 else {
            throw RainError(.internalError, "SLIP-10 derivation buffers are too small")
        }
        guard path.allSatisfy({ $0 >= DerivationPath.hardenedOffset }) else {
            throw RainError.invalid("SLIP-10 Ed25519 derives hardened children only", field: "path")
        }
        // current = k ‖ c; next receives the child's I before it is copied over current.
        let current = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<64])
        let next = UnsafeMutableRawBufferPointer(rebasing: scratch[64..<128])
        let data = UnsafeMutableRawBufferPointer(rebasing: scratch[128..<slip10ScratchByteCount])
        try SLIP10Ed25519.masterHMACKey.withTypedUnsafeBytes { (hmacKey) throws(RainError) in
            try HMACSHA512.authenticate(seed, key: hmacKey, into: current)
        }
        for index in path {
            data[0] = 0
            UnsafeMutableRawBufferPointer(rebasing: data[1..<33])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: current[0..<32]))
            writeBigEndian(index, into: UnsafeMutableRawBufferPointer(rebasing: data[33..<37]))
            try HMACSHA512.authenticate(
                UnsafeRawBufferPointer(data), key: UnsafeRawBufferPointer(rebasing: current[32..<64]), into: next)
            current.copyMemory(from: UnsafeRawBufferPointer(next))
        }
        key.copyMemory(from: UnsafeRawBufferPointer(rebasing: current[0..<32]))
    }

    /// `value` as 4 big-endian bytes.
    private static func writeBigEndian(_ value: UInt32, into output: UnsafeMutableRawBufferPointer) {
        for byte in 0..<4 { output[byte] = UInt8(truncatingIfNeeded: value >> UInt32(24 - 8 * byte)) }
    }
}
