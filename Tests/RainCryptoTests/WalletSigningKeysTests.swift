import RainCore
@testable import RainCrypto
import RainTestSupport
import Testing

@Suite struct WalletSigningKeysTests {
    /// n/2 for secp256k1, big-endian: a low-s signature has s ≤ n/2 (EIP-2).
    static let halfOrder = "7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0"

    /// Entropy sealed as the authority seals it: AES-256-GCM under a random key, with the wallet's
    /// associated data.
    struct Sealed {
        var combined: [UInt8]
        var key: SymmetricKey
        var associatedData: [UInt8]

        init(_ entropy: [UInt8]) throws {
            key = try SymmetricKey.random()
            associatedData = Array("rain.wallet.v1:wal_test".utf8)
            combined = try AESGCM.seal(entropy, using: key, authenticating: associatedData).combined
        }
    }

    /// What a wallet's signing keys show and sign, taken out of the closure to check.
    struct Observed {
        var ethereumAddress: [UInt8]
        var solanaPublicKey: [UInt8]
        var digest: [UInt8]
        var signature: (r: [UInt8], s: [UInt8], recoveryID: UInt8)
        var secondSignature: (r: [UInt8], s: [UInt8], recoveryID: UInt8)
        var message: [UInt8]
        var solanaSignature: [UInt8]
    }

    /// Opens `sealed`, signs a random digest (twice) and a random message.
    func observe(_ sealed: Sealed) throws -> Observed {
        let digest = try SecureRandom.bytes(count: 32)
        let message = try SecureRandom.bytes(count: 1 + Int(try SecureRandom.uniform(upperBound: 300)))
        return try WalletSigningKeys.with(
            sealedEntropy: sealed.combined, key: sealed.key, associatedData: sealed.associatedData
        ) { (keys) throws(RainError) in
            Observed(
                ethereumAddress: keys.ethereumAddress, solanaPublicKey: keys.solanaPublicKey, digest: digest,
                signature: try keys.signEthereumDigest(digest), secondSignature: try keys.signEthereumDigest(digest),
                message: message, solanaSignature: try keys.signSolana(message))
        }
    }

    /// Checks what `entropy`'s signing keys show and sign against ``WalletKeys``.
    func checkAgainstWalletKeys(entropy: [UInt8]) throws {
        let expected = try WalletKeys.derive(entropy: entropy)
        let observed = try observe(try Sealed(entropy))

        #expect(EthereumAddress.checksummed(Hex.encode(observed.ethereumAddress)) == expected.ethereumAddress)
        #expect(try SolanaAddress.fromPublicKey(observed.solanaPublicKey) == expected.solanaAddress)

        let signature = observed.signature
        #expect(signature.r.count == 32 && signature.s.count == 32)
        #expect(signature.recoveryID <= 1)
        #expect(isLowS(signature.s))
        let recovered = try Secp256k1Recovery.recoverAddress(
            digest: observed.digest, r: signature.r, s: signature.s, recoveryID: signature.recoveryID)
        #expect(recovered == observed.ethereumAddress)
        // RFC 6979: the same digest gives the same signature.
        #expect(observed.secondSignature.r == signature.r && observed.secondSignature.s == signature.s)

        #expect(observed.solanaSignature.count == 64)
        let solanaKey = try Ed25519PublicKey(rawRepresentation: observed.solanaPublicKey)
        #expect(solanaKey.isValidSignature(observed.solanaSignature, for: observed.message))
        // The keypair WalletKeys exports signs the same (Ed25519 is deterministic).
        let keypair = try #require(Base58.decode(expected.solanaKeypairBase58))
        let exported = try Ed25519PrivateKey(rawRepresentation: Array(keypair.prefix(32)))
        #expect(try exported.signature(for: observed.message) == observed.solanaSignature)
    }

    func isLowS(_ s: [UInt8]) -> Bool {
        let half = Hex.decode(Self.halfOrder) ?? []
        return s.count == 32 && (s == half || s.lexicographicallyPrecedes(half))
    }

    @Test(
        "the keys of every cross-checked vector have the addresses WalletKeys derives, and sign for them",
        arguments: WalletKeysTests.vectors)
    func vectorsMatchWalletKeys(vector: WalletKeysTests.Vector) throws {
        try checkAgainstWalletKeys(entropy: try hexBytes(vector.entropy))
    }

    @Test(
        "the keys of random entropy of every BIP-39 length match WalletKeys and sign for their addresses",
        arguments: [16, 16, 16, 20, 24, 28, 32])
    func randomEntropyMatchesWalletKeys(byteCount: Int) throws {
        try checkAgainstWalletKeys(entropy: try SecureRandom.bytes(count: byteCount))
    }

