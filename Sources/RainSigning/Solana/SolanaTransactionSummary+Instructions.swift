import RainCore
import RainCrypto

/// One instruction decoded: the call's name and the lines that show it.
private struct DecodedCall {
    var name: String
    var lines: [SigningSummary.Line] = []
}

extension SolanaTransactionSummary {
    /// Adds the lines of instruction `number` (1-based): "Instruction 2" with its program and
    /// call, then the call's values. A call that is not decoded gets a warning and its accounts,
    /// never silence.
    mutating func describe(_ instruction: SolanaMessage.Instruction, number: Int, into summary: inout SigningSummary) {
        // The message is validated before it is shown, so the index is a static key; a wrong
        // index still gets a line rather than a trap.
        guard instruction.programIDIndex < message.accountKeys.count else {
            summary.add("Instruction \(number)", "program \(instruction.programIDIndex) (not in the message)")
            summary.warn("instruction \(number) is an unknown call, \(instruction.data.count) bytes")
            return
        }
        let programKey = message.accountKeys[instruction.programIDIndex]
        let program = SolanaProgram(key: programKey)
        let decoded: DecodedCall? =
            switch program {
            case .system?: system(instruction)
            case .splToken?, .token2022?: token(instruction)
            case .associatedTokenAccount?: associatedTokenAccount(instruction)
            case .computeBudget?: computeBudget(instruction)
            case .memo?: memo(instruction)
            // Its calls create, extend and close tables: nothing the prompt decodes.
            case .addressLookupTable?, nil: nil
            }
        if let program, let decoded {
            summary.add("Instruction \(number)", "\(program.name): \(decoded.name)")
            summary.lines += decoded.lines
            return
        }
        summary.add("Instruction \(number)", program?.name ?? "unknown program \(Base58.encode(programKey))")
        summary.warn(
            "instruction \(number) is an unknown call, \(instruction.data.count) bytes: the wallet cannot show what it does")
        for (position, account) in instruction.accounts.enumerated() {
            summary.add("Account \(position + 1)", "\(accountLabel(account)) (\(access(account)))")
        }
    }

    /// "signer, writable", "read-only", ...: what an undecoded call may do with an account.
    private func access(_ index: Int) -> String {
        let isSigner = index < message.header.numRequiredSignatures
        let writable = message.isWritable(index) ? "writable" : "read-only"
        return isSigner ? "signer, \(writable)" : writable
    }

    // MARK: System Program

    /// `Transfer`: u32 little-endian tag 2, u64 little-endian lamports; accounts from, to.
    private func system(_ instruction: SolanaMessage.Instruction) -> DecodedCall? {
        let data = instruction.data
        guard data.count == 12, Self.littleEndian(data, at: 0, as: UInt32.self) == 2, instruction.accounts.count >= 2
        else { return nil }
        let lamports = Self.littleEndian(data, at: 4, as: UInt64.self)
        return DecodedCall(
            name: "transfer SOL",
            lines: [
                .init("Amount", "\(AmountText.decimal(String(lamports), decimals: 9)) SOL"),
                .init("From", accountLabel(instruction.accounts[0])),
                .init("To", accountLabel(instruction.accounts[1])),
            ])
    }

    // MARK: SPL Token and Token-2022

    /// The transfers and approvals, whose layouts both token programs share: a u8 tag, then a
    /// u64 little-endian amount, then (the checked forms) the u8 decimals.
    private func token(_ instruction: SolanaMessage.Instruction) -> DecodedCall? {
        let data = instruction.data
        let accounts = instruction.accounts
        guard let tag = data.first else { return nil }
        switch tag {
        case 3 where data.count == 9 && accounts.count >= 3:
            // Transfer: source, destination, owner.
            let amount = Self.littleEndian(data, at: 1, as: UInt64.self)
            var call = DecodedCall(name: "transfer tokens")
            call.lines.append(.init("Amount", "\(amount) raw units"))
            call.lines.append(
                .init(
                    "Warning", "a plain Transfer names neither the token nor its decimals: the amount is in raw units",
                    isWarning: true))
            call.lines.append(.init("From token account", accountLabel(accounts[0])))
            call.lines.append(.init("To token account", accountLabel(accounts[1])))
            call.lines.append(.init("Owner", accountLabel(accounts[2])))
            return call
        case 12 where data.count == 10 && accounts.count >= 4:
            // TransferChecked: source, mint, destination, owner.
            var call = DecodedCall(name: "transfer tokens (checked)")
            call.lines += checkedAmount(data, mint: accounts[1])
            call.lines.append(.init("From token account", accountLabel(accounts[0])))
            call.lines.append(.init("To token account", accountLabel(accounts[2])))
            call.lines.append(.init("Owner", accountLabel(accounts[3])))
            return call
        case 4 where data.count == 9 && accounts.count >= 3:
            // Approve: source, delegate, owner.
            let amount = Self.littleEndian(data, at: 1, as: UInt64.self)
            var call = DecodedCall(name: "approve a delegate")
            call.lines.append(
                .init(
                    "Warning",
                    "\(accountLabel(accounts[1])) may move up to \(amount) raw units from \(accountLabel(accounts[0])) without asking again",
                    isWarning: true))
            call.lines.append(.init("Delegate", accountLabel(accounts[1])))
            call.lines.append(.init("Amount", "\(amount) raw units (the call names neither the token nor its decimals)"))
            call.lines.append(.init("Token account", accountLabel(accounts[0])))
            call.lines.append(.init("Owner", accountLabel(accounts[2])))
            return call
        case 13 where data.count == 10 && accounts.count >= 4:
            // ApproveChecked: source, mint, delegate, owner.
            var call = DecodedCall(name: "approve a delegate (checked)")
            let amount = checkedAmount(data, mint: accounts[1])
            call.lines.append(
                .init(
                    "Warning",
                    "\(accountLabel(accounts[2])) may move up to \(amount.first?.value ?? "") from \(accountLabel(accounts[0])) without asking again",
                    isWarning: true))
            call.lines.append(.init("Delegate", accountLabel(accounts[2])))
            call.lines += amount
            call.lines.append(.init("Token account", accountLabel(accounts[0])))
            call.lines.append(.init("Owner", accountLabel(accounts[3])))
            return call
        default:
            return nil
        }
    }

