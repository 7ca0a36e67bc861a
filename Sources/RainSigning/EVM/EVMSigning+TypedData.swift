import RainCore
import RainCrypto

extension EVMSigning {
    /// `eth_signTypedData_v4` (EIP-712): the key signs Keccak-256 of
    /// `0x19 0x01 || domainSeparator || hashStruct(message)`.
    static func prepareTypedData(_ request: SigningRequest, signer: [UInt8]) throws(RainError) -> PreparedSigning {
        let typedData = try EIP712TypedData(json: request.payload)
        let chain = try checkedChain(id: typedData.chainID, field: "typedData.domain.chainId", requested: request.chainID)
        let signed = typedData.signedBytes
        return PreparedSigning(
            summary: typedData.summary(chain: chain, signer: signer), signedBytes: signed,
            input: .secp256k1Digest(Keccak256.hash(signed))
        ) { signature throws(RainError) in
            SigningResult(signature: try signatureBytes(signature))
        }
    }
}
