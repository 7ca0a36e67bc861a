/// A chain a RainWallet wallet holds an account on.
public enum RainChain: String, Sendable, Equatable, CaseIterable {
    /// Ethereum: the account at m/44'/60'/0'/0/0 (BIP-32 over secp256k1, EIP-55 address).
    case ethereum
    /// Solana: the account at m/44'/501'/0'/0' (SLIP-10 Ed25519, base58 address).
    case solana
}
