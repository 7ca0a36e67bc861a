import RainCore
import Testing

@testable import RainSigning

@Suite struct EIP712PermitTests {
    typealias T = EVMTestSupport

    static let spender = "0x1111111254EEB25477B68fb85Ed929f73A960582"
    static let usdcOnBase = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"

    static func permit(value: String, contract: String = usdcOnBase) -> String {
        #"""
        {"types": {
          "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                           {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"}],
          "Permit": [{"name": "owner", "type": "address"}, {"name": "spender", "type": "address"},
                     {"name": "value", "type": "uint256"}, {"name": "nonce", "type": "uint256"}, {"name": "deadline", "type": "uint256"}]},
         "primaryType": "Permit",
         "domain": {"name": "USD Coin", "version": "2", "chainId": 8453, "verifyingContract": "\#(contract)"},
         "message": {"owner": "0x9d8A62f656a8d1615C1294fd71e9CFb3E4855A4F", "spender": "\#(spender)",
                     "value": \#(value), "nonce": 0, "deadline": 1718000000}}
        """#
    }

    /// The digest is eth-account 0.14.0's for the same JSON (`encode_typed_data(full_message=…)`).
    @Test func anEIP2612PermitIsCalledOutAsAnApprovalWithSpenderAmountAndDeadline() throws {
        let prepared = try T.prepareTypedData(Self.permit(value: #""1500000""#))
        #expect(
            prepared.input == .secp256k1Digest(T.bytes("f1d13e9025bcac40e478ba0f9da241f8f59e7616d073dfe978fec5c6f1ef4214")))
        let summary = prepared.summary
        #expect(T.value(summary, "Approval") == "EIP-2612 permit: a signed token approval")
        #expect(T.value(summary, "Token")?.hasPrefix("USDC, 6 decimals, contract \(Self.usdcOnBase)") == true)
        #expect(
            T.warnings(summary) == [
                "approval: signing lets \(Self.spender) move up to 1.5 USDC from your account, "
                    + "until 2024-06-10 06:13:20 UTC (1718000000)"
            ])
        #expect(T.value(summary, "permit.value") == "1500000")
    }

    @Test func anUnlimitedPermitIsCalledOutAsUnlimited() throws {
        let summary = try T.prepareTypedData(Self.permit(value: UInt256.max.description)).summary
        #expect(
            T.warnings(summary).first?.hasPrefix("unlimited approval: signing lets \(Self.spender) move all of your USDC") == true
        )
    }

    @Test func aPermitForATokenNotInTheListShowsRawUnits() throws {
        let summary = try T.prepareTypedData(
            Self.permit(value: "42", contract: "0x1234567890123456789012345678901234567890")
        ).summary
        #expect(T.value(summary, "Token")?.hasPrefix("unknown token at 0x1234567890123456789012345678901234567890") == true)
        #expect(T.warnings(summary).first?.contains("up to 42 raw units (unknown token, decimals not known)") == true)
    }

    static let permit2Types = #"""
        "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "chainId", "type": "uint256"},
                         {"name": "verifyingContract", "type": "address"}],
        "PermitDetails": [{"name": "token", "type": "address"}, {"name": "amount", "type": "uint160"},
                          {"name": "expiration", "type": "uint48"}, {"name": "nonce", "type": "uint48"}],
        "TokenPermissions": [{"name": "token", "type": "address"}, {"name": "amount", "type": "uint256"}]
        """#
    static let permit2Domain =
        #""domain": {"name": "Permit2", "chainId": 8453, "verifyingContract": "0x000000000022D473030F116dDEE9F6B43aC78BA3"}"#

    @Test func aPermit2PermitSingleOfTwoToThe160MinusOneIsUnlimited() throws {
        let json = #"""
            {"types": {\#(Self.permit2Types),
              "PermitSingle": [{"name": "details", "type": "PermitDetails"}, {"name": "spender", "type": "address"},
                               {"name": "sigDeadline", "type": "uint256"}]},
             "primaryType": "PermitSingle", \#(Self.permit2Domain),
             "message": {"details": {"token": "\#(Self.usdcOnBase)", "amount": "1461501637330902918203684832716283019655932542975",
                                     "expiration": 1718000000, "nonce": 0},
                         "spender": "\#(Self.spender)", "sigDeadline": 1717000000}}
            """#
        let summary = try T.prepareTypedData(json).summary
        #expect(T.value(summary, "Approval") == "Uniswap Permit2 PermitSingle: a signed token approval")
        #expect(T.value(summary, "Token")?.hasPrefix("USDC, 6 decimals") == true)
        let warning = try #require(T.warnings(summary).first)
        #expect(warning.hasPrefix("unlimited approval: signing lets \(Self.spender) move all of your USDC"))
        #expect(warning.contains("allowance expires 2024-06-10 06:13:20 UTC (1718000000)"))
        #expect(warning.contains("signature valid until 2024-05-29 16:26:40 UTC (1717000000)"))
    }

    @Test func aPermit2BatchCallsOutEachTokenAndTheTransferKindsTheirDeadline() throws {
        let batch = #"""
            {"types": {\#(Self.permit2Types),
              "PermitBatch": [{"name": "details", "type": "PermitDetails[]"}, {"name": "spender", "type": "address"},
                              {"name": "sigDeadline", "type": "uint256"}]},
             "primaryType": "PermitBatch", \#(Self.permit2Domain),
             "message": {"details": [
                 {"token": "\#(Self.usdcOnBase)", "amount": 2500000, "expiration": 0, "nonce": 1},
                 {"token": "0x1234567890123456789012345678901234567890", "amount": 7, "expiration": 1718000000, "nonce": 1}],
               "spender": "\#(Self.spender)", "sigDeadline": 1717000000}}
            """#
        let warnings = T.warnings(try T.prepareTypedData(batch).summary)
        #expect(warnings.count == 2)
        #expect(warnings.first?.contains("move up to 2.5 USDC") == true)
        #expect(warnings.first?.contains("allowance expires the block it is used in") == true)
        #expect(warnings.last?.contains("up to 7 raw units") == true)

        let transfer = #"""
            {"types": {\#(Self.permit2Types),
              "PermitWitnessTransferFrom": [{"name": "permitted", "type": "TokenPermissions"}, {"name": "spender", "type": "address"},
                {"name": "nonce", "type": "uint256"}, {"name": "deadline", "type": "uint256"}, {"name": "witness", "type": "bytes32"}]},
             "primaryType": "PermitWitnessTransferFrom", \#(Self.permit2Domain),
             "message": {"permitted": {"token": "\#(Self.usdcOnBase)", "amount": "115792089237316195423570985008687907853269984665640564039457584007913129639935"},
               "spender": "\#(Self.spender)", "nonce": 9, "deadline": 1718000000,
               "witness": "0x0000000000000000000000000000000000000000000000000000000000000001"}}
            """#
        let transferWarnings = T.warnings(try T.prepareTypedData(transfer).summary)
        #expect(transferWarnings.count == 1)
        #expect(transferWarnings.first?.hasPrefix("unlimited approval") == true)
        #expect(transferWarnings.first?.contains("signature valid until 2024-06-10 06:13:20 UTC") == true)
    }
}
