import RainCore

/// An EVM chain the wallet signs for.
public struct SupportedChain: Sendable, Equatable {
    /// The EIP-155 chain id.
    public var id: UInt64
    /// Its name as the prompt shows it.
    public var name: String
    /// The native currency's symbol.
    public var nativeSymbol: String
    /// The native currency's decimals (18 on every supported chain).
    public var nativeDecimals: Int
    /// A test network (its coins have no value).
    public var isTestnet: Bool
}

/// A token whose contract (EVM) or mint (Solana) the issuer publishes: the prompt names it with
/// its symbol and decimals. Any other token's name and symbol are shown as claimed by the app.
public struct KnownToken: Sendable, Equatable {
    /// The EVM chain id, or nil for Solana.
    public var chainID: UInt64?
    /// The contract address in lowercase hex without 0x (EVM), or the mint in base58 (Solana).
    public var address: String
    /// The symbol as the prompt shows it.
    public var symbol: String
    /// The token's decimals.
    public var decimals: Int
    /// Who publishes the address.
    public var issuer: String
    /// A bridged version (USDC.e): shown with "bridged" beside its symbol.
    public var isBridged: Bool
    /// A test network's token.
    public var isTestnet: Bool

    /// What the prompt shows for the token: "USDC", "USDC.e (bridged)", "USDC (Sepolia test token)".
    public var label: String {
        var text = symbol
        if isBridged { text += " (bridged)" }
        if isTestnet { text += " (test token)" }
        return text
    }
}

/// The chains the wallet signs for and the tokens it knows: the one table the prompt, the checks
/// and the docs (docs/signing.md) follow.
public enum SupportedChains {
    /// Every EVM chain, by id.
    public static let evm: [SupportedChain] = [
        SupportedChain(id: 1, name: "Ethereum", nativeSymbol: "ETH", nativeDecimals: 18, isTestnet: false),
        SupportedChain(id: 10, name: "OP Mainnet", nativeSymbol: "ETH", nativeDecimals: 18, isTestnet: false),
        SupportedChain(id: 137, name: "Polygon", nativeSymbol: "POL", nativeDecimals: 18, isTestnet: false),
        SupportedChain(id: 8453, name: "Base", nativeSymbol: "ETH", nativeDecimals: 18, isTestnet: false),
        SupportedChain(id: 42161, name: "Arbitrum One", nativeSymbol: "ETH", nativeDecimals: 18, isTestnet: false),
        SupportedChain(id: 11_155_111, name: "Sepolia", nativeSymbol: "ETH", nativeDecimals: 18, isTestnet: true),
        SupportedChain(id: 84532, name: "Base Sepolia", nativeSymbol: "ETH", nativeDecimals: 18, isTestnet: true),
    ]

    /// The supported EVM chain with this id.
    /// - Parameter field: the request field that named it, for the error.
    /// - Throws: RAIN_104 (`field`, reason `chain_not_supported`) naming the supported ids.
    public static func evm(id: UInt64, field: String = "chainId") throws(RainError) -> SupportedChain {
        if let chain = evm.first(where: { $0.id == id }) { return chain }
        let known = evm.map { "\($0.id) \($0.name)" }.joined(separator: ", ")
        throw RainError(
            .chainNotSupported, "chain id \(id) is not supported; the wallet signs for \(known) and Solana",
            details: RainError.Details(reason: "chain_not_supported", field: field))
    }

    /// "Base (8453)".
    public static func label(_ chain: SupportedChain) -> String { "\(chain.name) (\(chain.id))" }

    /// Tokens from the issuers' own pages: Circle's USDC contract addresses
    /// (developers.circle.com/stablecoins/usdc-contract-addresses; Polygon's bridged USDC.e from
    /// Circle's "Native USDC on Polygon PoS"), Tether's USDT (tether.to, supported protocols).
    public static let tokens: [KnownToken] = [
        usdc(1, "a0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"),
        usdc(10, "0b2c639c533813f4aa9d7837caf62653d097ff85"),
        usdc(137, "3c499c542cef5e3811e1192ce70d8cc03d5c3359"),
        KnownToken(
            chainID: 137, address: "2791bca1f2de4661ed88a30c99a7a9449aa84174", symbol: "USDC.e", decimals: 6,
            issuer: "Circle", isBridged: true, isTestnet: false),
        usdc(8453, "833589fcd6edb6e08f4c7c32d4f71b54bda02913"),
        usdc(42161, "af88d065e77c8cc2239327c5edb3a432268e5831"),
        usdc(11_155_111, "1c7d4b196cb0c7b01d743fbc6116a902379c7238", isTestnet: true),
        usdc(84532, "036cbd53842c5426634e7929541ec2318f3dcf7e", isTestnet: true),
        KnownToken(
            chainID: nil, address: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", symbol: "USDC", decimals: 6,
            issuer: "Circle", isBridged: false, isTestnet: false),
        KnownToken(
            chainID: nil, address: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU", symbol: "USDC", decimals: 6,
            issuer: "Circle", isBridged: false, isTestnet: true),
        KnownToken(
            chainID: 1, address: "dac17f958d2ee523a2206206994597c13d831ec7", symbol: "USDT", decimals: 6,
            issuer: "Tether", isBridged: false, isTestnet: false),
        KnownToken(
            chainID: nil, address: "Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB", symbol: "USDT", decimals: 6,
            issuer: "Tether", isBridged: false, isTestnet: false),
    ]

    private static func usdc(_ chainID: UInt64, _ address: String, isTestnet: Bool = false) -> KnownToken {
        KnownToken(
            chainID: chainID, address: address, symbol: "USDC", decimals: 6, issuer: "Circle", isBridged: false,
            isTestnet: isTestnet)
    }

    /// The known ERC-20 token at `contract` (20 bytes) on chain `chainID`, if any.
    public static func token(chainID: UInt64, contract: [UInt8]) -> KnownToken? {
        let hex = contract.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
        return tokens.first { $0.chainID == chainID && $0.address == hex }
    }

    /// The known SPL token with this mint (base58), if any.
    public static func solanaToken(mint: String) -> KnownToken? {
        tokens.first { $0.chainID == nil && $0.address == mint }
    }
}
