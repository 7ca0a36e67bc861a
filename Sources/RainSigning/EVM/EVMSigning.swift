import RainCore
import RainCrypto

/// EVM signature requests, decoded from the exact bytes that are signed: `personal_sign`
/// messages (EIP-191), typed data (EIP-712, `eth_signTypedData_v4`) and transactions (type 2,
/// type 1, legacy with EIP-155).
///
/// Each request is checked before the user sees it: the chain must be one the wallet supports,
/// the request must name the wallet's own address if it names one, and the summary shows what
/// the signed bytes do, with warnings for approvals and calls it cannot decode. Raw-hash
/// `eth_sign` is not offered: a digest cannot be shown to anyone.
public enum EVMSigning {
    /// Decodes and checks an EVM request and says what the key signs.
    /// - Parameters:
    ///   - request: the request; `chain` must be `.ethereum`.
    ///   - wallet: the wallet's public side; its 20-byte Ethereum address is the signer.
    /// - Returns: the summary, the signed bytes (the EIP-191 or EIP-712 preimage, or the unsigned
    ///   transaction), the Keccak-256 digest to sign, and `finish`, which builds the answer from
    ///   the signature (65 bytes r || s || v with v = 27 + recovery id; for a transaction also
    ///   the signed raw transaction and its hash). `finish` throws RAIN_102 (field `signature`,
    ///   reason `malformed_signature`) unless r and s are 32 bytes and the recovery id 0 or 1.
    /// - Throws: RAIN_102 with a field and reason: `chain` (`wrong_chain_family`),
    ///   `wallet.ethereumAddress` (`invalid_wallet`), `from` (`invalid_address`,
    ///   `from_mismatch`), `chainId` (`chain_id_mismatch`), and the kind's own: `message`
    ///   (`too_large`); `typedData…` (see the typed-data rules); `transaction…` (see the
    ///   transaction rules). RAIN_104 (`chainId`, `typedData.domain.chainId`,
    ///   `transaction.chainId`) for a chain the wallet does not support. RAIN_406 (the field)
    ///   for a number outside its type's range.
    public static func prepare(_ request: SigningRequest, wallet: SigningWallet) throws(RainError) -> PreparedSigning {
        guard request.chain == .ethereum else {
            throw RainError.invalid(
                "this is a \(request.chain.rawValue) request; EVM signing takes Ethereum requests only, so send it to "
                    + "the \(request.chain.rawValue) signer", field: "chain", reason: "wrong_chain_family")
        }
        let signer = try signerAddress(wallet)
        try checkFrom(request.from, signer: signer)
        switch request.kind {
        case .message: return try prepareMessage(request, signer: signer)
        case .typedData: return try prepareTypedData(request, signer: signer)
        case .transaction: return try prepareTransaction(request, signer: signer)
        }
    }

    private static func signerAddress(_ wallet: SigningWallet) throws(RainError) -> [UInt8] {
        guard wallet.ethereumAddress.count == 20 else {
            throw RainError.invalid(
                "the wallet's Ethereum address is \(wallet.ethereumAddress.count) bytes, not 20; unlock the wallet again",
                field: "wallet.ethereumAddress", reason: "invalid_wallet")
        }
        return wallet.ethereumAddress
    }

    /// An app that names the account it means must name this wallet's: otherwise the user would
    /// sign for an account the app did not show.
    private static func checkFrom(_ from: String, signer: [UInt8]) throws(RainError) {
        guard !from.isEmpty else { return }
        var digits = Substring(from)
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") { digits = digits.dropFirst(2) }
        guard digits.utf8.count == 40, let address = Hex.decode(String(digits)) else {
            throw RainError.invalid(
                "from is not an Ethereum address; send 0x and 40 hex digits, or leave it empty",
                field: "from", reason: "invalid_address")
        }
        guard address == signer else {
            throw RainError.invalid(
                "from names \(EVMText.address(address)) but this wallet signs as \(EVMText.address(signer)); "
                    + "switch the app to the wallet's account", field: "from", reason: "from_mismatch")
        }
    }

    /// The chain a request's own chain id names, checked against the app's `request.chainID`
    /// (0: the app named none).
    static func checkedChain(id: UInt64, field: String, requested: UInt64) throws(RainError) -> SupportedChain {
        let chain = try SupportedChains.evm(id: id, field: field)
        guard requested == 0 || requested == id else {
            throw RainError.invalid(
                "the request is for chain \(requested) but \(field) is \(id); switch the app to the chain it signs for",
                field: "chainId", reason: "chain_id_mismatch")
        }
        return chain
    }

    /// r || s || v with v = 27 + recovery id: `personal_sign`'s and `eth_signTypedData_v4`'s form.
    static func signatureBytes(_ signature: RecoverableSignature) throws(RainError) -> [UInt8] {
        guard signature.r.count == 32, signature.s.count == 32, signature.recoveryID <= 1 else {
            throw RainError.invalid(
                "the key's signature is not 32-byte r and s with a recovery id of 0 or 1; sign again",
                field: "signature", reason: "malformed_signature")
        }
        return signature.r + signature.s + [27 + signature.recoveryID]
    }

    /// The summary's first lines for every kind: who signs, on which chain.
    static func signerLine(_ signer: [UInt8], into summary: inout SigningSummary) {
        summary.add("From", EVMText.address(signer))
    }

    static func chainLine(_ chain: SupportedChain, into summary: inout SigningSummary) {
        summary.add("Chain", SupportedChains.label(chain) + (chain.isTestnet ? ", a test network" : ""))
    }
}
