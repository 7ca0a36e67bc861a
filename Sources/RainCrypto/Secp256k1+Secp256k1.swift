internal import CSecp256k1
import RainCore

/// The secp256k1 operations of the wallet's signing keys, through libsecp256k1 (constant-time,
/// RFC 6979 nonces, low-s signatures): each takes the private key as a buffer, so the key can
/// stay in locked memory.
extension Secp256k1 {
    /// A recoverable ECDSA signature, as Ethereum transactions carry it.
    struct RecoverableSignature: Sendable, Equatable {
        /// r, 32 big-endian bytes.
        var r: [UInt8]
        /// s, 32 big-endian bytes, at most n/2.
        var s: [UInt8]
        /// Which of the candidate public keys signed: 0 to 3 (0 or 1 in practice).
        var recoveryID: UInt8
    }

    /// Whether `key` is a valid private key, 0 < k < n (`secp256k1_ec_seckey_verify`).
    /// - Throws: RAIN_502 when the context cannot be made.
    static func isValidSecretKey(_ key: UnsafeRawBufferPointer) throws(RainError) -> Bool {
        guard key.count == scalarByteCount, let base = key.baseAddress else { return false }
        let context = try Secp256k1Context.shared
        return secp256k1_ec_seckey_verify(context.pointer, base.assumingMemoryBound(to: UInt8.self)) == 1
    }

    /// BIP-32's private child key in place: `key = (key + tweak) mod n`
    /// (`secp256k1_ec_seckey_tweak_add`).
    /// - Parameters:
    ///   - tweak: IL, the first half of the child's HMAC-SHA512.
    ///   - key: the parent private key, replaced by the child's.
    /// - Throws: ``invalidDerivedKey`` (RAIN_502) when IL ≥ n or the sum is zero; RAIN_502 when the
    ///   sizes are wrong or the context cannot be made.
    static func addTweak(_ tweak: UnsafeRawBufferPointer, toKeyInPlace key: UnsafeMutableRawBufferPointer) throws(RainError) {
        guard tweak.count == scalarByteCount, key.count == scalarByteCount, let tweakBase = tweak.baseAddress,
            let keyBase = key.baseAddress
        else {
            throw RainError(.internalError, "secp256k1 scalars are 32 bytes")
        }
        guard try isValidSecretKey(tweak) else { throw invalidDerivedKey }
        let context = try Secp256k1Context.shared
        let added = secp256k1_ec_seckey_tweak_add(
            context.pointer, keyBase.assumingMemoryBound(to: UInt8.self), tweakBase.assumingMemoryBound(to: UInt8.self))
        guard added == 1 else { throw invalidDerivedKey }
    }

    /// Writes the public key k·G of `privateKey` into `output` (`secp256k1_ec_pubkey_create`,
    /// `secp256k1_ec_pubkey_serialize`).
    /// - Parameters:
    ///   - privateKey: 32 bytes, 0 < k < n.
    ///   - compressed: 33 bytes (`02`/`03` ‖ x) when true, 65 bytes (`04` ‖ x ‖ y) when false.
    ///   - output: exactly 33 or 65 bytes.
    /// - Throws: RAIN_102 (field `privateKey`) when the key is not valid; RAIN_502 when `output` has
    ///   the wrong size or the context cannot be made.
    static func writePublicKey(
        privateKey: UnsafeRawBufferPointer, compressed: Bool, into output: UnsafeMutableRawBufferPointer
    ) throws(RainError) {
        let expected = compressed ? compressedPublicKeyByteCount : uncompressedPublicKeyByteCount
        guard output.count == expected, let outputBase = output.baseAddress else {
            throw RainError(.internalError, "a secp256k1 public key needs \(expected) bytes of output")
        }
        guard privateKey.count == scalarByteCount, let keyBase = privateKey.baseAddress else {
            throw RainError.invalid("a secp256k1 private key is 32 bytes", field: "privateKey")
        }
        let context = try Secp256k1Context.shared
        var publicKey = secp256k1_pubkey()
        guard secp256k1_ec_pubkey_create(context.pointer, &publicKey, keyBase.assumingMemoryBound(to: UInt8.self)) == 1
        else {
            throw RainError.invalid("not a secp256k1 private key", field: "privateKey")
        }
        var length = expected
        let flags = UInt32(compressed ? SECP256K1_EC_COMPRESSED : SECP256K1_EC_UNCOMPRESSED)
        let serialized = secp256k1_ec_pubkey_serialize(
            context.pointer, outputBase.assumingMemoryBound(to: UInt8.self), &length, &publicKey, flags)
        guard serialized == 1, length == expected else {
            throw RainError(.internalError, "secp256k1_ec_pubkey_serialize failed")
        }
    }

