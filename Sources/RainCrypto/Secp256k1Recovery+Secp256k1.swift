internal import CSecp256k1
import RainCore

/// Recovery of the signer of a recoverable secp256k1 ECDSA signature (Ethereum's `ecrecover`),
/// through libsecp256k1's `secp256k1_ecdsa_recover`: checks a signature against the address that
/// should have made it.
public enum Secp256k1Recovery {
    /// The Ethereum address of the key that made a signature.
    /// - Parameters:
    ///   - digest: the 32-byte message hash that was signed.
    ///   - r: 32 big-endian bytes.
    ///   - s: 32 big-endian bytes.
    ///   - recoveryID: 0 to 3 (Ethereum's `v` is 27 + id, or 35 + 2 × chain id + id under EIP-155).
    /// - Returns: the 20-byte address: the last 20 bytes of Keccak-256 of the recovered public key's
    ///   64 coordinate bytes. A signature of another digest gives another address, not an error.
    /// - Throws: RAIN_102 (field `digest`, `r`, `s` or `recoveryID`) for a wrong length or a
    ///   recovery id above 3; RAIN_102 (field `signature`, reason `invalid_signature`) when r or s
    ///   is 0 or not below n, or no public key gives this signature; RAIN_502 when the context
    ///   cannot be made.
    public static func recoverAddress(digest: [UInt8], r: [UInt8], s: [UInt8], recoveryID: UInt8) throws(RainError) -> [UInt8] {
        guard digest.count == 32 else { throw RainError.invalid("the digest is 32 bytes", field: "digest") }
        guard r.count == 32 else { throw RainError.invalid("r is 32 bytes", field: "r") }
        guard s.count == 32 else { throw RainError.invalid("s is 32 bytes", field: "s") }
        guard recoveryID <= 3 else { throw RainError.invalid("the recovery id is 0 to 3", field: "recoveryID") }
        let context = try Secp256k1Context.shared
        let compact = r + s
        var signature = secp256k1_ecdsa_recoverable_signature()
        let parsed = compact.withUnsafeBufferPointer { input -> Int32 in
            guard let base = input.baseAddress else { return 0 }
            return secp256k1_ecdsa_recoverable_signature_parse_compact(
                context.pointer, &signature, base, Int32(recoveryID))
        }
        var publicKey = secp256k1_pubkey()
        let recovered = digest.withUnsafeBufferPointer { message -> Int32 in
            guard parsed == 1, let base = message.baseAddress else { return 0 }
            return secp256k1_ecdsa_recover(context.pointer, &publicKey, &signature, base)
        }
        guard recovered == 1 else {
            throw RainError.invalid(
                "not a valid recoverable secp256k1 signature", field: "signature", reason: "invalid_signature")
        }
        var encoded = [UInt8](repeating: 0, count: Secp256k1.uncompressedPublicKeyByteCount)
        var length = encoded.count
        let serialized = encoded.withUnsafeMutableBufferPointer { output -> Int32 in
            guard let base = output.baseAddress else { return 0 }
            return secp256k1_ec_pubkey_serialize(
                context.pointer, base, &length, &publicKey, UInt32(SECP256K1_EC_UNCOMPRESSED))
        }
        guard serialized == 1, length == Secp256k1.uncompressedPublicKeyByteCount else {
            throw RainError(.internalError, "secp256k1_ec_pubkey_serialize failed")
        }
        return Array(Keccak256.hash(Array(encoded.dropFirst())).suffix(20))
    }
}
