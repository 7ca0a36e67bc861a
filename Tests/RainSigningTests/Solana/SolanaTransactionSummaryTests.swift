import RainCore
import RainCrypto
import Testing

@testable import RainSigning

@Suite struct SolanaTransactionSummaryTests {
    typealias V = SolanaVectors
    typealias M = SolanaTestMessage

    static let walletKey = SolanaTransactionRefusalTests.walletKey
    static let note =
        "accounts from an address lookup table are shown as table and index: the wallet cannot resolve them without asking the network"

    func summary(_ message: M, cluster: String = "") throws -> SigningSummary {
        try SolanaSigning.prepare(V.transaction(message.bytes, cluster: cluster), wallet: V.wallet()).summary
    }

    /// The wallet pays and signs; `program` (key 3) is called with accounts 1 (key 1), 2 (key 2)
    /// and 0 (the wallet).
    func call(_ program: [UInt8], data: [UInt8], accounts: [UInt8] = [1, 2, 0]) -> M {
        M(
            header: [1, 0, 1], keys: [Self.walletKey, M.key(1), M.key(2), program],
            instructions: [.init(program: 3, accounts: accounts, data: data)])
    }

    @Test func anUnknownProgramIsAWarnedUnknownCallWithItsAccountsFromLookupTablesByTableAndIndex() throws {
        let summary = try SolanaSigning.prepare(V.transaction(V.lookupsMessage), wallet: V.wallet()).summary
        // solders put the writable entries of both tables first, then the read-only ones:
        // indexes 2 and 3 are entries 0 of tables A and B, indexes 4 and 5 their entries 1.
        #expect(
            summary.lines == [
                .init("Cluster", "not named by the app"),
                .init("Fee payer", "this wallet"),
                .init("Recent blockhash", V.blockhash),
                .init("Address lookup table", "\(V.lookupsTableA) (1 writable, 1 read-only)"),
                .init("Address lookup table", "\(V.lookupsTableB) (1 writable, 1 read-only)"),
                .init("Note", Self.note),
                .init("Instruction 1", "unknown program \(V.lookupsProgram)"),
                .init(
                    "Warning", "instruction 1 is an unknown call, 3 bytes: the wallet cannot show what it does",
                    isWarning: true),
                .init("Account 1", "table \(V.lookupsTableA), index 1 (read-only)"),
                .init("Account 2", "table \(V.lookupsTableB), index 0 (writable)"),
                .init("Account 3", "table \(V.lookupsTableA), index 0 (writable)"),
                .init("Account 4", "table \(V.lookupsTableB), index 1 (read-only)"),
                .init("Account 5", "this wallet (signer, writable)"),
            ])
    }

    @Test func aKnownProgramsUndecodedCallIsWarnedToo() throws {
        // System Program CreateAccount (tag 0): named program, call not decoded.
        let lines = try summary(call(M.systemProgram, data: [0, 0, 0, 0] + M.u64(1) + M.u64(0) + M.key(5))).lines
        #expect(lines.contains(.init("Instruction 1", "System Program")))
        #expect(lines.contains { $0.isWarning && $0.value.contains("unknown call, 52 bytes") })
        // A Transfer with a byte too many is not read as a Transfer.
        let longer = try summary(call(M.systemProgram, data: [2, 0, 0, 0] + M.u64(1) + [0])).lines
        #expect(longer.contains { $0.isWarning && $0.value.contains("unknown call, 13 bytes") })
        #expect(!longer.contains { $0.label == "Amount" })
    }

    @Test func aPlainTokenTransferIsShownInRawUnitsAndSaysSo() throws {
        let lines = try summary(call(M.tokenProgram, data: [3] + M.u64(1_000_000))).lines
        #expect(lines.contains(.init("Instruction 1", "SPL Token: transfer tokens")))
        #expect(lines.contains(.init("Amount", "1000000 raw units")))
        #expect(lines.contains { $0.isWarning && $0.value.contains("raw units") && $0.value.contains("decimals") })
        #expect(lines.contains(.init("From token account", Base58.encode(M.key(1)))))
        #expect(lines.contains(.init("To token account", Base58.encode(M.key(2)))))
        #expect(lines.contains(.init("Owner", "this wallet")))
    }

    @Test func approvalsAreWarningsThatNameTheDelegate() throws {
        let approve = try summary(call(M.tokenProgram, data: [4] + M.u64(7))).lines
        #expect(approve.contains(.init("Instruction 1", "SPL Token: approve a delegate")))
        #expect(
            approve.contains {
                $0.isWarning && $0.value.contains(Base58.encode(M.key(2))) && $0.value.contains("may move up to 7 raw units")
            })

        let usdc = M.program("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")
        let token2022 = M.program("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb")
        // ApproveChecked: source 1, mint 4, delegate 2, owner 0.
        var checked = call(token2022, data: [13] + M.u64(3_000_000) + [6], accounts: [1, 4, 2, 0])
        checked.keys.append(usdc)
        let lines = try summary(checked).lines
        #expect(lines.contains(.init("Instruction 1", "Token-2022: approve a delegate (checked)")))
        #expect(lines.contains { $0.isWarning && $0.value.contains("may move up to 3 USDC") })
        #expect(lines.contains(.init("Delegate", Base58.encode(M.key(2)))))
    }

    @Test func aTransferCheckedKeepsItsDecimalsAndWarnsWhenAKnownMintHasOthers() throws {
        let usdc = M.program("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")
        var wrongDecimals = call(M.tokenProgram, data: [12] + M.u64(2_500_000) + [7], accounts: [1, 4, 2, 0])
        wrongDecimals.keys.append(usdc)
        let lines = try summary(wrongDecimals).lines
        #expect(lines.contains(.init("Amount", "0.25 (7 decimals as the call says)")))
        #expect(lines.contains { $0.isWarning && $0.value.contains("7 decimals but USDC has 6") })

        var unknownMint = call(M.tokenProgram, data: [12] + M.u64(2_500_000) + [6], accounts: [1, 4, 2, 0])
        unknownMint.keys.append(M.key(4))
        let unknown = try summary(unknownMint).lines
        #expect(unknown.contains(.init("Amount", "2.5 (6 decimals as the call says)")))
        #expect(unknown.contains(.init("Mint", "\(Base58.encode(M.key(4))) (not a token the wallet knows)")))
    }

    @Test func aMemoShowsItsText() throws {
        let memo = M.program("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr")
        let lines = try summary(call(memo, data: Array("order 42 ✓".utf8), accounts: [0])).lines
        #expect(lines.contains(.init("Instruction 1", "Memo: memo")))
        #expect(lines.contains(.init("Memo", "order 42 ✓")))
        let binary = try summary(call(memo, data: [0xff, 0xfe], accounts: [0])).lines
        #expect(binary.contains { $0.isWarning && $0.value.contains("unknown call, 2 bytes") })
    }

    @Test func anAssociatedTokenAccountCreationNamesItsOwnerAndMint() throws {
        let ata = M.program("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL")
        let usdc = M.program("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")
        var message = call(ata, data: [1], accounts: [0, 1, 2, 4, 5, 6])
        message.keys += [usdc, M.systemProgram, M.tokenProgram]
        message.header = [1, 0, 4]
        let lines = try summary(message).lines
        #expect(lines.contains(.init("Instruction 1", "Associated Token Account: create a token account if it does not exist")))
        #expect(lines.contains(.init("Owner", Base58.encode(M.key(2)))))
        #expect(lines.contains(.init("Mint", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v (USDC, Circle)")))
        #expect(lines.contains(.init("Paid by", "this wallet")))
    }

    @Test func thePriorityFeeIsRoundedUpAsTheRuntimeDoes() throws {
        let budget = M.program("ComputeBudget111111111111111111111111111111")
        var message = call(budget, data: [2, 1, 0, 0, 0], accounts: [])
        message.instructions.append(.init(program: 3, accounts: [], data: [3] + M.u64(1)))
        #expect(
            try summary(message).lines.contains(.init("Priority fee", "at most 0.000000001 SOL (1 units at 1 micro-lamports)")))

        let priceOnly = call(budget, data: [3] + M.u64(UInt64.max), accounts: [])
        let fee = try summary(priceOnly).lines.first { $0.label == "Priority fee" }
        #expect(fee?.value.contains("\(UInt64.max) micro-lamports per compute unit used") == true)

        let maximum = M(
            header: [1, 0, 1], keys: [Self.walletKey, budget],
            instructions: [
                .init(program: 1, accounts: [], data: [2, 0xff, 0xff, 0xff, 0xff]),
                .init(program: 1, accounts: [], data: [3] + M.u64(UInt64.max)),
            ])
        // (2^32 − 1)(2^64 − 1) micro-lamports does not fit 64 bits; the fee is still exact.
        #expect(
            try summary(maximum).lines.contains(
                .init(
                    "Priority fee",
                    "at most 79228162495817.59351554 SOL (4294967295 units at 18446744073709551615 micro-lamports)")))
    }

    @Test func aClaimedClusterIsShownAsTheAppsClaim() throws {
        let lines = try summary(call(M.systemProgram, data: [2, 0, 0, 0] + M.u64(1)), cluster: "devnet").lines
        #expect(lines.first == .init("Cluster", "devnet (claimed by the app; a transaction does not name its cluster)"))
    }

    @Test func everyKnownProgramIdIsA32ByteKey() {
        for (address, _) in SolanaProgram.ids { #expect(Base58.decode(address)?.count == 32, "\(address)") }
        #expect(SolanaProgram(key: M.systemProgram) == .system)
        #expect(Set(SolanaProgram.ids.values).count == SolanaProgram.allCases.count)
    }
}
