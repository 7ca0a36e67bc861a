import RainCore
import RainCrypto
import RainSigning

/// FuzzSigning: what the device shows and the authority signs, from hostile bytes. The first byte
/// picks the request (EVM message, typed-data JSON, EVM transaction (RLP), Solana message, Solana
/// transaction message); the rest is its payload. `SigningPreparation.prepare` must decode it or
/// refuse it with a `RainError`; what it accepts must have a summary, bytes to sign and an input of
/// the right shape, and `finish` must turn a signature into an answer without failing.
enum SigningFuzzing {
    /// A fixed Solana key: `finish` checks a signature against the wallet's key, so the fuzzer
    /// signs with it.
    static let solanaKey: Ed25519PrivateKey? = try? Ed25519PrivateKey(rawRepresentation: [UInt8](repeating: 0x22, count: 32))

    /// A fixed wallet: the requests name it as their signer where they need one.
    static let wallet = SigningWallet(
        ethereumAddress: [UInt8](repeating: 0x11, count: 20),
        solanaPublicKey: solanaKey?.publicKey.rawRepresentation ?? [UInt8](repeating: 0x22, count: 32))

    static let kinds: [(SigningRequest.Kind, RainChain, UInt64)] = [
        (.message, .ethereum, 0), (.typedData, .ethereum, 0), (.transaction, .ethereum, 0), (.message, .solana, 0),
        (.transaction, .solana, 0),
    ]

    static func run(_ input: [UInt8]) -> FuzzOutcome {
        guard let first = input.first else { return .accepted }
        let (kind, chain, chainID) = kinds[Int(first) % kinds.count]
        let request = SigningRequest(kind: kind, chain: chain, chainID: chainID, payload: Array(input.dropFirst()))
        return FuzzOutcome.decoded(by: { () throws(RainError) -> PreparedSigning in
            try SigningPreparation.prepare(request, wallet: wallet)
        }) {
            prepared in
            if prepared.summary.lines.isEmpty { return .broken("an accepted request has nothing to show") }
            if prepared.signedBytes.isEmpty { return .broken("an accepted request signs no bytes") }
            let signature: RecoverableSignature
            switch prepared.input {
            case .secp256k1Digest(let digest):
                guard chain == .ethereum, digest.count == 32 else { return .broken("an EVM digest is not 32 bytes") }
                guard digest == Keccak256.hash(prepared.signedBytes) else {
                    return .broken("the digest is not the Keccak-256 of the bytes the prompt shows")
                }
                signature = RecoverableSignature(
                    r: [UInt8](repeating: 0x33, count: 32), s: [UInt8](repeating: 0x44, count: 32), recoveryID: 1)
            case .ed25519Message(let message):
                guard chain == .solana, message == prepared.signedBytes else {
                    return .broken("a Solana request does not sign the bytes the prompt shows")
                }
                guard let key = solanaKey, let signed = try? key.signature(for: message), signed.count == 64 else {
                    return .broken("the fuzzer's Ed25519 key cannot sign")
                }
                signature = RecoverableSignature(r: Array(signed.prefix(32)), s: Array(signed.dropFirst(32)), recoveryID: 0)
            }
            do throws(RainError) {
                let result = try prepared.finish(signature)
                if result.signature.isEmpty { return .broken("finish answered no signature") }
                if kind == .transaction, result.signedTransaction.isEmpty {
                    return .broken("a signed transaction is empty")
                }
            } catch {
                return .broken("finish failed on an accepted request: \(error.message)")
            }
            return .accepted
        }
    }

    /// One request of each kind that decodes, and a few that must be refused.
    static func seeds() -> [(name: String, bytes: [UInt8])] {
        // The EIP-155 example's unsigned transaction (nonce 9, 20 gwei, 21000 gas, 1 ether).
        let eip155 =
            Hex.decode(
                "ec098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a764000080018080") ?? []
        let mail = """
            {"types":{"EIP712Domain":[{"name":"name","type":"string"},{"name":"version","type":"string"},\
            {"name":"chainId","type":"uint256"},{"name":"verifyingContract","type":"address"}],\
            "Person":[{"name":"name","type":"string"},{"name":"wallet","type":"address"}],\
            "Mail":[{"name":"from","type":"Person"},{"name":"to","type":"Person"},{"name":"contents","type":"string"}]},\
            "primaryType":"Mail","domain":{"name":"Ether Mail","version":"1","chainId":1,\
            "verifyingContract":"0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC"},\
            "message":{"from":{"name":"Cow","wallet":"0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826"},\
            "to":{"name":"Bob","wallet":"0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB"},"contents":"Hello, Bob!"}}
            """
        // A legacy Solana message: the wallet pays and sends 1 SOL with the System program.
        var transfer: [UInt8] = [1, 0, 1, 3]
        transfer += wallet.solanaPublicKey + [UInt8](repeating: 0x77, count: 32) + [UInt8](repeating: 0, count: 32)
        transfer += [UInt8](repeating: 0x99, count: 32)
        transfer += [1, 2, 2, 0, 1, 12, 2, 0, 0, 0, 0x00, 0xCA, 0x9A, 0x3B, 0, 0, 0, 0]
        return [
            ("evm-message", [0] + Array("Sign in to example.com".utf8)),
            ("typed-data-mail", [1] + Array(mail.utf8)),
            ("evm-legacy-eip155", [2] + eip155),
            ("invalid-evm-type2-truncated", [2, 0x02, 0xf8, 0x70, 0x01]),
            ("solana-offchain", [3] + Array("Hello from a Solana app".utf8)),
            ("invalid-solana-message-as-offchain", [3] + transfer),
            ("solana-legacy-transfer", [4] + transfer),
            ("invalid-typed-data-duplicate-key", [1] + Array(#"{"types":{},"types":{}}"#.utf8)),
        ].map { (name: $0.0, bytes: $0.1) }
    }
}