    @Test("the EIP-155 example signature comes out exactly: RFC 6979 nonces and low s")
    func eip155Example() throws {
        let privateKey = try hexBytes(String(repeating: "46", count: 32))
        let digest = try hexBytes("daf5a779ae972f972197303d7b574746c7ef83eadac0f2791ad23db92e4c8e53")
        let signature = try privateKey.withTypedUnsafeBytes { (key) throws(RainError) in
            try Secp256k1.signRecoverable(digest: digest, privateKey: key)
        }
        #expect(Hex.encode(signature.r) == "28ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276")
        #expect(Hex.encode(signature.s) == "67cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83")
        #expect(signature.recoveryID == 0)
        // v = 35 + 2 × chain id + recovery id = 37 on chain 1.
        #expect(35 + 2 * 1 + Int(signature.recoveryID) == 37)
        // The EIP's sender, 0x9d8A62f656a8d1615C1294fd71e9CFb3E4855A4F, is the key's address.
        let recovered = try Secp256k1Recovery.recoverAddress(
            digest: digest, r: signature.r, s: signature.s, recoveryID: signature.recoveryID)
        #expect(EthereumAddress.checksummed(Hex.encode(recovered)) == "0x9d8A62f656a8d1615C1294fd71e9CFb3E4855A4F")
    }

