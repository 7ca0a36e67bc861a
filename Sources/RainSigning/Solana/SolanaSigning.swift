import RainCore
import RainCrypto

/// Solana requests, decoded from the exact bytes the wallet's Ed25519 key signs: off-chain
/// messages (in solana-sdk's envelope) and transaction messages (legacy and version 0).
public enum SolanaSigning {
    /// The largest serialized transaction the network takes: an IPv6 packet's payload (1280 − 48),
    /// solana-sdk's `PACKET_DATA_SIZE`.
    public static let maximumTransactionSize = 1232

    /// Decodes and checks a Solana request and says what to sign.
    ///
    /// - `message`: the app's text (UTF-8, at most 65515 bytes) in the off-chain envelope; the
    ///   key signs the envelope and the result is the 64-byte signature.
    /// - `transaction`: the payload is a legacy or version 0 message without signatures; the key
    ///   signs it and the result is the signature, the serialized transaction with it at the
    ///   wallet's place (other signers' places zero), and, when the wallet pays the fee, the
    ///   transaction id (the first signature).
    ///
    /// - Parameters:
    ///   - request: a request with `chain == .solana`.
    ///   - wallet: the wallet; its 32-byte `solanaPublicKey` signs.
    /// - Returns: the summary, the signed bytes, the input for the key and the `finish` that
    ///   builds the answer. `finish` throws RAIN_102 (field `signature`, reason
    ///   `invalid_length`) unless the signature is 32 + 32 bytes, and RAIN_502 (field
    ///   `signature`, reason `signature_does_not_verify`) when it does not verify under the
    ///   wallet's key.
    /// - Throws: RAIN_102 with a field and a reason:
    ///   - `chain` `not_solana`; `kind` `kind_not_supported` (typed data);
    ///     `wallet.solanaPublicKey` `invalid_length`;
    ///   - `from` `from_mismatch` (a `from` that is not the wallet's address), `from`
    ///     `not_a_signer` (the wallet is not among the transaction's signers);
    ///   - `message`: `empty`, `message_is_transaction`, `not_utf8`, `too_long`;
    ///   - `transaction` `too_large`, `trailing_bytes`; `transaction.version`
    ///     `message_version_not_supported`; any field of the message with `truncated`,
    ///     `non_canonical_compact_u16`, `compact_u16_overflow`; `transaction.header`
    ///     `no_required_signature`, `header_inconsistent`; `transaction.accountKeys` and
    ///     lookup indexes `duplicate_account`; `transaction.addressTableLookups[i]`
    ///     `empty_lookup`; `transaction.addressTableLookups` `too_many_accounts`;
    ///     `transaction.instructions[i].programIdIndex` `index_out_of_range`,
    ///     `program_is_fee_payer`; `transaction.instructions[i].accounts` `index_out_of_range`.
    public static func prepare(_ request: SigningRequest, wallet: SigningWallet) throws(RainError) -> PreparedSigning {
        guard request.chain == .solana else {
            throw RainError.invalid(
                "this request is for \(request.chain.rawValue), not Solana", field: "chain", reason: "not_solana")
        }
        guard wallet.solanaPublicKey.count == 32 else {
            throw RainError.invalid(
                "the wallet's Solana public key is not 32 bytes", field: "wallet.solanaPublicKey", reason: "invalid_length")
        }
        let publicKey = try Ed25519PublicKey(rawRepresentation: wallet.solanaPublicKey)
        let address = Base58.encode(wallet.solanaPublicKey)
        // Base58 has one spelling per key, so comparing the text compares the keys.
        guard request.from.isEmpty || request.from == address else {
            throw RainError.invalid(
                "the request is from \(request.from) but this wallet is \(address)", field: "from", reason: "from_mismatch")
        }
        switch request.kind {
        case .message:
            return try prepareMessage(request.payload, address: address, publicKey: publicKey)
        case .transaction:
            return try prepareTransaction(request, wallet: wallet.solanaPublicKey, publicKey: publicKey)
        case .typedData:
            throw RainError.invalid(
                "typed data is an EVM request: Solana signs messages and transactions", field: "kind",
                reason: "kind_not_supported")
        }
    }