    /// The 65-byte uncompressed public key (`04` ‖ x ‖ y) of `privateKey`, as Ethereum addresses need.
    /// - Throws: as ``writePublicKey(privateKey:compressed:into:)``.
    static func uncompressedPublicKey(privateKey: UnsafeRawBufferPointer) throws(RainError) -> [UInt8] {
        var encoded = [UInt8](repeating: 0, count: uncompressedPublicKeyByteCount)
        let result = encoded.withUnsafeMutableBytes { output in
            Result { () throws(RainError) in try writePublicKey(privateKey: privateKey, compressed: false, into: output) }
        }
        try result.get()
        return encoded
    }

    /// Signs a 32-byte digest with a recoverable ECDSA signature (`secp256k1_ecdsa_sign_recoverable`
    /// with the default nonce function, RFC 6979, and no extra data; then
    /// `secp256k1_ecdsa_recoverable_signature_serialize_compact`). The same key and digest always
    /// give the same signature, and s is always at most n/2 (low-s, EIP-2).
    /// - Parameters:
    ///   - digest: the 32-byte message hash (for Ethereum, Keccak-256 of what is signed).
    ///   - privateKey: 32 bytes, 0 < k < n; read in place.
    /// - Returns: r, s and the recovery id.
    /// - Throws: RAIN_102 (field `digest`) when the digest is not 32 bytes, (field `privateKey`) when
    ///   the key is not a valid secp256k1 key; RAIN_502 when the context cannot be made.
    static func signRecoverable(
        digest: [UInt8], privateKey: UnsafeRawBufferPointer
    ) throws(RainError) -> RecoverableSignature {
        guard digest.count == 32 else {
            throw RainError.invalid("an Ethereum signature signs a 32-byte digest", field: "digest")
        }
        guard privateKey.count == scalarByteCount, let keyBase = privateKey.baseAddress else {
            throw RainError.invalid("a secp256k1 private key is 32 bytes", field: "privateKey")
        }
        let context = try Secp256k1Context.shared
        var signature = secp256k1_ecdsa_recoverable_signature()
        let signed = digest.withUnsafeBufferPointer { message -> Int32 in
            guard let messageBase = message.baseAddress else { return 0 }
            // A nil nonce function is the default, RFC 6979; nil extra data keeps it deterministic.
            return secp256k1_ecdsa_sign_recoverable(
                context.pointer, &signature, messageBase, keyBase.assumingMemoryBound(to: UInt8.self), nil, nil)
        }
        // RFC 6979 fails only for a key that is 0 or ≥ n.
        guard signed == 1 else { throw RainError.invalid("not a secp256k1 private key", field: "privateKey") }
        var compact = [UInt8](repeating: 0, count: 64)
        var recoveryID: Int32 = -1
        let serialized = compact.withUnsafeMutableBufferPointer { output -> Int32 in
            guard let outputBase = output.baseAddress else { return 0 }
            return secp256k1_ecdsa_recoverable_signature_serialize_compact(
                context.pointer, outputBase, &recoveryID, &signature)
        }
        guard serialized == 1, (0...3).contains(recoveryID) else {
            throw RainError(.internalError, "secp256k1_ecdsa_recoverable_signature_serialize_compact failed")
        }
        return RecoverableSignature(
            r: Array(compact[0..<32]), s: Array(compact[32..<64]), recoveryID: UInt8(recoveryID))
    }
}
