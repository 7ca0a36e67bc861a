import RainCore
import RainCrypto
import Testing

@testable import RainSigning

@Suite struct EVMMessageTests {
    typealias T = EVMTestSupport

    /// The digest is eth-account 0.14.0's `_hash_eip191_message(encode_defunct(text="Hello, Rain"))`.
    @Test func aTextMessageIsSignedWithTheEIP191PrefixAndShownAsText() throws {
        let prepared = try T.prepare(.message, Array("Hello, Rain".utf8))
        #expect(prepared.signedBytes == Array("\u{19}Ethereum Signed Message:\n11Hello, Rain".utf8))
        #expect(
            prepared.input == .secp256k1Digest(T.bytes("3711c9f32de0b0954fd7b25cc90c6e994a4cdb7a77a732bcf757f74ba20ee24f")))
        #expect(T.value(prepared.summary, "Message") == "Hello, Rain")
        #expect(T.value(prepared.summary, "Format") == "text, 11 bytes")
        #expect(T.value(prepared.summary, "Chain") == "any chain: a message names none")
        #expect(T.value(prepared.summary, "From") == T.walletAddress)
        #expect(T.warnings(prepared.summary).isEmpty)
        let r = [UInt8](repeating: 3, count: 32)
        let s = [UInt8](repeating: 4, count: 32)
        #expect(try prepared.finish(RecoverableSignature(r: r, s: s, recoveryID: 1)).signature == r + s + [28])
        #expect(try prepared.finish(RecoverableSignature(r: r, s: s, recoveryID: 0)).signature == r + s + [27])
    }

    @Test func aBinaryMessageIsShownAsHexWithItsSize() throws {
        let prepared = try T.prepare(.message, [0xFF, 0x00, 0xC3])
        #expect(T.value(prepared.summary, "Message") == "0xff00c3")
        #expect(T.value(prepared.summary, "Format") == "binary, 3 bytes")
        #expect(prepared.signedBytes == Array("\u{19}Ethereum Signed Message:\n3".utf8) + [0xFF, 0x00, 0xC3])
    }

    @Test func aThirtyTwoByteMessageMayBeAHashAndIsAWarning() throws {
        let prepared = try T.prepare(.message, Keccak256.hash([1, 2, 3]))
        #expect(T.warnings(prepared.summary) == ["this may be a hash: only sign what you can read"])
        #expect(T.value(prepared.summary, "Format") == "binary, 32 bytes")
        let text = try T.prepare(.message, Array(String(repeating: "a", count: 32).utf8))
        #expect(T.warnings(text.summary).count == 1)
    }

    @Test func aNamedChainMustBeSupported() throws {
        let onBase = try T.prepare(.message, Array("hi".utf8), chainID: 8453)
        #expect(T.value(onBase.summary, "Chain") == "Base (8453)")
        T.expectRefusal(.chainNotSupported, field: "chainId", reason: "chain_not_supported") {
            _ = try T.prepare(.message, Array("hi".utf8), chainID: 56)
        }
    }

    @Test func aMessageIsAtMost64KiB() throws {
        _ = try T.prepare(.message, [UInt8](repeating: 0x61, count: 64 * 1024))
        T.expectRefusal(.invalidArgument, field: "message", reason: "too_large") {
            _ = try T.prepare(.message, [UInt8](repeating: 0x61, count: 64 * 1024 + 1))
        }
    }

    @Test func aMessageFromAnotherAccountIsRefused() {
        T.expectRefusal(.invalidArgument, field: "from", reason: "from_mismatch") {
            _ = try T.prepare(.message, Array("hi".utf8), from: "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB")
        }
    }
}