    private static func prepareMessage(
        _ payload: [UInt8], address: String, publicKey: Ed25519PublicKey
    ) throws(RainError) -> PreparedSigning {
        let message = try SolanaOffchainMessage(payload)
        var summary = SigningSummary(title: "Sign a message (Solana off-chain)")
        summary.add("Message", message.text)
        summary.add("Signer", address)
        let envelope = message.envelope
        return PreparedSigning(summary: summary, signedBytes: envelope, input: .ed25519Message(envelope)) {
            signature throws(RainError) in
            SigningResult(signature: try verified(signature, over: envelope, publicKey: publicKey))
        }
    }

    private static func prepareTransaction(
        _ request: SigningRequest, wallet: [UInt8], publicKey: Ed25519PublicKey
    ) throws(RainError) -> PreparedSigning {
        let payload = request.payload
        // Checked before decoding so no count read from the payload can size more than this.
        guard payload.count <= maximumTransactionSize else { throw tooLarge(payload.count) }
        let message = try SolanaMessage(decoding: payload)
        let signerCount = message.header.numRequiredSignatures
        let prefix = compactU16(signerCount)
        let size = prefix.count + 64 * signerCount + payload.count
        guard size <= maximumTransactionSize else { throw tooLarge(size) }
        guard let signerIndex = message.accountKeys.prefix(signerCount).firstIndex(of: wallet) else {
            throw RainError.invalid(
                "this wallet (\(Base58.encode(wallet))) is not one of the transaction's \(signerCount) signers",
                field: "from", reason: "not_a_signer")
        }
        let summary = SolanaTransactionSummary.summary(of: message, wallet: wallet, claimedCluster: request.claimedCluster)
        return PreparedSigning(summary: summary, signedBytes: payload, input: .ed25519Message(payload)) {
            signature throws(RainError) in
            let ours = try verified(signature, over: payload, publicKey: publicKey)
            // The other signers' places stay zero: they sign the same message and fill them in.
            var transaction = prefix
            transaction.reserveCapacity(size)
            for index in 0..<signerCount {
                transaction += index == signerIndex ? ours : [UInt8](repeating: 0, count: 64)
            }
            transaction += payload
            // The transaction id is the fee payer's signature, known only when it is ours.
            return SigningResult(
                signature: ours, signedTransaction: transaction, transactionHash: signerIndex == 0 ? ours : [])
        }
    }

    /// The 64 signature bytes from `r` and `s`, checked against the wallet's key so a signature
    /// from a wrong key never reaches the app.
    private static func verified(
        _ signature: RecoverableSignature, over message: [UInt8], publicKey: Ed25519PublicKey
    ) throws(RainError) -> [UInt8] {
        guard signature.r.count == 32, signature.s.count == 32 else {
            throw RainError.invalid(
                "an Ed25519 signature is 64 bytes (r and s of 32 each)", field: "signature", reason: "invalid_length")
        }
        let bytes = signature.r + signature.s
        guard publicKey.isValidSignature(bytes, for: message) else {
            throw RainError(
                .internalError, "the signature does not verify under the wallet's Solana key",
                details: RainError.Details(reason: "signature_does_not_verify", field: "signature"))
        }
        return bytes
    }

    private static func tooLarge(_ size: Int) -> RainError {
        RainError.invalid(
            "the signed transaction would be \(size) bytes; the network takes at most \(maximumTransactionSize)",
            field: "transaction", reason: "too_large")
    }

    /// The compact-u16 encoding of `value` (at most 0xffff): 7 bits a byte, least significant
    /// first.
    static func compactU16(_ value: Int) -> [UInt8] {
        var rest = value
        var bytes: [UInt8] = []
        repeat {
            let low = UInt8(rest & 0x7f)
            rest >>= 7
            bytes.append(rest == 0 ? low : low | 0x80)
        } while rest != 0
        return bytes
    }
}