    @Test("fifty signatures of random digests all have s at most n/2, and all recover to the address")
    func signaturesAreLowS() throws {
        let sealed = try Sealed(try SecureRandom.bytes(count: 16))
        let digests = try (0..<50).map { _ in try SecureRandom.bytes(count: 32) }
        let (address, signatures) = try WalletSigningKeys.with(
            sealedEntropy: sealed.combined, key: sealed.key, associatedData: sealed.associatedData
        ) { (keys) throws(RainError) in
            var signatures: [(r: [UInt8], s: [UInt8], recoveryID: UInt8)] = []
            for digest in digests { signatures.append(try keys.signEthereumDigest(digest)) }
            return (keys.ethereumAddress, signatures)
        }
        for (digest, signature) in zip(digests, signatures) {
            #expect(isLowS(signature.s))
            #expect(
                try Secp256k1Recovery.recoverAddress(
                    digest: digest, r: signature.r, s: signature.s, recoveryID: signature.recoveryID) == address)
        }
    }

    @Test("a signature recovers to another address for another digest, and a malformed one is refused")
    func recoveryTellsSignaturesApart() throws {
        let privateKey = try SecureRandom.bytes(count: 32)
        let digest = try SecureRandom.bytes(count: 32)
        let (signature, publicKey) = try privateKey.withTypedUnsafeBytes { (key) throws(RainError) in
            (try Secp256k1.signRecoverable(digest: digest, privateKey: key), try Secp256k1.uncompressedPublicKey(privateKey: key))
        }
        let address = Array(Keccak256.hash(Array(publicKey.dropFirst())).suffix(20))
        #expect(
            try Secp256k1Recovery.recoverAddress(digest: digest, r: signature.r, s: signature.s, recoveryID: signature.recoveryID)
                == address)
        var otherDigest = digest
        otherDigest[0] ^= 1
        #expect(
            try Secp256k1Recovery.recoverAddress(
                digest: otherDigest, r: signature.r, s: signature.s, recoveryID: signature.recoveryID) != address)
        #expect(throws: RainError.invalidArgument) {
            try Secp256k1Recovery.recoverAddress(
                digest: digest, r: [UInt8](repeating: 0, count: 32), s: signature.s, recoveryID: 0)
        }
        #expect(throws: RainError.invalidArgument) {
            try Secp256k1Recovery.recoverAddress(digest: digest, r: signature.r, s: signature.s, recoveryID: 4)
        }
        #expect(throws: RainError.invalidArgument) {
            try Secp256k1Recovery.recoverAddress(digest: [1, 2, 3], r: signature.r, s: signature.s, recoveryID: 0)
        }
    }

    @Test("a digest that is not 32 bytes is refused", arguments: [0, 31, 33, 64])
    func refusesOtherDigestLengths(byteCount: Int) throws {
        let sealed = try Sealed(try SecureRandom.bytes(count: 16))
        let digest = [UInt8](repeating: 7, count: byteCount)
        #expect(throws: RainError.invalidArgument) {
            try WalletSigningKeys.with(sealedEntropy: sealed.combined, key: sealed.key, associatedData: sealed.associatedData) {
                (keys) throws(RainError) in try keys.signEthereumDigest(digest)
            }
        }
    }

    /// The error of opening `combined` with `key` and `associatedData`; fails the test when it opens.
    func openingError(_ combined: [UInt8], key: SymmetricKey, associatedData: [UInt8]) -> RainError? {
        do throws(RainError) {
            try WalletSigningKeys.with(sealedEntropy: combined, key: key, associatedData: associatedData) {
                (_) throws(RainError) in ()
            }
            Issue.record("the sealed entropy opened")
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "a flipped bit anywhere in the sealed entropy, the wrong associated data or the wrong key is RAIN_502 without the secrets"
    )
    func tamperingIsRefusedWithoutSecrets() throws {
        let entropy = try SecureRandom.bytes(count: 16)
        let sealed = try Sealed(entropy)
        let wallet = try WalletKeys.derive(entropy: entropy)
        var scanner = SecretScanner()
        scanner.addKey(entropy, label: "entropy")
        scanner.addPhrase(wallet.mnemonic)
        scanner.addKey(try hexBytes(String(wallet.ethereumPrivateKeyHex.dropFirst(2))), label: "ethereum key")
        scanner.addKey(Array(try #require(Base58.decode(wallet.solanaKeypairBase58)).prefix(32)), label: "solana key")

        var errors: [RainError] = []
        // Nonce, ciphertext and tag: one bit of each byte, the bit moving along.
        for index in sealed.combined.indices {
            var flipped = sealed.combined
            flipped[index] ^= 1 << UInt8(index % 8)
            errors.append(
                contentsOf: [openingError(flipped, key: sealed.key, associatedData: sealed.associatedData)].compactMap { $0 })
        }
        var otherData = sealed.associatedData
        otherData[otherData.count - 1] ^= 1
        errors.append(contentsOf: [openingError(sealed.combined, key: sealed.key, associatedData: otherData)].compactMap { $0 })
        errors.append(contentsOf: [openingError(sealed.combined, key: sealed.key, associatedData: [])].compactMap { $0 })
        errors.append(
            contentsOf: [openingError(sealed.combined, key: try SymmetricKey.random(), associatedData: sealed.associatedData)]
                .compactMap { $0 })
        // Cut short, and too short to hold a nonce and a tag.
        errors.append(
            contentsOf: [openingError(Array(sealed.combined.dropLast()), key: sealed.key, associatedData: sealed.associatedData)]
                .compactMap { $0 })
        errors.append(
            contentsOf: [openingError(Array(sealed.combined.prefix(27)), key: sealed.key, associatedData: sealed.associatedData)]
                .compactMap { $0 })

        #expect(errors.count == sealed.combined.count + 5)
        for error in errors {
            #expect(error.code == .internalError)
            #expect(error.details.reason == "authentication_failed")
        }
        let texts = errors.flatMap { error in
            ["\(error)", String(reflecting: error), error.message, error.underlying.map { "\($0)" } ?? ""]
        }
        #expect(scanner.findings(in: texts) == [])
    }

    @Test("sealed plaintext that is not BIP-39 entropy is refused", arguments: [0, 15, 17, 33, 64])
    func refusesPlaintextOfOtherLengths(byteCount: Int) throws {
        let sealed = try Sealed(try SecureRandom.bytes(count: byteCount))
        let error = openingError(sealed.combined, key: sealed.key, associatedData: sealed.associatedData)
        #expect(error?.code == .internalError)
    }

    @Test("a key of the wrong length is RAIN_102")
    func refusesKeyOfWrongLength() throws {
        let sealed = try Sealed(try SecureRandom.bytes(count: 16))
        let error = openingError(
            sealed.combined, key: try SymmetricKey.random(byteCount: 16), associatedData: sealed.associatedData)
        #expect(error?.code == .invalidArgument)
    }

    @Test("inside the closure the arena is locked and holds the two keys and nothing else; after it, the arena is unmapped")
    func arenaHoldsOnlyTheKeysAndIsUnmappedAfter() throws {
        let entropy = try SecureRandom.bytes(count: 16)
        let sealed = try Sealed(entropy)
        let wallet = try WalletKeys.derive(entropy: entropy)
        let ethereumKey = try hexBytes(String(wallet.ethereumPrivateKeyHex.dropFirst(2)))
        let solanaKey = Array(try #require(Base58.decode(wallet.solanaKeypairBase58)).prefix(32))

        var arena: [UInt8] = []
        var mapping: MemoryMapping?
        let isGone = try MemoryMapping.isUnmappedAfterRelease {
            try WalletSigningKeys.with(
                sealedEntropy: sealed.combined, key: sealed.key, associatedData: sealed.associatedData
            ) { (keys) throws(RainError) in
                mapping = MemoryMapping.containing(keys.arenaBaseAddress)
                arena = try keys.withArenaBytes { Array($0) }
                return keys.arenaBaseAddress
            }
        }
        #expect(isGone)

        let locked = try #require(mapping)
        #expect(locked.lockedKilobytes > 0)
        #expect(locked.flags.isSuperset(of: ["lo", "dd", "wf"]))

        // The two keys, and zeros everywhere else: the entropy, the sentence, the seed and every
        // intermediate key and chain code are already gone.
        let ethereumAt = try #require(firstRange(of: ethereumKey, in: arena))
        let solanaAt = try #require(firstRange(of: solanaKey, in: arena))
        var rest = arena
        for range in [ethereumAt, solanaAt] { rest.replaceSubrange(range, with: [UInt8](repeating: 0, count: range.count)) }
        #expect(rest.allSatisfy { $0 == 0 })
        #expect(firstRange(of: entropy, in: arena) == nil)
        #expect(firstRange(of: try BIP39.seed(fromMnemonic: wallet.mnemonic), in: arena) == nil)
    }

    func firstRange(of needle: [UInt8], in haystack: [UInt8]) -> Range<Int>? {
        guard !needle.isEmpty, needle.count <= haystack.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return start..<(start + needle.count)
        }
        return nil
    }
}
