import RainCore
import RainCrypto
import Testing

@testable import RainSigning

@Suite struct SolanaTransactionTests {
    typealias V = SolanaVectors

    @Test func theWalletKeyIsTheOneSoldersDerivesFromTheSameSeed() throws {
        #expect(Base58.encode(try V.wallet().solanaPublicKey) == V.walletAddress)
    }

    @Test func aLegacySystemTransferIsShownAndFinishedAsSoldersSerializesIt() throws {
        let prepared = try SolanaSigning.prepare(V.transaction(V.legacyMessage, from: V.walletAddress), wallet: V.wallet())
        #expect(
            prepared.summary
                == SigningSummary(
                    title: "Sign a transaction on Solana",
                    lines: [
                        .init("Cluster", "not named by the app"),
                        .init("Fee payer", "this wallet"),
                        .init("Recent blockhash", V.blockhash),
                        .init("Instruction 1", "System Program: transfer SOL"),
                        .init("Amount", "1.5 SOL"),
                        .init("From", "this wallet"),
                        .init("To", V.bobAddress),
                    ]))
        #expect(prepared.signedBytes == V.legacyMessage)
        #expect(prepared.input == .ed25519Message(V.legacyMessage))
        #expect(prepared.signedBytesHash == SHA256.hash(V.legacyMessage))

        let signature = try V.sign(prepared)
        // Ed25519 is deterministic: the same key and message give solders' signature.
        #expect(signature.r + signature.s == V.legacySignature)
        #expect(try V.walletKey().publicKey.isValidSignature(V.legacySignature, for: V.legacyMessage))
        let result = try prepared.finish(signature)
        #expect(result.signature == V.legacySignature)
        #expect(result.signedTransaction == V.legacyTransaction)
        #expect(result.transactionHash == V.legacySignature)
    }

    @Test func aV0TransferCheckedOfUSDCWithALookupTableIsShownAndFinishedAsSoldersSerializesIt() throws {
        let prepared = try SolanaSigning.prepare(V.transaction(V.v0Message, cluster: "mainnet-beta"), wallet: V.wallet())
        #expect(
            prepared.summary
                == SigningSummary(
                    title: "Sign a transaction on Solana",
                    lines: [
                        .init("Cluster", "mainnet-beta (claimed by the app; a transaction does not name its cluster)"),
                        .init("Fee payer", "this wallet"),
                        .init("Priority fee", "at most 0.00001 SOL (200000 units at 50000 micro-lamports)"),
                        .init("Recent blockhash", V.blockhash),
                        .init("Address lookup table", "\(V.v0Table) (1 writable, 0 read-only)"),
                        .init(
                            "Note",
                            "accounts from an address lookup table are shown as table and index: the wallet cannot resolve them without asking the network"
                        ),
                        .init("Instruction 1", "Compute Budget: set compute unit limit"),
                        .init("Compute unit limit", "200000"),
                        .init("Instruction 2", "Compute Budget: set compute unit price"),
                        .init("Compute unit price", "50000 micro-lamports per unit"),
                        .init("Instruction 3", "SPL Token: transfer tokens (checked)"),
                        .init("Amount", "2.5 USDC"),
                        .init("Mint", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v (USDC, Circle)"),
                        .init("From token account", V.v0Source),
                        .init("To token account", "table \(V.v0Table), index 2"),
                        .init("Owner", "this wallet"),
                    ]))
        #expect(!prepared.summary.lines.contains { $0.isWarning })

        let signature = try V.sign(prepared)
        #expect(signature.r + signature.s == V.v0Signature)
        #expect(try V.walletKey().publicKey.isValidSignature(V.v0Signature, for: V.v0Message))
        let result = try prepared.finish(signature)
        #expect(result.signedTransaction == V.v0Transaction)
        #expect(result.transactionHash == V.v0Signature)
    }

    @Test func aWalletThatIsTheSecondSignerGetsItsSignatureSecondAndNoTransactionID() throws {
        let prepared = try SolanaSigning.prepare(V.transaction(V.cosignedMessage), wallet: V.wallet())
        #expect(prepared.summary.lines.contains(.init("Fee payer", V.payerAddress)))
        #expect(
            prepared.summary.lines.contains(
                .init("Warning", "1 other account must also sign this transaction before it can be sent", isWarning: true)))
        #expect(prepared.summary.lines.contains(.init("Amount", "0.000000001 SOL")))

        let result = try prepared.finish(V.sign(prepared))
        #expect(result.signature == V.cosignedSignature)
        // The fee payer's place stays zero and the wallet's signature is second, as solders puts them.
        #expect(result.signedTransaction == V.cosignedTransaction)
        #expect(result.transactionHash.isEmpty)
    }

    @Test func aSignatureThatDoesNotVerifyOrIsNot64BytesIsNeverReturned() throws {
        let prepared = try SolanaSigning.prepare(V.transaction(V.legacyMessage), wallet: V.wallet())
        var flipped = try V.sign(prepared)
        flipped.s[31] ^= 0x01
        do {
            _ = try prepared.finish(flipped)
            Issue.record("a flipped signature was returned")
        } catch {
            #expect(error.code == .internalError)
            #expect(error.details.field == "signature")
            #expect(error.details.reason == "signature_does_not_verify")
        }
        do {
            _ = try prepared.finish(RecoverableSignature(r: V.legacySignature, s: [], recoveryID: 0))
            Issue.record("a 64-byte r was taken")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.details.field == "signature")
            #expect(error.details.reason == "invalid_length")
        }
    }
}
