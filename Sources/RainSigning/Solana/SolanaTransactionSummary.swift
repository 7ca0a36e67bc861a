import RainCore
import RainCrypto

/// What the prompt shows of a Solana message: who pays and signs, the blockhash, the lookup
/// tables, then each instruction, decoded when its program and call are known and flagged when
/// they are not.
struct SolanaTransactionSummary {
    /// The message, already validated (every index is in range).
    let message: SolanaMessage
    /// The wallet's public key.
    let wallet: [UInt8]
    /// The compute unit limit the message sets, if any.
    var computeUnitLimit: UInt32?
    /// The compute unit price the message sets, in micro-lamports, if any.
    var computeUnitPrice: UInt64?

    /// The summary of `message` for `wallet`.
    /// - Parameter claimedCluster: the cluster the app names; empty when it names none.
    static func summary(of message: SolanaMessage, wallet: [UInt8], claimedCluster: String) -> SigningSummary {
        var reader = SolanaTransactionSummary(message: message, wallet: wallet)
        var instructions = SigningSummary(title: "")
        for (index, instruction) in message.instructions.enumerated() {
            reader.describe(instruction, number: index + 1, into: &instructions)
        }

        var summary = SigningSummary(title: "Sign a transaction on Solana")
        // The message carries a blockhash, not a cluster: the name is only the app's word.
        summary.add(
            "Cluster",
            claimedCluster.isEmpty
                ? "not named by the app" : "\(claimedCluster) (claimed by the app; a transaction does not name its cluster)")
        summary.add("Fee payer", reader.accountLabel(0))
        if let fee = reader.priorityFee { summary.add("Priority fee", fee) }
        let signers = message.accountKeys.prefix(message.header.numRequiredSignatures)
        for key in signers.dropFirst() where key != wallet { summary.add("Other signer", Base58.encode(key)) }
        let others = signers.filter { $0 != wallet }.count
        if others > 0 {
            summary.warn(
                others == 1
                    ? "1 other account must also sign this transaction before it can be sent"
                    : "\(others) other accounts must also sign this transaction before it can be sent")
        }
        summary.add("Recent blockhash", Base58.encode(message.recentBlockhash))
        for lookup in message.addressTableLookups {
            summary.add(
                "Address lookup table",
                "\(Base58.encode(lookup.tableKey)) (\(lookup.writableIndexes.count) writable, \(lookup.readonlyIndexes.count) read-only)"
            )
        }
        if !message.addressTableLookups.isEmpty {
            summary.add(
                "Note",
                "accounts from an address lookup table are shown as table and index: the wallet cannot resolve them without asking the network"
            )
        }
        if message.instructions.isEmpty { summary.add("Instructions", "none") }
        summary.lines += instructions.lines
        return summary
    }

    /// How the prompt names the account at `index`: "this wallet", its base58 address, or the
    /// lookup table entry it is loaded from.
    func accountLabel(_ index: Int) -> String {
        switch message.account(at: index) {
        case .key(let key)?: key == wallet ? "this wallet" : Base58.encode(key)
        case .lookedUp(let table, let entry)?: "table \(Base58.encode(table)), index \(entry)"
        case nil: "account \(index) (not in the message)"
        }
    }

    /// The most the fee payer pays on top of the base fee: ceil(limit × price / 10^6) lamports,
    /// as the runtime computes it; nil when no price is set.
    var priorityFee: String? {
        guard let price = computeUnitPrice else { return nil }
        guard let limit = computeUnitLimit else {
            return "\(price) micro-lamports per compute unit used (no unit limit set: the network's default applies)"
        }
        // A u32 times a u64 fits in 96 bits.
        let microLamports = UInt128(limit) * UInt128(price)
        let lamports = (microLamports + 999_999) / 1_000_000
        return "at most \(AmountText.decimal(String(lamports), decimals: 9)) SOL (\(limit) units at \(price) micro-lamports)"
    }
}
