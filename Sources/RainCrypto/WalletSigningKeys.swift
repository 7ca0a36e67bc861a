import RainCore

/// A wallet's two signing keys, the Ethereum key at `m/44'/60'/0'/0/0` and the Solana key at
/// `m/44'/501'/0'/0'`, held in locked memory for the length of one closure.
///
/// ``with(sealedEntropy:key:associatedData:_:)`` decrypts the wallet's sealed entropy and derives
/// both keys as ``WalletKeys`` does, but every secret on the way (the entropy, the mnemonic
/// sentence, the BIP-39 seed, each BIP-32 and SLIP-10 key and chain code, and the two private keys)
/// lives only in pages that are locked in RAM, left out of core dumps and wiped on fork; the
/// intermediate values are zeroed as soon as the keys are derived, and the keys when the closure
/// returns, before the pages are unmapped. No secret passes through an ordinary array or string.
///
/// The keys cannot be copied or kept: the closure borrows them. Only the public parts
/// (``ethereumAddress``, ``solanaPublicKey``) and signatures come out.
public struct WalletSigningKeys: ~Copyable {
    /// The arena's size: room for the two keys, the entropy and its hash, the sentence, the seed
    /// and the derivations' scratch (rounded up to a page).
    static let arenaByteCount = 1024

    private let secrets: LockedSecrets
    private let ethereumKey: LockedSecrets.Slot
    private let solanaKey: LockedSecrets.Slot

    /// The Ethereum account's 20-byte address: the last 20 bytes of Keccak-256 of the uncompressed
    /// public key (without its `04`). ``EthereumAddress/checksummed(_:)`` of its hex is the address
    /// ``WalletKeys/ethereumAddress`` gives.
    public let ethereumAddress: [UInt8]
    /// The Solana account's 32-byte Ed25519 public key (its base-58 form is the address).
    public let solanaPublicKey: [UInt8]

    /// Decrypts a wallet's sealed entropy into locked memory, derives its signing keys there and
    /// calls `body` with them; zeroes and unmaps everything before returning.
    /// - Parameters:
    ///   - combined: the sealed entropy, `nonce ‖ ciphertext ‖ tag` of AES-256-GCM
    ///     (``AESGCM/SealedBox/combined``), whose plaintext is 16, 20, 24, 28 or 32 bytes.
    ///   - key: the 32-byte key it was sealed with.
    ///   - associatedData: the additional data it was sealed with.
    ///   - body: signs with the keys; it may not keep them.
    /// - Returns: what `body` returns.
    /// - Throws: RAIN_502 "the wallet's entropy does not decrypt" (reason `authentication_failed`)
    ///   when the key, the associated data or any byte of `combined` is wrong; RAIN_502 with reason
    ///   `locked_memory_limit` when the locked-memory limit (`RLIMIT_MEMLOCK`) is too small;
    ///   RAIN_102 when `key` is not 32 bytes; RAIN_502 when OpenSSL or libsecp256k1 fails; what
    ///   `body` throws.
    public static func with<R>(
        sealedEntropy combined: [UInt8], key: SymmetricKey, associatedData: [UInt8],
        _ body: (borrowing WalletSigningKeys) throws(RainError) -> R
    ) throws(RainError) -> R {
        let keys = try WalletSigningKeys(sealedEntropy: combined, key: key, associatedData: associatedData)
        return try body(keys)
    }

    /// The error for sealed entropy that does not open. Says nothing of the bytes or of which
    /// part was wrong.
    static var doesNotDecrypt: RainError {
        RainError(
            .internalError, "the wallet's entropy does not decrypt",
            details: RainError.Details(reason: "authentication_failed"))
    }

