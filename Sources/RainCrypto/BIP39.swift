import FoundationEssentials
import RainCore

/// BIP-39 mnemonic sentences with the English wordlist: entropy ⇄ words, and words → seed.
///
/// Entropy of 16, 20, 24, 28 or 32 bytes (128 to 256 bits) gains a checksum of its first
/// ENT/32 bits of SHA-256, and the result is cut into 11-bit numbers, each naming a word of
/// ``englishWordlist``: 12, 15, 18, 21 or 24 words. The seed is PBKDF2-HMAC-SHA512 of the
/// sentence (words joined by single spaces) with the salt `"mnemonic" + passphrase`, both in
/// Unicode NFKD, 2048 iterations, 64 bytes.
public enum BIP39 {
    /// The entropy lengths BIP-39 allows, in bytes.
    static let entropyByteCounts: Set<Int> = [16, 20, 24, 28, 32]
    /// The seed length in bytes.
    static let seedByteCount = 64
    /// PBKDF2's iteration count.
    static let iterations = 2048

    /// Each word's position in ``englishWordlist``.
    private static let wordIndices: [String: Int] = {
        var indices: [String: Int] = [:]
        indices.reserveCapacity(englishWordlist.count)
        for (index, word) in englishWordlist.enumerated() { indices[word] = index }
        return indices
    }()

    /// The mnemonic sentence that encodes `entropy`.
    /// - Parameter entropy: 16, 20, 24, 28 or 32 bytes, from a CSPRNG.
    /// - Returns: 12, 15, 18, 21 or 24 words of ``englishWordlist``.
    /// - Throws: RAIN_102 (field `entropy`) for any other length.
    public static func mnemonic(fromEntropy entropy: [UInt8]) throws(RainError) -> [String] {
        guard entropyByteCounts.contains(entropy.count) else {
            throw RainError.invalid("BIP-39 entropy must be 16, 20, 24, 28 or 32 bytes", field: "entropy")
        }
        var hash = SHA256.hash(entropy)
        defer { SecureMemory.cleanse(&hash) }
        let entropyBits = entropy.count * 8
        let wordCount = (entropyBits + entropyBits / 32) / 11
        var words: [String] = []
        words.reserveCapacity(wordCount)
        for word in 0..<wordCount {
            var index = 0
            for bit in (word * 11)..<(word * 11 + 11) {
                // Bits past the entropy are the checksum: the leading bits of SHA-256(entropy).
                let byte = bit < entropyBits ? entropy[bit / 8] : hash[(bit - entropyBits) / 8]
                index = index << 1 | Int((byte >> (7 - UInt8(bit % 8))) & 1)
            }
            words.append(englishWordlist[index])
        }
        return words
    }

    /// The entropy that a mnemonic sentence encodes, after checking its words and checksum.
    /// - Parameter words: 12, 15, 18, 21 or 24 words, each exactly as in ``englishWordlist``
    ///   (lowercase, no spaces).
    /// - Returns: 16 to 32 bytes.
    /// - Throws: RAIN_102 (field `mnemonic`) with reason `word_count`, `unknown_word` or
    ///   `checksum`. Messages never contain the words.
    public static func entropy(fromMnemonic words: [String]) throws(RainError) -> [UInt8] {
        guard [12, 15, 18, 21, 24].contains(words.count) else {
            throw RainError.invalid(
                "a BIP-39 mnemonic has 12, 15, 18, 21 or 24 words", field: "mnemonic", reason: "word_count")
        }
        var indices: [Int] = []
        indices.reserveCapacity(words.count)
        defer { indices.withUnsafeMutableBytes { SecureMemory.cleanse($0) } }
        for (position, word) in words.enumerated() {
            guard let index = wordIndices[word] else {
                throw RainError.invalid(
                    "word \(position + 1) of the mnemonic is not in the BIP-39 English wordlist", field: "mnemonic",
                    reason: "unknown_word")
            }
            indices.append(index)
        }
        let totalBits = words.count * 11
        let checksumBits = totalBits / 33
        let entropyBits = totalBits - checksumBits
        var entropy = [UInt8](repeating: 0, count: entropyBits / 8)
        var checksum: UInt8 = 0
        for bit in 0..<totalBits {
            let value = UInt8((indices[bit / 11] >> (10 - bit % 11)) & 1)
            if bit < entropyBits {
                entropy[bit / 8] |= value << (7 - UInt8(bit % 8))
            } else {
                checksum = checksum << 1 | value
            }
        }
        var hash = SHA256.hash(entropy)
        defer { SecureMemory.cleanse(&hash) }
        let expected = hash[0] >> (8 - UInt8(checksumBits))
        guard constantTimeEquals([checksum], [expected]) else {
            SecureMemory.cleanse(&entropy)
            throw RainError.invalid("the mnemonic's checksum does not match", field: "mnemonic", reason: "checksum")
        }
        return entropy
    }

    /// The 64-byte BIP-39 seed of a mnemonic sentence, for BIP-32 and SLIP-10.
    ///
    /// The sentence is checked first (words and checksum), so a mistyped phrase is refused rather
    /// than silently giving another wallet.
    /// - Parameters:
    ///   - words: the mnemonic sentence, as for ``entropy(fromMnemonic:)``.
    ///   - passphrase: BIP-39's optional passphrase ("25th word"); empty by default.
    /// - Returns: 64 bytes: PBKDF2-HMAC-SHA512(NFKD(words joined by spaces),
    ///   NFKD("mnemonic" + passphrase), 2048 iterations).
    /// - Throws: RAIN_102 as ``entropy(fromMnemonic:)`` does; RAIN_502 when OpenSSL fails.
    public static func seed(fromMnemonic words: [String], passphrase: String = "") throws(RainError) -> [UInt8] {
        let seed = try seedKey(fromMnemonic: words, passphrase: passphrase)
        return seed.withUnsafeBytes { Array($0) }
    }

    /// ``seed(fromMnemonic:passphrase:)`` into zeroing memory, for the derivations that follow.
    static func seedKey(fromMnemonic words: [String], passphrase: String) throws(RainError) -> SymmetricKey {
        var entropy = try entropy(fromMnemonic: words)
        SecureMemory.cleanse(&entropy)
        var password = Array(NFKD.normalize(words.joined(separator: " ")).utf8)
        var salt = Array(NFKD.normalize("mnemonic" + passphrase).utf8)
        defer {
            SecureMemory.cleanse(&password)
            SecureMemory.cleanse(&salt)
        }
        return try SymmetricKey(byteCount: seedByteCount) { (output) throws(RainError) in
            try password.withTypedUnsafeBytes { (passwordBytes) throws(RainError) in
                try salt.withTypedUnsafeBytes { (saltBytes) throws(RainError) in
                    try PBKDF2HMACSHA512.deriveKey(
                        password: passwordBytes, salt: saltBytes, iterations: iterations, into: output)
                }
            }
        }
    }
}
