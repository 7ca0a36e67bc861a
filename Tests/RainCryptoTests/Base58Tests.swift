import RainCore
@testable import RainCrypto
import Testing

@Suite struct Base58Tests {
    // Bitcoin Core's src/test/data/base58_encode_decode.json and draft-msporny-base58's examples
    // ("Hello World!", leading zero bytes, the quick brown fox).
    static let vectors: [(hex: String, text: String)] = [
        ("", ""),
        ("00", "1"),
        ("61", "2g"),
        ("626262", "a3gV"),
        ("636363", "aPEr"),
        ("73696d706c792061206c6f6e6720737472696e67", "2cFupjhnEsSn59qHXstmK2ffpLv2"),
        ("00eb15231dfceb60925886b67d065299925915aeb172c06647", "1NS17iag9jJgTHD1VXjvLCEnZuQ3rJDE9L"),
        ("516b6fcd0f", "ABnLTmg"),
        ("bf4f89001e670274dd", "3SEo3LWLoPntC"),
        ("572e4794", "3EFU7m"),
        ("ecac89cad93923c02321", "EJDM8drfXA6uyA"),
        ("10c8511e", "Rt5zm"),
        ("00000000000000000000", "1111111111"),
        (Hex.encode(Array("Hello World!".utf8)), "2NEpo7TZRRrLZSi2U"),
        ("0000287fb4cd", "11233QC4"),
        (
            Hex.encode(Array("The quick brown fox jumps over the lazy dog".utf8)),
            "7DdiPPYtxLjCD3wA1po2rvZHTDYjkZYiEtazrfiwJcwnKCizhGFhBGHeRdx"
        ),
    ]

    @Test(arguments: vectors)
    func encodes(hex: String, text: String) throws {
        #expect(Base58.encode(try hexBytes(hex)) == text)
    }

    @Test(arguments: vectors)
    func decodes(hex: String, text: String) throws {
        #expect(Base58.decode(text) == (try hexBytes(hex)))
    }

    @Test func roundTripsRandomBytesWithLeadingZeros() throws {
        for round in 0..<300 {
            let zeros = round % 6
            let body = try SecureRandom.bytes(count: Int(try SecureRandom.uniform(upperBound: 70)))
            let bytes = [UInt8](repeating: 0, count: zeros) + body
            let text = Base58.encode(bytes)
            #expect(Base58.decode(text) == bytes)
            // One '1' for each leading zero byte, and no more.
            let leadingZeros = bytes.prefix { $0 == 0 }.count
            #expect(text.prefix { $0 == "1" }.count == leadingZeros)
        }
    }

    @Test(arguments: ["0", "O", "I", "l", " 2g", "2g ", "2g\n", "a+b", "é", "2g\u{0}"])
    func refusesCharactersOutsideTheAlphabet(text: String) {
        #expect(Base58.decode(text) == nil)
    }

    @Test func checkedEncodingRoundTripsAndDetectsAChangedCharacter() throws {
        // Version 00 and a HASH160: the address that the Bitcoin genesis block pays.
        let payload = try hexBytes("0062e907b15cbf27d5425399ebf6f0fb50ebb88f18")
        let text = Base58.encodeChecked(payload)
        #expect(text == "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa")
        #expect(Base58.decodeChecked(text) == payload)
        var characters = Array(text)
        characters[10] = characters[10] == "a" ? "b" : "a"
        #expect(Base58.decodeChecked(String(characters)) == nil)
        #expect(Base58.decodeChecked("1") == nil)
    }
}
