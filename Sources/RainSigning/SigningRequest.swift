import RainCore
import RainCrypto

/// What an app asks the wallet to sign, as the device protocol carries it.
public struct SigningRequest: Sendable, Equatable {
    /// Which of the three calls.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// EVM `personal_sign` (EIP-191 version 0x45), or a Solana off-chain message.
        case message
        /// EIP-712 typed data (`eth_signTypedData_v4` JSON); EVM only.
        case typedData = "typed_data"
        /// An EVM transaction (type 2, type 1, legacy with EIP-155) or a Solana message (legacy, v0).
        case transaction
    }

    /// The call.
    public var kind: Kind
    /// The wallet's chain family: `.ethereum` for every EVM chain, `.solana`.
    public var chain: RainChain
    /// EVM: the chain id the app names (0: none named; typed data and transactions name their own,
    /// which must then equal it). Unused for Solana.
    public var chainID: UInt64
    /// Solana: the cluster the app claims ("mainnet-beta", "devnet"); a transaction does not name
    /// it, so it is shown as claimed by the app. Empty: not claimed.
    public var claimedCluster: String
    /// The bytes: the message; the typed data's JSON text (UTF-8); the unsigned EVM transaction
    /// (`0x02 || rlp(...)`, `0x01 || rlp(...)`, or legacy `rlp([..., chainId, 0, 0])`); the Solana
    /// message (legacy or v0, without signatures).
    public var payload: [UInt8]
    /// The address the app expects to sign with (EIP-55 hex or base58); empty: not checked.
    public var from: String

    /// The chain a request names.
    /// - Throws: RAIN_102 (`field: "chain"`) when it names none.
    public static func named(_ chain: RainChain?) throws(RainError) -> RainChain {
        guard let chain else {
            throw RainError.invalid("name the chain: ethereum (any EVM chain) or solana", field: "chain")
        }
        return chain
    }

    /// A request.
    public init(
        kind: Kind, chain: RainChain, chainID: UInt64 = 0, claimedCluster: String = "", payload: [UInt8],
        from: String = ""
    ) {
        self.kind = kind
        self.chain = chain
        self.chainID = chainID
        self.claimedCluster = claimedCluster
        self.payload = payload
        self.from = from
    }
}

/// The wallet's public side, which a request is checked against (its `from`, a Solana message's
/// signers).
public struct SigningWallet: Sendable, Equatable {
    /// The Ethereum address's 20 bytes.
    public var ethereumAddress: [UInt8]
    /// The Solana public key's 32 bytes.
    public var solanaPublicKey: [UInt8]

    /// The wallet.
    public init(ethereumAddress: [UInt8], solanaPublicKey: [UInt8]) {
        self.ethereumAddress = ethereumAddress
        self.solanaPublicKey = solanaPublicKey
    }

    /// The wallet from its addresses as they are shown and stored: `0x` and 40 hex digits, and
    /// the base58 public key.
    /// - Throws: RAIN_502 when either does not decode (a wallet record or an answer is damaged).
    public init(ethereumAddress: String, solanaAddress: String) throws(RainError) {
        guard ethereumAddress.hasPrefix("0x"), let ethereum = Hex.decode(String(ethereumAddress.dropFirst(2))),
            ethereum.count == 20, let solana = Base58.decode(solanaAddress), solana.count == 32
        else {
            throw RainError(.internalError, "the wallet's addresses do not decode")
        }
        self.init(ethereumAddress: ethereum, solanaPublicKey: solana)
    }
}

/// A secp256k1 signature with its recovery id, as libsecp256k1 gives it (low-s).
public struct RecoverableSignature: Sendable, Equatable {
    /// r, 32 bytes big endian.
    public var r: [UInt8]
    /// s, 32 bytes big endian, at most n/2.
    public var s: [UInt8]
    /// 0 or 1.
    public var recoveryID: UInt8

    /// A signature.
    public init(r: [UInt8], s: [UInt8], recoveryID: UInt8) {
        self.r = r
        self.s = s
        self.recoveryID = recoveryID
    }
}

/// What the key must sign for a request.
public enum SigningInput: Sendable, Equatable {
    /// An EVM request: the 32-byte Keccak-256 digest, signed with secp256k1 (recoverable ECDSA).
    case secp256k1Digest([UInt8])
    /// A Solana request: these bytes (the message, or the off-chain envelope), signed with Ed25519.
    case ed25519Message([UInt8])
}

/// What the app gets back.
public struct SigningResult: Sendable, Equatable {
    /// EVM messages and typed data: 65 bytes r || s || v (v 27 or 28). EVM transactions: the same
    /// 65 bytes with v as recovery id + 27 (the transaction carries its own v). Solana: 64 bytes.
    public var signature: [UInt8]
    /// Transactions: the signed raw transaction (EVM) or the signed serialized transaction
    /// (Solana: signature count, signatures, message). Empty otherwise.
    public var signedTransaction: [UInt8]
    /// Transactions: EVM Keccak-256 of the signed raw transaction; Solana, the first signature
    /// (the transaction id). Empty otherwise.
    public var transactionHash: [UInt8]

    /// A result.
    public init(signature: [UInt8], signedTransaction: [UInt8] = [], transactionHash: [UInt8] = []) {
        self.signature = signature
        self.signedTransaction = signedTransaction
        self.transactionHash = transactionHash
    }
}

/// A request decoded, checked and ready: what the user reads, what the key signs, and how the
/// signature becomes the answer.
public struct PreparedSigning: Sendable {
    /// What the prompt shows, decoded from the bytes that are signed.
    public var summary: SigningSummary
    /// The exact bytes signed, before any hash the scheme applies (the EIP-191 or EIP-712
    /// preimage, the unsigned transaction, the Solana message): the prompt shows their SHA-256.
    public var signedBytes: [UInt8]
    /// What the key signs.
    public var input: SigningInput
    /// Turns the key's signature into the answer (EVM: the recoverable signature; Solana: the 64
    /// Ed25519 bytes in `RecoverableSignature.r` + `.s`, recovery id unused).
    public var finish: @Sendable (RecoverableSignature) throws(RainError) -> SigningResult

    /// A prepared request.
    public init(
        summary: SigningSummary, signedBytes: [UInt8], input: SigningInput,
        finish: @escaping @Sendable (RecoverableSignature) throws(RainError) -> SigningResult
    ) {
        self.summary = summary
        self.signedBytes = signedBytes
        self.input = input
        self.finish = finish
    }

    /// SHA-256 of `signedBytes`, the value the prompt's last page shows.
    public var signedBytesHash: [UInt8] { SHA256.hash(signedBytes) }
}
