/// What a transaction's `data` asks the contract at `to` to do, for the calls whose effect a user
/// must see: token transfers and approvals. Anything else is shown as an unknown call, with a
/// warning, never left out.
enum EVMCall: Sendable, Equatable {
    /// No data: a plain transfer of the native coin.
    case none
    /// No recipient: the data is the code of a new contract.
    case contractCreation(codeSize: Int)
    /// ERC-20 `transfer(address,uint256)`.
    case tokenTransfer(recipient: [UInt8], amount: UInt256)
    /// ERC-20 `approve(address,uint256)`.
    case tokenApproval(spender: [UInt8], amount: UInt256)
    /// ERC-721/ERC-1155 `setApprovalForAll(address,bool)`.
    case approvalForAll(operator: [UInt8], isApproved: Bool)
    /// Anything else; `selector` is nil when the data is shorter than a selector, `claimed` names
    /// a known selector whose arguments did not decode.
    case unknown(selector: [UInt8]?, size: Int, claimed: String?)

    static let transferSelector: [UInt8] = [0xA9, 0x05, 0x9C, 0xBB]
    static let approveSelector: [UInt8] = [0x09, 0x5E, 0xA7, 0xB3]
    static let setApprovalForAllSelector: [UInt8] = [0xA2, 0x2C, 0xB4, 0x65]

    /// Decodes `data` sent to `to` (nil: contract creation).
    ///
    /// The arguments must be exactly the ABI encoding (two 32-byte words, an address word with
    /// twelve zero bytes, a bool word of 0 or 1): data that only starts with a known selector
    /// could mean something else to the contract, so it is shown as unknown.
    init(to: [UInt8]?, data: [UInt8]) {
        guard to != nil else {
            self = .contractCreation(codeSize: data.count)
            return
        }
        guard !data.isEmpty else {
            self = .none
            return
        }
        guard data.count >= 4 else {
            self = .unknown(selector: nil, size: data.count, claimed: nil)
            return
        }
        let selector = Array(data[0..<4])
        let words = stride(from: 4, to: data.count, by: 32).map { Array(data[$0..<min($0 + 32, data.count)]) }
        let isTwoWords = data.count == 4 + 64
        func address(_ word: [UInt8]) -> [UInt8]? { word.prefix(12).allSatisfy { $0 == 0 } ? Array(word.suffix(20)) : nil }
        switch selector {
        case Self.transferSelector:
            if isTwoWords, let recipient = address(words[0]), let amount = UInt256(bigEndian: words[1]) {
                self = .tokenTransfer(recipient: recipient, amount: amount)
                return
            }
            self = .unknown(selector: selector, size: data.count, claimed: "transfer(address,uint256)")
        case Self.approveSelector:
            if isTwoWords, let spender = address(words[0]), let amount = UInt256(bigEndian: words[1]) {
                self = .tokenApproval(spender: spender, amount: amount)
                return
            }
            self = .unknown(selector: selector, size: data.count, claimed: "approve(address,uint256)")
        case Self.setApprovalForAllSelector:
            if isTwoWords, let operatorAddress = address(words[0]), words[1].prefix(31).allSatisfy({ $0 == 0 }),
                words[1][31] <= 1
            {
                self = .approvalForAll(operator: operatorAddress, isApproved: words[1][31] == 1)
                return
            }
            self = .unknown(selector: selector, size: data.count, claimed: "setApprovalForAll(address,bool)")
        default:
            self = .unknown(selector: selector, size: data.count, claimed: nil)
        }
    }

    /// Adds the call's lines to a transaction summary.
    /// - Parameters:
    ///   - summary: the summary.
    ///   - contract: the transaction's `to` (the token or collection).
    ///   - chain: the chain, for the token table.
    func describe(into summary: inout SigningSummary, contract: [UInt8]?, chain: SupportedChain) {
        let token = contract.flatMap { SupportedChains.token(chainID: chain.id, contract: $0) }
        let contractText = contract.map(EVMText.address) ?? "none"
        switch self {
        case .none:
            summary.add("Call", "none: a plain \(chain.nativeSymbol) transfer")
        case .contractCreation(let codeSize):
            summary.add("Call", "creates a contract from \(codeSize) bytes of code")
            summary.warn("this deploys a new contract whose code is not decoded: only sign code you trust")
        case .tokenTransfer(let recipient, let amount):
            summary.add("Call", "ERC-20 transfer")
            Self.describeToken(token, contract: contractText, into: &summary)
            summary.add("Token recipient", EVMText.address(recipient))
            summary.add("Token amount", Self.tokenAmount(amount, token: token))
        case .tokenApproval(let spender, let amount):
            summary.add("Call", "ERC-20 approve")
            Self.describeToken(token, contract: contractText, into: &summary)
            summary.add("Spender", EVMText.address(spender))
            let spenderText = EVMText.address(spender)
            if amount == .max {
                summary.add("Allowance", "unlimited")
                summary.warn(
                    "unlimited approval: \(spenderText) can move all of your \(token?.symbol ?? "tokens of \(contractText)"), "
                        + "now and later, until you revoke it")
            } else {
                let amountText = Self.tokenAmount(amount, token: token)
                summary.add("Allowance", amountText)
                summary.warn("approval: \(spenderText) can move up to \(amountText) from your account without asking again")
            }
        case .approvalForAll(let operatorAddress, let isApproved):
            summary.add("Call", "setApprovalForAll")
            summary.add("Collection", contractText)
            summary.add("Operator", EVMText.address(operatorAddress))
            summary.add("Approved", isApproved ? "yes" : "no (revokes the operator)")
            if isApproved {
                summary.warn(
                    "approval for all: \(EVMText.address(operatorAddress)) can move all your NFTs of the collection "
                        + "\(contractText), now and later, until you revoke it")
            }
        case .unknown(let selector, let size, let claimed):
            guard let selector else {
                summary.add("Call", "unknown call, \(size) bytes, shorter than a 4-byte selector")
                summary.warn("the data is not a contract call the wallet can decode: only sign if you trust the app")
                return
            }
            summary.add("Call", "unknown call, \(size) bytes, selector \(EVMText.hex(selector))")
            if let claimed {
                summary.warn(
                    "the data starts with the selector of \(claimed) but its arguments are not the standard encoding: "
                        + "the contract may do something else; only sign if you trust the app")
            } else {
                summary.warn("the call is not decoded: the wallet cannot show what it does; only sign if you trust the app")
            }
        }
    }

    private static func describeToken(_ token: KnownToken?, contract: String, into summary: inout SigningSummary) {
        if let token {
            summary.add("Token", "\(token.label), \(token.decimals) decimals, contract \(contract)")
        } else {
            summary.add("Token", "unknown token at \(contract): not in the wallet's list, its amount is in raw units")
        }
    }

    /// "1.5 USDC", or "1500000 raw units (unknown token, decimals not known)".
    static func tokenAmount(_ amount: UInt256, token: KnownToken?) -> String {
        guard let token else { return "\(amount) raw units (unknown token, decimals not known)" }
        return EVMText.amount(amount, decimals: token.decimals, unit: token.symbol)
    }
}
