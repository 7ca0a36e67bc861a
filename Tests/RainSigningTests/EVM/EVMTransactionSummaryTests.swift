import RainCore
import Testing

@testable import RainSigning

@Suite struct EVMTransactionSummaryTests {
    typealias T = EVMTestSupport

    static let usdcOnBase = T.bytes("833589fcd6edb6e08f4c7c32d4f71b54bda02913")
    static let recipient = "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826"
    static let unknownToken = T.bytes("1234567890123456789012345678901234567890")

    static func word(_ bytes: [UInt8]) -> [UInt8] { [UInt8](repeating: 0, count: 32 - bytes.count) + bytes }

    /// A type 2 call on Base to `contract` with `data`.
    static func call(_ contract: [UInt8]?, _ data: [UInt8], value: UInt64 = 0, chainID: UInt64 = 8453) throws(RainError)
        -> SigningSummary
    {
        let payload =
            [0x02]
            + RLP.encode(
                .list([
                    RLP.integer(UInt256(chainID)), RLP.integer(UInt256(3)), RLP.integer(UInt256(1_000_000)),
                    RLP.integer(UInt256(2_000_000_000)), RLP.integer(UInt256(100_000)), .bytes(contract ?? []),
                    RLP.integer(UInt256(value)), .bytes(data), .list([]),
                ]))
        return try T.prepare(.transaction, payload).summary
    }

    static func transfer(to: [UInt8], amount: UInt256) -> [UInt8] {
        EVMCall.transferSelector + word(to) + amount.bigEndianBytes
    }

