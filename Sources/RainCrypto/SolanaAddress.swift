import RainCore

/// Solana account addresses: the 32-byte Ed25519 public key in base 58.
public enum SolanaAddress {
    /// The address of an Ed25519 public key.
    /// - Parameter key: the 32-byte public key.
    /// - Returns: 32 to 44 base-58 characters.
    /// - Throws: RAIN_102 (field `publicKey`) when `key` is not 32 bytes.
    public static func fromPublicKey(_ key: [UInt8]) throws(RainError) -> String {
        guard key.count == Ed25519PublicKey.byteCount else {
            throw RainError.invalid("a Solana address is a 32-byte Ed25519 public key", field: "publicKey")
        }
        return Base58.encode(key)
    }
}