    private init(sealedEntropy combined: [UInt8], key: SymmetricKey, associatedData: [UInt8]) throws(RainError) {
        try AESGCM.checkKey(key)
        guard let box = try? AESGCM.SealedBox(combined: combined),
            BIP39.entropyByteCounts.contains(box.ciphertext.count)
        else {
            throw Self.doesNotDecrypt
        }
        let secrets = try LockedSecrets(byteCount: Self.arenaByteCount)
        let ethereumKey = try secrets.allocate(Secp256k1.scalarByteCount)
        let solanaKey = try secrets.allocate(Ed25519PrivateKey.byteCount)

        // Everything allocated from here on is zeroed once the keys are derived, or on a failure.
        let scratchMark = secrets.mark
        defer { secrets.release(from: scratchMark) }
        let entropy = try secrets.allocate(box.ciphertext.count)
        let hash = try secrets.allocate(SHA256.byteCount)
        let sentence = try secrets.allocate(LockedDerivation.maximumSentenceByteCount)
        let seed = try secrets.allocate(BIP39.seedByteCount)
        let scratch = try secrets.allocate(
            max(LockedDerivation.bip32ScratchByteCount, LockedDerivation.slip10ScratchByteCount))
        let ethereumPath = try DerivationPath(parsing: WalletKeys.ethereumPath).indices
        let solanaPath = try DerivationPath(parsing: WalletKeys.solanaPath).indices

        try secrets.withUnsafeMutableBytes { (arena) throws(RainError) in
            do throws(RainError) {
                try AESGCM.open(box, using: key, authenticating: associatedData, into: entropy.bytes(in: arena))
            } catch {
                throw error.details.reason == AESGCM.authenticationFailed.details.reason ? Self.doesNotDecrypt : error
            }
            let sentenceLength = try LockedDerivation.writeMnemonicSentence(
                entropy: UnsafeRawBufferPointer(entropy.bytes(in: arena)), hash: hash.bytes(in: arena),
                into: sentence.bytes(in: arena))
            try LockedDerivation.writeSeed(
                sentence: UnsafeRawBufferPointer(rebasing: sentence.bytes(in: arena)[0..<sentenceLength]),
                into: seed.bytes(in: arena))
            try LockedDerivation.writeBIP32PrivateKey(
                seed: UnsafeRawBufferPointer(seed.bytes(in: arena)), path: ethereumPath, scratch: scratch.bytes(in: arena),
                into: ethereumKey.bytes(in: arena))
            // The scratch holds the last BIP-32 chain code: zeroed before SLIP-10 reuses it.
            SecureMemory.cleanse(scratch.bytes(in: arena))
            try LockedDerivation.writeSLIP10Ed25519PrivateKey(
                seed: UnsafeRawBufferPointer(seed.bytes(in: arena)), path: solanaPath, scratch: scratch.bytes(in: arena),
                into: solanaKey.bytes(in: arena))
        }

        let publicKey = try secrets.withBytes(of: ethereumKey) { (key) throws(RainError) in
            try Secp256k1.uncompressedPublicKey(privateKey: UnsafeRawBufferPointer(key))
        }
        let solanaPublicKey = try secrets.withBytes(of: solanaKey) { (key) throws(RainError) in
            try Ed25519PrivateKey.publicKey(seed: UnsafeRawBufferPointer(key))
        }
        // No throw from here on: a noncopyable value is initialized all at once.
        self.ethereumAddress = Array(Keccak256.hash(Array(publicKey.dropFirst())).suffix(20))
        self.solanaPublicKey = solanaPublicKey
        self.secrets = secrets
        self.ethereumKey = ethereumKey
        self.solanaKey = solanaKey
    }

    /// Signs a 32-byte digest with the Ethereum key: recoverable ECDSA on secp256k1 with an
    /// RFC 6979 nonce, so the same digest always gives the same signature, and s ≤ n/2 (low-s,
    /// EIP-2). ``Secp256k1Recovery/recoverAddress(digest:r:s:recoveryID:)`` gives
    /// ``ethereumAddress`` back.
    /// - Parameter digest: the 32-byte hash to sign (for a transaction, Keccak-256 of its signing
    ///   payload).
    /// - Returns: r and s (32 big-endian bytes each) and the recovery id (0 or 1; Ethereum's `v` is
    ///   27 + id, or 35 + 2 × chain id + id under EIP-155).
    /// - Throws: RAIN_102 (field `digest`) when the digest is not 32 bytes; RAIN_502 when
    ///   libsecp256k1 fails.
    public func signEthereumDigest(_ digest: [UInt8]) throws(RainError) -> (r: [UInt8], s: [UInt8], recoveryID: UInt8) {
        let signature = try secrets.withBytes(of: ethereumKey) { (key) throws(RainError) in
            try Secp256k1.signRecoverable(digest: digest, privateKey: UnsafeRawBufferPointer(key))
        }
        return (signature.r, signature.s, signature.recoveryID)
    }

    /// Signs a message with the Solana key (pure Ed25519, RFC 8032: deterministic). OpenSSL's copy
    /// of the key lives only for the call and is zeroed when freed.
    /// - Parameter message: the bytes to sign (for a transaction, its serialized message).
    /// - Returns: the 64-byte signature, which ``Ed25519PublicKey`` of ``solanaPublicKey`` verifies.
    /// - Throws: RAIN_502 when OpenSSL fails.
    public func signSolana(_ message: [UInt8]) throws(RainError) -> [UInt8] {
        try secrets.withBytes(of: solanaKey) { (key) throws(RainError) in
            try Ed25519PrivateKey.signature(for: message, seed: UnsafeRawBufferPointer(key))
        }
    }

    /// Where the locked arena of these keys starts, for tests that check it is unmapped once
    /// ``with(sealedEntropy:key:associatedData:_:)`` returns.
    package var arenaBaseAddress: UInt { secrets.baseAddress }

    /// Calls `body` with the whole locked arena, for tests that check what it holds. The pointer
    /// must not escape the closure.
    func withArenaBytes<R>(_ body: (UnsafeRawBufferPointer) throws(RainError) -> R) throws(RainError) -> R {
        try secrets.withUnsafeMutableBytes { (arena) throws(RainError) in try body(UnsafeRawBufferPointer(arena)) }
    }
}
