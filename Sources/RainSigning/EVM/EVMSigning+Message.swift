import RainCore
import RainCrypto

extension EVMSigning {
    /// The largest `personal_sign` message: more than anyone reads on a prompt.
    static let maximumMessageSize = 64 * 1024

    /// `personal_sign` (EIP-191 version 0x45): the key signs Keccak-256 of
    /// "\u{19}Ethereum Signed Message:\n" + the message's length in decimal + the message.
    static func prepareMessage(_ request: SigningRequest, signer: [UInt8]) throws(RainError) -> PreparedSigning {
        let message = request.payload
        guard message.count <= maximumMessageSize else {
            throw RainError.invalid(
                "the message is \(message.count) bytes; at most \(maximumMessageSize) can be signed, so send a shorter one",
                field: "message", reason: "too_large")
        }
        var summary = SigningSummary(title: "Sign a message")
        signerLine(signer, into: &summary)
        // personal_sign names no chain, so the signature is valid wherever the message is accepted.
        if request.chainID == 0 {
            summary.add("Chain", "any chain: a message names none")
        } else {
            let chain = try SupportedChains.evm(id: request.chainID, field: "chainId")
            chainLine(chain, into: &summary)
            summary.title = "Sign a message on \(SupportedChains.label(chain))"
        }
        if let text = String(validating: message, as: UTF8.self) {
            summary.add("Message", text)
            summary.add("Format", "text, \(message.count) bytes")
        } else {
            summary.add("Message", EVMText.hex(message))
            summary.add("Format", "binary, \(message.count) bytes")
        }
        if message.count == 32 {
            summary.warn("this may be a hash: only sign what you can read")
        }
        let signed = Array("\u{19}Ethereum Signed Message:\n\(message.count)".utf8) + message
        return PreparedSigning(summary: summary, signedBytes: signed, input: .secp256k1Digest(Keccak256.hash(signed))) {
            signature throws(RainError) in
            SigningResult(signature: try signatureBytes(signature))
        }
    }
}
