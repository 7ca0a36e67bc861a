import RainCore
import RainCrypto

extension EVMSigning {
    /// An unsigned transaction: the key signs Keccak-256 of its bytes; the answer carries the
    /// signed raw transaction and its hash.
    static func prepareTransaction(_ request: SigningRequest, signer: [UInt8]) throws(RainError) -> PreparedSigning {
        let transaction = try EVMTransaction(decoding: request.payload)
        let chain = try checkedChain(id: transaction.chainID, field: "transaction.chainId", requested: request.chainID)
        let summary = transactionSummary(transaction, chain: chain, signer: signer)
        let unsigned = request.payload
        return PreparedSigning(
            summary: summary, signedBytes: unsigned, input: .secp256k1Digest(Keccak256.hash(unsigned))
        ) { signature throws(RainError) in
            let bytes = try signatureBytes(signature)
            let raw = transaction.signed(with: signature)
            return SigningResult(signature: bytes, signedTransaction: raw, transactionHash: Keccak256.hash(raw))
        }
    }

    static func transactionSummary(
        _ transaction: EVMTransaction, chain: SupportedChain, signer: [UInt8]
    ) -> SigningSummary {
        var summary = SigningSummary(title: "Sign a transaction on \(SupportedChains.label(chain))")
        summary.add("Type", transaction.format.label)
        chainLine(chain, into: &summary)
        signerLine(signer, into: &summary)
        summary.add("To", transaction.to.map(EVMText.address) ?? "new contract")
        summary.add("Value", EVMText.amount(transaction.value, decimals: chain.nativeDecimals, unit: chain.nativeSymbol))
        summary.add(
            "Max network fee",
            EVMText.amount(transaction.maximumFee, decimals: chain.nativeDecimals, unit: chain.nativeSymbol)
                + " (gas limit \(transaction.gasLimit) × \(EVMText.gwei(transaction.feePerGas)))")
        if let priority = transaction.maxPriorityFeePerGas {
            summary.add("Max fee per gas", EVMText.gwei(transaction.feePerGas))
            summary.add("Max priority fee", EVMText.gwei(priority))
        } else {
            summary.add("Gas price", EVMText.gwei(transaction.feePerGas))
        }
        summary.add("Gas limit", "\(transaction.gasLimit)")
        summary.add("Nonce", "\(transaction.nonce)")
        summary.add("Data", transaction.data.isEmpty ? "none" : "\(transaction.data.count) bytes")
        EVMCall(to: transaction.to, data: transaction.data).describe(into: &summary, contract: transaction.to, chain: chain)
        if !transaction.accessList.isEmpty {
            let keys = transaction.accessList.reduce(0) { $0 + $1.storageKeys.count }
            let addresses = transaction.accessList.count
            summary.add(
                "Access list",
                "\(addresses) \(addresses == 1 ? "address" : "addresses"), \(keys) storage \(keys == 1 ? "key" : "keys")")
        }
        return summary
    }
}
