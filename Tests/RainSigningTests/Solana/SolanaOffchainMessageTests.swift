import RainCore
import RainCrypto
import Testing

@testable import RainSigning

@Suite struct SolanaOffchainMessageTests {
    typealias V = SolanaVectors

    static let domain = "ff736f6c616e61206f6666636861696e"  // "\xffsolana offchain"

    func prepare(_ text: [UInt8]) throws -> PreparedSigning {
        try SolanaSigning.prepare(V.message(text), wallet: V.wallet())
    }

    @Test func anASCIIMessageIsWrappedAsSolanaSdkSerializesIt() throws {
        // solana-sdk's own test (offchain_message.rs, test_offchain_message_ascii): these bytes,
        // and "HG5JydBGjtjTfD3sSn21ys5NTWPpXzmqifiGC2BVUjkD" as their SHA-256 in base58.
        let prepared = try prepare(Array("Test Message".utf8))
        #expect(Hex.encode(prepared.signedBytes) == Self.domain + "00" + "00" + "0c00" + "54657374204d657373616765")
        #expect(Base58.encode(prepared.signedBytesHash) == "HG5JydBGjtjTfD3sSn21ys5NTWPpXzmqifiGC2BVUjkD")
        #expect(prepared.input == .ed25519Message(prepared.signedBytes))
        #expect(
            prepared.summary
                == SigningSummary(
                    title: "Sign a message (Solana off-chain)",
                    lines: [.init("Message", "Test Message"), .init("Signer", V.walletAddress)]))

        let result = try prepared.finish(V.sign(prepared))
        #expect(result.signature == (try V.walletKey().signature(for: prepared.signedBytes)))
        #expect(try V.walletKey().publicKey.isValidSignature(result.signature, for: prepared.signedBytes))
        #expect(result.signedTransaction.isEmpty && result.transactionHash.isEmpty)
    }

    @Test func aUTF8MessageIsWrappedAsSolanaSdkSerializesIt() throws {
        // solana-sdk's test_offchain_message_utf8: format 1, 35 bytes, hash 6GXTveat….
        let prepared = try prepare(Array("Тестовое сообщение".utf8))
        #expect(
            Hex.encode(prepared.signedBytes)
                == Self.domain + "00" + "01" + "2300"
                + "d0a2d0b5d181d182d0bed0b2d0bed0b520d181d0bed0bed0b1d189d0b5d0bdd0b8d0b5")
        #expect(Base58.encode(prepared.signedBytesHash) == "6GXTveatZQLexkX4WeTpJ3E7uk1UojRXpKp43c4ArSun")
        #expect(prepared.summary.lines.first == .init("Message", "Тестовое сообщение"))
    }

    @Test func aMessageLongerThanALedgerTakesIsExtendedUTF8() throws {
        let long = [UInt8](repeating: 0x61, count: 1213)
        let prepared = try prepare(long)
        #expect(Array(prepared.signedBytes.prefix(20)) == V.bytes(Self.domain + "00" + "02" + "bd04"))
        #expect(Array(prepared.signedBytes.dropFirst(20)) == long)

        let longest = [UInt8](repeating: 0x61, count: 65515)
        #expect(Array(try prepare(longest).signedBytes[16..<20]) == [0, 2, 0xeb, 0xff])
    }

    @Test func theMostRestrictiveFormatThatFitsIsChosen() throws {
        #expect(try prepare([UInt8](repeating: 0x7e, count: 1212)).signedBytes[17] == 0)
        #expect(try prepare([0x20]).signedBytes[17] == 0)
        // A line feed is not printable ASCII.
        #expect(try prepare(Array("a\nb".utf8)).signedBytes[17] == 1)
        #expect(try prepare([UInt8](repeating: 0x61, count: 1211) + [0x7f]).signedBytes[17] == 1)
        #expect(try prepare([UInt8](repeating: 0x61, count: 1210) + Array("é".utf8)).signedBytes[17] == 1)
        #expect(try prepare([UInt8](repeating: 0x61, count: 1211) + Array("é".utf8)).signedBytes[17] == 2)
    }

    @Test func emptyTextInvalidUTF8AndTooLongTextAreRefused() throws {
        let wallet = try V.wallet()
        V.expectRefusal(V.message([]), wallet: wallet, field: "message", reason: "empty")
        V.expectRefusal(V.message([0x61, 0xff, 0x62]), wallet: wallet, field: "message", reason: "not_utf8")
        // An overlong encoding of "/" and a lone surrogate are not UTF-8 either.
        V.expectRefusal(V.message([0xc0, 0xaf]), wallet: wallet, field: "message", reason: "not_utf8")
        V.expectRefusal(V.message([0xed, 0xa0, 0x80]), wallet: wallet, field: "message", reason: "not_utf8")
        V.expectRefusal(
            V.message([UInt8](repeating: 0x61, count: 65516)), wallet: wallet, field: "message", reason: "too_long")
        V.expectRefusal(
            V.message(Array("hello".utf8), from: V.bobAddress), wallet: wallet, field: "from", reason: "from_mismatch")
    }

    @Test(arguments: [
        ("a legacy message", V.legacyMessage), ("a v0 message", V.v0Message),
        ("a v0 message with two tables", V.lookupsMessage), ("a signed legacy transaction", V.legacyTransaction),
        ("a signed v0 transaction", V.v0Transaction), ("a transaction with two signatures", V.cosignedTransaction),
    ])
    func bytesThatAreATransactionAreNotSignedAsAMessage(_ name: String, _ bytes: [UInt8]) throws {
        V.expectRefusal(V.message(bytes), wallet: try V.wallet(), field: "message", reason: "message_is_transaction")
    }

    @Test func aTransactionThatIsValidUTF8IsStillRefused() throws {
        // Every byte below 0x80, so the check cannot lean on the UTF-8 one: a legacy message with
        // ASCII keys, an ASCII blockhash and an ASCII call.
        let key = { (byte: UInt8) in [UInt8](repeating: byte, count: 32) }
        var message = SolanaTestMessage(header: [1, 0, 1], keys: [key(0x41), key(0x42)], blockhash: key(0x43))
        message.instructions = [.init(program: 1, accounts: [0], data: Array("hi".utf8))]
        #expect(String(validating: message.bytes, as: UTF8.self) != nil)
        V.expectRefusal(V.message(message.bytes), wallet: try V.wallet(), field: "message", reason: "message_is_transaction")
        // With its signature count and an ASCII "signature" in front, too.
        V.expectRefusal(
            V.message([1] + [UInt8](repeating: 0x53, count: 64) + message.bytes), wallet: try V.wallet(), field: "message",
            reason: "message_is_transaction")
    }
}
