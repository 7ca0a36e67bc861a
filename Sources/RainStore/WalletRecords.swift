import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

/// A wallet's key material as stored: the BIP-39 entropy encrypted with the wallet-encryption key
/// (AES-256-GCM, `nonce ‖ ciphertext ‖ tag`, bound to the wallet id), the id of the master key it
/// was encrypted under, and the addresses derived from it (in the clear, for reads).
package struct WalletKeyMaterial: Sendable, Equatable {
    /// `nonce ‖ ciphertext ‖ tag` of the entropy.
    package var entropyCiphertext: [UInt8]
    /// The id of the master key whose wallet-encryption key sealed the entropy.
    package var entropyKeyID: String
    /// The EIP-55 address of m/44'/60'/0'/0/0.
    package var ethereumAddress: String?
    /// The base58 address of m/44'/501'/0'/0'.
    package var solanaAddress: String?

    /// Creates the material.
    package init(entropyCiphertext: [UInt8], entropyKeyID: String, ethereumAddress: String?, solanaAddress: String?) {
        self.entropyCiphertext = entropyCiphertext
        self.entropyKeyID = entropyKeyID
        self.ethereumAddress = ethereumAddress
        self.solanaAddress = solanaAddress
    }
}

/// A stored wallet.
package struct WalletRecord: Sendable, Equatable {
    /// `wal_…`
    package var id: String
    /// The account (`acct_…`) it belongs to.
    package var accountID: String
    /// When it was created.
    package var createdAt: Date
    /// The encrypted entropy; nil for a wallet created before wallets had keys.
    package var entropyCiphertext: [UInt8]?
    /// The id of the master key the entropy is encrypted under.
    package var entropyKeyID: String?
    /// The EIP-55 Ethereum address, once derived.
    package var ethereumAddress: String?
    /// The base58 Solana address, once derived.
    package var solanaAddress: String?

    /// Whether it has its entropy and both addresses.
    package var hasAllKeys: Bool {
        entropyCiphertext != nil && entropyKeyID != nil && ethereumAddress != nil && solanaAddress != nil
    }
}
