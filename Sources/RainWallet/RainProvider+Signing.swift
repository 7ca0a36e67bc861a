import FoundationEssentials
import RainCore
internal import RainWire

/// Where a signature is for.
public enum SigningChain: Sendable, Equatable {
    /// An EVM chain, by its EIP-155 chain id (1 Ethereum, 10 OP Mainnet, 137 Polygon, 8453 Base,
    /// 42161 Arbitrum One, 11155111 Sepolia, 84532 Base Sepolia).
    case evm(chainID: UInt64)
    /// An EVM `personal_sign` message, which names no chain.
    case anyEVM
    /// Solana. A transaction does not name its cluster: the one given here ("mainnet-beta",
    /// "devnet") is shown on the prompt as claimed by the app.
    case solana(cluster: String? = nil)
}

/// A signature of a message or of typed data.
public struct WalletSignature: Sendable, Equatable {
    /// The address that signed: EIP-55 hex, or Solana base58.
    public var address: String
    /// EVM: 65 bytes r || s || v (v 27 or 28), what `personal_sign` and `eth_signTypedData_v4`
    /// return. Solana: 64 bytes of Ed25519 over the off-chain message envelope.
    public var signature: Data
    /// SHA-256 of the exact bytes signed: the value the user saw on the prompt's last page.
    public var signedBytesSHA256: Data

    /// EVM: `0x` and the signature's 130 hex digits, as `personal_sign` returns it.
    public var signatureHex: String { "0x" + Hex.encode(Array(signature)) }
}

/// A signed transaction, ready for the app to send (nothing is broadcast here).
public struct SignedTransaction: Sendable, Equatable {
    /// The address that signed.
    public var address: String
    /// EVM: 65 bytes r || s || v (v 27 or 28; the transaction carries its own v). Solana: 64 bytes.
    public var signature: Data
    /// EVM: the signed raw transaction (`eth_sendRawTransaction`'s parameter). Solana: the signed
    /// serialized transaction (`sendTransaction`'s, once base64-encoded).
    public var rawTransaction: Data
    /// EVM: Keccak-256 of the raw transaction, its hash on chain. Solana: the first signature, the
    /// transaction id, when the wallet pays the fee; empty otherwise.
    public var transactionHash: Data
    /// SHA-256 of the exact bytes signed: the value the user saw on the prompt's last page.
    public var signedBytesSHA256: Data
}

/// Signatures by the wallet, each confirmed by the user on the daemon's prompt, which shows what
/// is signed decoded from the bytes themselves. The key never leaves the authority. Sends: never
/// retried; pass an `idempotencyKey` (16 to 64 random bytes, the same for every try of one
/// signature) to ask again safely after a lost answer (RAIN_501 `outcome_unknown`).
extension RainProvider {
    /// Signs a message: EVM `personal_sign` (EIP-191 version 0x45) for `.anyEVM` or `.evm`, a
    /// Solana off-chain message for `.solana` (text only; bytes that parse as a transaction are
    /// refused).
    /// - Returns: the signature.
    /// - Throws: RAIN_201 without a live session; RAIN_401 when the user refuses; RAIN_102 for
    ///   malformed input (`field`) or a message the prompt cannot show in 8 pages
    ///   (`prompt_too_long`); RAIN_104 for a chain not supported; RAIN_501 `outcome_unknown`.
    /// - Parameters:
    ///   - message: the bytes to sign.
    ///   - chain: `.anyEVM` (or `.evm`) for `personal_sign`, `.solana` for an off-chain message.
    ///   - from: the address the app expects to sign with; another wallet's is RAIN_102
    ///     `from_mismatch`. Nil: not checked.
    ///   - idempotencyKey: 16 to 64 random bytes, the same for each try of this signature.
    nonisolated(nonsending) public func signMessage(
        _ message: Data, on chain: SigningChain = .anyEVM, from: String? = nil, idempotencyKey: Data? = nil
    ) async throws -> WalletSignature {
        let response = try await sign(Method.walletSignMessage, Array(message), chain, from, idempotencyKey)
        return WalletSignature(response)
    }

    /// Signs a text message (its UTF-8 bytes); see `signMessage(_:on:from:idempotencyKey:)`.
    nonisolated(nonsending) public func signMessage(
        _ text: String, on chain: SigningChain = .anyEVM, from: String? = nil, idempotencyKey: Data? = nil
    ) async throws -> WalletSignature {
        try await signMessage(Data(text.utf8), on: chain, from: from, idempotencyKey: idempotencyKey)
    }

    /// Signs EIP-712 typed data given as `eth_signTypedData_v4` JSON. The domain's `chainId`
    /// names the chain (it must be supported); numbers keep their exact text.
    /// - Returns: the signature (65 bytes r || s || v).
    /// - Throws: as `signMessage`; RAIN_406 for a value outside its type's range; RAIN_102 for
    ///   duplicate keys, fields not declared in `types`, more than 64 KiB or depth 8.
    nonisolated(nonsending) public func signTypedData(_ json: String, from: String? = nil, idempotencyKey: Data? = nil)
        async throws -> WalletSignature
    {
        let response = try await sign(Method.walletSignTypedData, Array(json.utf8), .anyEVM, from, idempotencyKey)
        return WalletSignature(response)
    }

    /// Signs a transaction: for `.evm(chainID:)`, the unsigned EIP-1559 (type 2), EIP-2930
    /// (type 1) or EIP-155 legacy transaction's bytes (`0x02 || rlp(...)`); for `.solana`, the
    /// legacy or v0 message's bytes (without signatures).
    /// - Returns: the signed transaction and its hash; nothing is broadcast.
    /// - Throws: as `signMessage`; RAIN_406 for an amount out of range; RAIN_102 for a blob (type 3)
    ///   or delegation (type 4) transaction, or a legacy one without EIP-155.
    nonisolated(nonsending) public func signTransaction(
        _ unsigned: Data, on chain: SigningChain, from: String? = nil, idempotencyKey: Data? = nil
    ) async throws -> SignedTransaction {
        let response = try await sign(Method.walletSignTransaction, Array(unsigned), chain, from, idempotencyKey)
        return SignedTransaction(
            address: response.address, signature: Data(response.signature),
            rawTransaction: Data(response.signedTransaction), transactionHash: Data(response.transactionHash),
            signedBytesSHA256: Data(response.signedBytesSha256))
    }

    nonisolated(nonsending) private func sign(
        _ method: String, _ payload: [UInt8], _ chain: SigningChain, _ from: String?, _ idempotencyKey: Data?
    ) async throws -> SignResponse {
        var request = SignRequest(payload: payload, from: from ?? "", idempotencyKey: idempotencyKey.map(Array.init) ?? [])
        switch chain {
        case .evm(let id): (request.chain, request.chainID) = (.ethereum, id)
        case .anyEVM: request.chain = .ethereum
        case .solana(let cluster): (request.chain, request.cluster) = (.solana, cluster ?? "")
        }
        return try await call(method, request, as: SignResponse.self)
    }
}

extension WalletSignature {
    init(_ response: SignResponse) {
        self.init(
            address: response.address, signature: Data(response.signature),
            signedBytesSHA256: Data(response.signedBytesSha256))
    }
}
