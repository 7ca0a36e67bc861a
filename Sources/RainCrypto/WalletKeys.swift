import RainCore

/// Everything derived from a wallet's entropy: the BIP-39 recovery phrase, one Ethereum
/// account at `m/44'/60'/0'/0/0` (BIP-32 on secp256k1, EIP-55 address) and one Solana account at
/// `m/44'/501'/0'/0'` (SLIP-10 Ed25519, base-58 address), both from the phrase's seed without a
/// passphrase, as common wallets (MetaMask, Phantom) derive them.
///
/// The mnemonic and both private keys are secret: never log them. The description shows only
/// the addresses.
public struct WalletKeys: Sendable {
    /// The BIP-32 path of the Ethereum account.
    public static let ethereumPath = "m/44'/60'/0'/0/0"
    /// The SLIP-10 path of the Solana account.
    public static let solanaPath = "m/44'/501'/0'/0'"

    /// The recovery phrase: 12 words for 16 bytes of entropy. Secret.
    public let mnemonic: [String]
    /// The Ethereum address, `0x` and 40 hex digits in EIP-55 case.
    public let ethereumAddress: String
    /// The Solana address, the Ed25519 public key in base 58.
    public let solanaAddress: String
    /// The Ethereum private key: `0x` and 64 lowercase hex digits. Secret.
    public let ethereumPrivateKeyHex: String
    /// The Solana keypair as Solana tools export it: base 58 of the 32-byte private key (RFC 8032
    /// seed) followed by the 32-byte public key. Secret.
    public let solanaKeypairBase58: String

    /// Derives the phrase, both accounts and their keys from a wallet's entropy.
    /// - Parameter entropy: 16 bytes (12 words) from a CSPRNG; 20, 24, 28 or 32 bytes also work.
    /// - Returns: the keys.
    /// - Throws: RAIN_102 (field `entropy`) for another length; RAIN_502 when OpenSSL fails (or,
    ///   with probability below 2^-127, when BIP-32 gives an invalid key).
    public static func derive(entropy: [UInt8]) throws(RainError) -> WalletKeys {
        let mnemonic = try BIP39.mnemonic(fromEntropy: entropy)
        let seed = try BIP39.seedKey(fromMnemonic: mnemonic, passphrase: "")

        let ethereumKey = try seed.withSecretBytes { (bytes) throws(RainError) in
            try BIP32ExtendedKey.master(seed: bytes).derive(path: ethereumPath)
        }
        let ethereumAddress = try EthereumAddress.fromPublicKey(uncompressed: try ethereumKey.uncompressedPublicKey)
        var ethereumPrivateKey = ethereumKey.privateKey
        defer { SecureMemory.cleanse(&ethereumPrivateKey) }

        let solana = try seed.withSecretBytes { (bytes) throws(RainError) in
            try SLIP10Ed25519.deriveKeys(seed: bytes, path: solanaPath)
        }
        var solanaSeed = solana.privateKey.withUnsafeBytes { Array($0) }
        defer { SecureMemory.cleanse(&solanaSeed) }
        let solanaPublicKey = try Ed25519PrivateKey(rawRepresentation: solanaSeed).publicKey.rawRepresentation
        var keypair = solanaSeed + solanaPublicKey
        defer { SecureMemory.cleanse(&keypair) }

        return WalletKeys(
            mnemonic: mnemonic, ethereumAddress: ethereumAddress,
            solanaAddress: try SolanaAddress.fromPublicKey(solanaPublicKey),
            ethereumPrivateKeyHex: "0x" + Hex.encode(ethereumPrivateKey),
            solanaKeypairBase58: Base58.encode(keypair))
    }
}

extension WalletKeys: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The addresses only: `WalletKeys(ethereum: 0x…, solana: …, mnemonic and keys <redacted>)`.
    public var description: String {
        "WalletKeys(ethereum: \(ethereumAddress), solana: \(solanaAddress), mnemonic and keys <redacted>)"
    }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// Shows the addresses only, so `dump` does not print the secrets either.
    public var customMirror: Mirror {
        Mirror(
            self, children: ["ethereumAddress": ethereumAddress, "solanaAddress": solanaAddress],
            displayStyle: .struct)
    }
}
