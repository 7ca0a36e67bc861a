import RainCore
import RainCrypto
import Testing

@Suite struct ConstantTimeEqualsTests {
    @Test func comparesBytes() {
        #expect(constantTimeEquals([], []))
        #expect(constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEquals([0, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(!constantTimeEquals([], [0]))
    }

    @Test func everySingleBitDifferenceIsSeen() {
        let reference = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        var missed: [Int] = []
        for bit in 0..<(reference.count * 8) {
            var other = reference
            other[bit / 8] ^= 1 << (bit % 8)
            if constantTimeEquals(reference, other) { missed.append(bit) }
        }
        #expect(missed.isEmpty)
    }
}

@Suite struct Base64URLTests {
    // RFC 4648 §10 vectors (the base64url alphabet agrees on these).
    @Test(arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ])
    func rfc4648(text: String, encoded: String) {
        #expect(Base64URL.encode(Array(text.utf8)) == encoded)
        #expect(Base64URL.decode(encoded) == Array(text.utf8))
    }

    @Test func usesURLSafeAlphabet() {
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
        #expect(Base64URL.encode([0xFF]) == "_w")
    }

    @Test(arguments: [("Zg==", "f"), ("Zm8=", "fo"), ("Zm9v", "foo"), ("Zm9vYg==", "foob"), ("Zm9vYmE=", "fooba")])
    func acceptsPadding(encoded: String, text: String) {
        #expect(Base64URL.decode(encoded) == Array(text.utf8))
    }

    @Test(arguments: [
        "Z",  // a lone character cannot hold a byte
        "Zm9vY",  // length 1 mod 4
        "Zg=",  // partial padding
        "Zg===",  // too much padding
        "Zm8==",  // padding that does not match the length
        "Zm9v====",
        "=",
        "Z=g=",  // padding in the middle
        "Zm+v",  // standard alphabet
        "Zm/v",
        "Zm9 v",  // whitespace
        "Zm9v\n",
        "Zh",  // non-zero unused bits ("Zg" is the canonical form)
        "Zm9",  // non-zero unused bits ("Zm8" is the canonical form)
        "Zm9vé",
    ])
    func rejectsBadInput(encoded: String) {
        #expect(Base64URL.decode(encoded) == nil)
    }

    @Test func roundTripsEveryLengthAndByte() throws {
        var failures: [Int] = []
        for length in 0..<70 {
            let bytes = try SecureRandom.bytes(count: length)
            let encoded = Base64URL.encode(bytes)
            if encoded.contains("=") || encoded.contains("+") || encoded.contains("/") { failures.append(length) }
            if Base64URL.decode(encoded) != bytes { failures.append(length) }
        }
        let allBytes = (0...255).map { UInt8($0) }
        #expect(Base64URL.decode(Base64URL.encode(allBytes)) == allBytes)
        #expect(failures.isEmpty)
    }
}

@Suite struct HexTests {
    @Test func encodesLowercase() {
        #expect(Hex.encode([]) == "")
        #expect(Hex.encode([0x00, 0x0F, 0xA5, 0xFF]) == "000fa5ff")
    }

    @Test func decodesEitherCase() {
        #expect(Hex.decode("") == [])
        #expect(Hex.decode("000fa5ff") == [0x00, 0x0F, 0xA5, 0xFF])
        #expect(Hex.decode("000FA5FF") == [0x00, 0x0F, 0xA5, 0xFF])
    }

    @Test(arguments: ["0", "abc", "0g", "zz", " 00", "00 ", "0x00", "-1", "é0"])
    func rejectsBadInput(text: String) {
        #expect(Hex.decode(text) == nil)
    }

    @Test func roundTripsEveryByte() {
        let allBytes = (0...255).map { UInt8($0) }
        let encoded = Hex.encode(allBytes)
        #expect(encoded.count == 512)
        #expect(Hex.decode(encoded) == allBytes)
    }
}