    /// The amount and mint lines of a checked call (u8 tag, u64 amount, u8 decimals): the
    /// decimals the call carries, the symbol when the mint is a known token, and a warning when
    /// a known mint's decimals differ from the call's.
    private func checkedAmount(_ data: [UInt8], mint: Int) -> [SigningSummary.Line] {
        let amount = Self.littleEndian(data, at: 1, as: UInt64.self)
        let decimals = Int(data[9])
        let text = AmountText.decimal(String(amount), decimals: decimals)
        guard case .key(let key)? = message.account(at: mint), let token = SupportedChains.solanaToken(mint: Base58.encode(key))
        else {
            return [
                .init("Amount", "\(text) (\(decimals) decimals as the call says)"),
                .init("Mint", "\(accountLabel(mint)) (not a token the wallet knows)"),
            ]
        }
        let mintLine = SigningSummary.Line("Mint", "\(Base58.encode(key)) (\(token.label), \(token.issuer))")
        guard token.decimals == decimals else {
            return [
                .init("Amount", "\(text) (\(decimals) decimals as the call says)"),
                mintLine,
                .init(
                    "Warning",
                    "the call says \(decimals) decimals but \(token.label) has \(token.decimals): the network refuses it, and the amount shown is not what it seems",
                    isWarning: true),
            ]
        }
        return [.init("Amount", "\(text) \(token.label)"), mintLine]
    }

    // MARK: Associated Token Account

    /// `Create` (no data or tag 0) and `CreateIdempotent` (tag 1): funding account, new account,
    /// owner, mint, System Program, token program.
    private func associatedTokenAccount(_ instruction: SolanaMessage.Instruction) -> DecodedCall? {
        let accounts = instruction.accounts
        guard accounts.count >= 6 else { return nil }
        let name: String
        switch instruction.data {
        case [], [0]: name = "create a token account"
        case [1]: name = "create a token account if it does not exist"
        default: return nil
        }
        var mint = accountLabel(accounts[3])
        if case .key(let key)? = message.account(at: accounts[3]),
            let token = SupportedChains.solanaToken(mint: Base58.encode(key))
        {
            mint += " (\(token.label), \(token.issuer))"
        }
        return DecodedCall(
            name: name,
            lines: [
                .init("Owner", accountLabel(accounts[2])),
                .init("Mint", mint),
                .init("Token account", accountLabel(accounts[1])),
                .init("Paid by", accountLabel(accounts[0])),
            ])
    }

    // MARK: Compute Budget

    /// `SetComputeUnitLimit` (tag 2, u32) and `SetComputeUnitPrice` (tag 3, u64 micro-lamports),
    /// kept for the priority fee line. A second one of either makes the network refuse the
    /// transaction, so it is a warning.
    private mutating func computeBudget(_ instruction: SolanaMessage.Instruction) -> DecodedCall? {
        let data = instruction.data
        switch data.first {
        case 2 where data.count == 5:
            let limit = Self.littleEndian(data, at: 1, as: UInt32.self)
            var call = DecodedCall(name: "set compute unit limit", lines: [.init("Compute unit limit", "\(limit)")])
            if computeUnitLimit != nil {
                call.lines.append(.init("Warning", "the limit is set twice: the network refuses this", isWarning: true))
            }
            computeUnitLimit = limit
            return call
        case 3 where data.count == 9:
            let price = Self.littleEndian(data, at: 1, as: UInt64.self)
            var call = DecodedCall(
                name: "set compute unit price", lines: [.init("Compute unit price", "\(price) micro-lamports per unit")])
            if computeUnitPrice != nil {
                call.lines.append(.init("Warning", "the price is set twice: the network refuses this", isWarning: true))
            }
            computeUnitPrice = price
            return call
        default:
            return nil
        }
    }

    // MARK: Memo

    /// The memo's text: its data, which the program requires to be UTF-8.
    private func memo(_ instruction: SolanaMessage.Instruction) -> DecodedCall? {
        guard let text = String(validating: instruction.data, as: UTF8.self) else { return nil }
        return DecodedCall(name: "memo", lines: [.init("Memo", text)])
    }

    /// The little-endian integer at `offset`; the caller has checked the data's length.
    static func littleEndian<T: FixedWidthInteger & UnsignedInteger>(_ data: [UInt8], at offset: Int, as: T.Type) -> T {
        var value: T = 0
        for index in (0..<MemoryLayout<T>.size).reversed() { value = value << 8 | T(data[offset + index]) }
        return value
    }
}
