/// What the user reads of typed data: the domain, then every member of the message by path,
/// and approvals (EIP-2612 `Permit`, Uniswap Permit2) called out.
extension EIP712TypedData {
    /// The Permit2 primary types whose signature lets the spender move the signer's tokens.
    static let permit2Types: Set<String> = [
        "PermitSingle", "PermitBatch", "PermitTransferFrom", "PermitBatchTransferFrom", "PermitWitnessTransferFrom",
        "PermitBatchWitnessTransferFrom",
    ]

    /// The summary.
    /// - Parameters:
    ///   - chain: the domain's chain, already checked.
    ///   - signer: the wallet's address.
    func summary(chain: SupportedChain, signer: [UInt8]) -> SigningSummary {
        var summary = SigningSummary(title: "Sign typed data (EIP-712) on \(SupportedChains.label(chain))")
        EVMSigning.signerLine(signer, into: &summary)
        EVMSigning.chainLine(chain, into: &summary)
        let domainLabels = [
            "name": "Domain name", "version": "Domain version", "verifyingContract": "Verifying contract", "salt": "Salt",
        ]
        if case .structure(_, let members) = domain {
            for member in members {
                guard let label = domainLabels[member.name] else { continue }
                summary.add(label, Self.text(member.value))
            }
        }
        summary.add("Primary type", primaryType)
        describeApproval(into: &summary, chain: chain)
        let root = primaryType.prefix(1).lowercased() + primaryType.dropFirst()
        Self.describe(message, path: root, into: &summary)
        return summary
    }

    /// One line per atomic value, labelled with its path ("mail.to[1].wallet"); empty arrays and
    /// structs get a line of their own so nothing is silently absent.
    private static func describe(_ value: EIP712Value, path: String, into summary: inout SigningSummary) {
        switch value {
        case .structure(_, let members):
            if members.isEmpty { summary.add(path, "empty struct") }
            for member in members { describe(member.value, path: "\(path).\(member.name)", into: &summary) }
        case .array(let elements):
            if elements.isEmpty { summary.add(path, "empty list") }
            for (index, element) in elements.enumerated() { describe(element, path: "\(path)[\(index)]", into: &summary) }
        default:
            summary.add(path, text(value))
        }
    }

    /// An atomic value as shown: numbers exact, addresses EIP-55, bytes as 0x-hex, strings raw.
    static func text(_ value: EIP712Value) -> String {
        switch value {
        case .uint(let number): "\(number)"
        case .int(let isNegative, let magnitude): isNegative ? "-\(magnitude)" : "\(magnitude)"
        case .address(let bytes): EVMText.address(bytes)
        case .bool(let flag): flag ? "true" : "false"
        case .fixedBytes(let bytes), .bytes(let bytes): EVMText.hex(bytes)
        case .string(let text): text
        case .array(let elements): "\(elements.count) elements"
        case .structure(let type, _): type
        }
    }

    // MARK: Approvals

    /// Calls out a signature that approves a spender: it moves tokens later without another prompt.
    private func describeApproval(into summary: inout SigningSummary, chain: SupportedChain) {
        if primaryType == "Permit" {
            summary.add("Approval", "EIP-2612 permit: a signed token approval")
            let contract = domain[member: "verifyingContract"]?.addressValue
            let token = contract.flatMap { SupportedChains.token(chainID: chain.id, contract: $0) }
            let until = (message[member: "deadline"] ?? message[member: "expiry"])?.uintValue
            // DAI's permit approves everything with `allowed: true` instead of an amount.
            let amount: UInt256? =
                message[member: "value"]?.uintValue ?? (message[member: "allowed"] == .bool(true) ? .max : nil)
            guard let spender = message[member: "spender"]?.addressValue, let amount else {
                summary.warn(
                    "approval: this permit may let someone move your tokens, and the wallet cannot read its spender and "
                        + "amount; only sign if you trust the app")
                return
            }
            Self.warnApproval(
                spender: spender, amount: amount, isUnlimited: amount == .max, token: token, tokenAddress: contract,
                timing: until.map { "until \(EVMText.time($0))" } ?? "with no deadline", into: &summary)
            return
        }
        guard Self.permit2Types.contains(primaryType) else { return }
        summary.add("Approval", "Uniswap Permit2 \(primaryType): a signed token approval")
        guard let spender = message[member: "spender"]?.addressValue else {
            summary.warn(
                "approval: this Permit2 signature may let someone move your tokens, and the wallet cannot read its "
                    + "spender; only sign if you trust the app")
            return
        }
        // PermitSingle/PermitBatch grant an allowance (`details`, with an expiration); the
        // transfer-from kinds allow one transfer each (`permitted`) before `deadline`.
        let grants = message[member: "details"] ?? message[member: "permitted"]
        var entries: [EIP712Value] = []
        switch grants {
        case .array(let elements): entries = elements
        case .some(let single): entries = [single]
        case .none: break
        }
        let signatureDeadline = (message[member: "sigDeadline"] ?? message[member: "deadline"])?.uintValue
        let deadlineText = signatureDeadline.map { "signature valid until \(EVMText.time($0))" } ?? "no signature deadline"
        if entries.isEmpty {
            summary.warn(
                "approval: this Permit2 signature lets \(EVMText.address(spender)) move tokens the wallet cannot read; "
                    + "only sign if you trust the app")
        }
        for entry in entries {
            let tokenAddress = entry[member: "token"]?.addressValue
            let token = tokenAddress.flatMap { SupportedChains.token(chainID: chain.id, contract: $0) }
            let amount = entry[member: "amount"]?.uintValue ?? .max
            let isUnlimited = amount == .max || amount == UInt256.maxValue(bits: 160)
            var timing = deadlineText
            if let expiration = entry[member: "expiration"]?.uintValue {
                // Permit2 reads an expiration of 0 as "the block the permit is used in".
                let expires = expiration.isZero ? "the block it is used in" : EVMText.time(expiration)
                timing = "allowance expires \(expires); \(deadlineText)"
            }
            Self.warnApproval(
                spender: spender, amount: amount, isUnlimited: isUnlimited, token: token, tokenAddress: tokenAddress,
                timing: timing, into: &summary)
        }
    }

    private static func warnApproval(
        spender: [UInt8], amount: UInt256, isUnlimited: Bool, token: KnownToken?, tokenAddress: [UInt8]?, timing: String,
        into summary: inout SigningSummary
    ) {
        let tokenContract = tokenAddress.map(EVMText.address) ?? "an unnamed contract"
        if let token {
            summary.add("Token", "\(token.label), \(token.decimals) decimals, contract \(tokenContract)")
        } else {
            summary.add("Token", "unknown token at \(tokenContract): not in the wallet's list, its amount is in raw units")
        }
        let spenderText = EVMText.address(spender)
        if isUnlimited {
            summary.warn(
                "unlimited approval: signing lets \(spenderText) move all of your "
                    + "\(token?.symbol ?? "tokens of \(tokenContract)"), \(timing)")
        } else {
            summary.warn(
                "approval: signing lets \(spenderText) move up to \(EVMCall.tokenAmount(amount, token: token)) "
                    + "from your account, \(timing)")
        }
    }
}
