import Foundation
import RainCore
import RainCrypto
import Testing

@testable import RainSigning

@Suite struct SupportedChainsTests {
    @Test func theSevenEVMChainsOfTheTableAreSupportedAndNoOther() throws {
        #expect(SupportedChains.evm.map(\.id) == [1, 10, 137, 8453, 42161, 11_155_111, 84532])
        #expect(SupportedChains.evm.allSatisfy { $0.nativeDecimals == 18 })
        #expect(try SupportedChains.evm(id: 8453).name == "Base")
        do {
            _ = try SupportedChains.evm(id: 56)
            Issue.record("chain 56 was accepted")
        } catch {
            #expect(error.code == .chainNotSupported)
            #expect(error.details.field == "chainId")
            #expect(error.message.contains("8453 Base"))
        }
    }

    @Test func everyKnownEVMTokenIsOnASupportedChainWithAWellFormedAddress() {
        for token in SupportedChains.tokens {
            if let chainID = token.chainID {
                #expect(SupportedChains.evm.contains { $0.id == chainID }, "\(token.symbol) on \(chainID)")
                #expect(token.address.count == 40 && Hex.decode(token.address) != nil, "\(token.address)")
            } else {
                #expect(Base58.decode(token.address)?.count == 32, "\(token.address)")
            }
        }
        let usdcE = SupportedChains.token(
            chainID: 137, contract: Hex.decode("2791bca1f2de4661ed88a30c99a7a9449aa84174") ?? [])
        #expect(usdcE?.label == "USDC.e (bridged)")
        #expect(
            SupportedChains.token(chainID: 8453, contract: Hex.decode("a0b86991c6218b36c1d19d4a2e9eb0ce3606eb48") ?? []) == nil)
        #expect(SupportedChains.solanaToken(mint: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")?.symbol == "USDC")
    }

    @Test func amountsKeepEveryDigit() {
        #expect(AmountText.decimal("1500000", decimals: 6) == "1.5")
        #expect(AmountText.decimal("5", decimals: 18) == "0.000000000000000005")
        #expect(AmountText.decimal("0", decimals: 18) == "0")
        #expect(AmountText.decimal("1000000", decimals: 6) == "1")
        #expect(
            AmountText.decimal(
                "115792089237316195423570985008687907853269984665640564039457584007913129639935", decimals: 18)
                == "115792089237316195423570985008687907853269984665640564039457.584007913129639935")
        #expect(AmountText.decimal("42", decimals: 0) == "42")
    }
}

@Suite struct SupportedChainsDocumentationTests {
    @Test func theTableInDocsSigningIsTheTableInCode() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/signing.md"), encoding: .utf8)
        let rows = text.split(separator: "\n").filter { $0.hasPrefix("| ") && $0.dropFirst(2).first?.isNumber == true }
        let documented = rows.compactMap { row -> (UInt64, String, String)? in
            let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3, let id = UInt64(cells[0]) else { return nil }
            return (id, cells[1].replacingOccurrences(of: " (test network)", with: ""), cells[2])
        }
        #expect(documented.map(\.0) == SupportedChains.evm.map(\.id))
        for (chain, row) in zip(SupportedChains.evm, documented) {
            #expect(row.1 == chain.name)
            #expect(row.2 == chain.nativeSymbol)
        }
    }
}