    @Test func aUSDCTransferOnBaseShowsTheTokenTheAmountAndTheRecipient() throws {
        let summary = try Self.call(Self.usdcOnBase, Self.transfer(to: T.bytes(Self.recipient), amount: UInt256(1_500_000)))
        #expect(summary.title == "Sign a transaction on Base (8453)")
        #expect(T.value(summary, "Call") == "ERC-20 transfer")
        #expect(
            T.value(summary, "Token")?.hasPrefix("USDC, 6 decimals, contract 0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913") == true)
        #expect(T.value(summary, "Token amount") == "1.5 USDC")
        #expect(T.value(summary, "Token recipient") == Self.recipient)
        #expect(T.value(summary, "To") == "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913")
        #expect(T.value(summary, "Value") == "0 ETH")
        #expect(T.value(summary, "Max network fee") == "0.0002 ETH (gas limit 100000 × 2 gwei)")
        #expect(T.value(summary, "Max fee per gas") == "2 gwei")
        #expect(T.value(summary, "Max priority fee") == "0.001 gwei")
        #expect(T.value(summary, "Data") == "68 bytes")
        #expect(T.warnings(summary).isEmpty)
    }

    @Test func aBridgedTokenIsLabelledBridged() throws {
        let usdcE = T.bytes("2791bca1f2de4661ed88a30c99a7a9449aa84174")
        let summary = try Self.call(usdcE, Self.transfer(to: T.bytes(Self.recipient), amount: UInt256(2_000_000)), chainID: 137)
        #expect(T.value(summary, "Token")?.hasPrefix("USDC.e (bridged), 6 decimals") == true)
        #expect(T.value(summary, "Token amount") == "2 USDC.e")
    }

    @Test func aTokenNotInTheListIsShownInRawUnitsAsUnknown() throws {
        let summary = try Self.call(Self.unknownToken, Self.transfer(to: T.bytes(Self.recipient), amount: UInt256(1_500_000)))
        #expect(T.value(summary, "Token")?.contains("unknown token at 0x1234567890123456789012345678901234567890") == true)
        #expect(T.value(summary, "Token amount") == "1500000 raw units (unknown token, decimals not known)")
        // USDC's Ethereum contract is not USDC on Base.
        let mainnetUSDC = T.bytes("a0b86991c6218b36c1d19d4a2e9eb0ce3606eb48")
        let onBase = try Self.call(mainnetUSDC, Self.transfer(to: T.bytes(Self.recipient), amount: UInt256(1)))
        #expect(T.value(onBase, "Token")?.hasPrefix("unknown token") == true)
    }

    @Test func anUnlimitedApprovalIsAWarning() throws {
        let spender = T.bytes("1111111254EEB25477B68fb85Ed929f73A960582")
        let summary = try Self.call(Self.usdcOnBase, EVMCall.approveSelector + Self.word(spender) + UInt256.max.bigEndianBytes)
        #expect(T.value(summary, "Call") == "ERC-20 approve")
        #expect(T.value(summary, "Allowance") == "unlimited")
        #expect(T.value(summary, "Spender") == "0x1111111254EEB25477B68fb85Ed929f73A960582")
        let warnings = T.warnings(summary)
        #expect(warnings.count == 1)
        #expect(warnings.first?.hasPrefix("unlimited approval: 0x1111111254EEB25477B68fb85Ed929f73A960582") == true)
        #expect(warnings.first?.contains("USDC") == true)
    }

    @Test func aLimitedApprovalIsAWarningNamingTheAmount() throws {
        let spender = T.bytes("1111111254EEB25477B68fb85Ed929f73A960582")
        let summary = try Self.call(
            Self.usdcOnBase, EVMCall.approveSelector + Self.word(spender) + UInt256(25_000_000).bigEndianBytes)
        #expect(T.value(summary, "Allowance") == "25 USDC")
        #expect(
            T.warnings(summary) == [
                "approval: 0x1111111254EEB25477B68fb85Ed929f73A960582 can move up to 25 USDC from your account without asking again"
            ])
    }

    @Test func approvingAllOfACollectionIsAWarningAndRevokingIsNot() throws {
        let operatorAddress = T.bytes(Self.recipient)
        let approve = try Self.call(
            Self.unknownToken, EVMCall.setApprovalForAllSelector + Self.word(operatorAddress) + Self.word([1]))
        #expect(T.value(approve, "Call") == "setApprovalForAll")
        #expect(T.warnings(approve).first?.contains("all your NFTs of the collection") == true)
        let revoke = try Self.call(
            Self.unknownToken, EVMCall.setApprovalForAllSelector + Self.word(operatorAddress) + Self.word([0]))
        #expect(T.value(revoke, "Approved") == "no (revokes the operator)")
        #expect(T.warnings(revoke).isEmpty)
    }

    @Test func anUnknownSelectorShowsUnknownCallWithItsSelectorAndAWarning() throws {
        let summary = try Self.call(Self.usdcOnBase, [0x12, 0x34, 0x56, 0x78] + Self.word([5]))
        #expect(T.value(summary, "Call") == "unknown call, 36 bytes, selector 0x12345678")
        #expect(T.warnings(summary).count == 1)
    }

    @Test func dataShorterThanASelectorIsAnUnknownCallWithAWarning() throws {
        let summary = try Self.call(Self.usdcOnBase, [0xA9, 0x05, 0x9C])
        #expect(T.value(summary, "Call")?.hasPrefix("unknown call, 3 bytes") == true)
        #expect(T.warnings(summary).count == 1)
    }

    @Test func aKnownSelectorWithArgumentsThatAreNotTheABIEncodingIsUnknown() throws {
        let transfer = Self.transfer(to: T.bytes(Self.recipient), amount: UInt256(1))
        // A byte too many, and an address word with a non-zero high byte.
        var dirtyAddress = transfer
        dirtyAddress[4] = 1
        for data in [transfer + [0], dirtyAddress, Array(transfer.prefix(36))] {
            let summary = try Self.call(Self.usdcOnBase, data)
            #expect(T.value(summary, "Call")?.hasPrefix("unknown call") == true)
            #expect(T.warnings(summary).first?.contains("transfer(address,uint256)") == true)
        }
    }

    @Test func aPlainTransferAndAContractCreationSayWhatTheyAre() throws {
        let plain = try Self.call(T.bytes(Self.recipient), [], value: 1_500_000_000_000_000_000)
        #expect(T.value(plain, "Call") == "none: a plain ETH transfer")
        #expect(T.value(plain, "Value") == "1.5 ETH")
        #expect(T.warnings(plain).isEmpty)
        let creation = try Self.call(nil, [0x60, 0x80, 0x60, 0x40])
        #expect(T.value(creation, "To") == "new contract")
        #expect(T.value(creation, "Call") == "creates a contract from 4 bytes of code")
        #expect(T.warnings(creation).count == 1)
        let polygon = try Self.call(T.bytes(Self.recipient), [], chainID: 137)
        #expect(T.value(polygon, "Value") == "0 POL")
        let sepolia = try Self.call(T.bytes(Self.recipient), [], chainID: 11_155_111)
        #expect(T.value(sepolia, "Chain") == "Sepolia (11155111), a test network")
    }
}
