import RainCore
@testable import RainCrypto
import Testing

@Suite struct SHA256Tests {
    // FIPS 180-4 examples (NIST CSRC "Examples with intermediate values").
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
    ])
    func nistVectors(message: String, digest: String) throws {
        let result = SHA256.hash(Array(message.utf8))
        #expect(result.count == 32)
        #expect(Hex.encode(result) == digest)
    }

    @Test func millionAs() {
        let result = SHA256.hash([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))
        #expect(Hex.encode(result) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}

@Suite struct HMACSHA256Tests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var name: String
        var key: String
        var data: String
        var mac: String
        var testDescription: String { name }
    }

    // RFC 4231 §4.2, §4.3, §4.5 and §4.7 (a key longer than the block size).
    static let vectors: [Vector] = [
        Vector(
            name: "RFC 4231 case 1", key: String(repeating: "0b", count: 20),
            data: Hex.encode(Array("Hi There".utf8)),
            mac: "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        Vector(
            name: "RFC 4231 case 2", key: Hex.encode(Array("Jefe".utf8)),
            data: Hex.encode(Array("what do ya want for nothing?".utf8)),
            mac: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        Vector(
            name: "RFC 4231 case 4", key: "0102030405060708090a0b0c0d0e0f10111213141516171819",
            data: String(repeating: "cd", count: 50),
            mac: "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        Vector(
            name: "RFC 4231 case 6", key: String(repeating: "aa", count: 131),
            data: Hex.encode(Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)),
            mac: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
    ]

    @Test(arguments: vectors)
    func rfc4231(vector: Vector) throws {
        let key = SymmetricKey(bytes: try hexBytes(vector.key))
        let mac = HMACSHA256.authenticate(try hexBytes(vector.data), key: key)
        #expect(Hex.encode(mac) == vector.mac)
    }

    @Test func emptyKeyAndMessage() {
        // HMAC-SHA256("", "") from Python's hmac module.
        let mac = HMACSHA256.authenticate([], key: SymmetricKey(bytes: []))
        #expect(Hex.encode(mac) == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    @Test func differentKeysGiveDifferentMACs() {
        let message = Array("message".utf8)
        let a = HMACSHA256.authenticate(message, key: SymmetricKey(bytes: [1, 2, 3]))
        let b = HMACSHA256.authenticate(message, key: SymmetricKey(bytes: [1, 2, 4]))
        #expect(a != b)
    }
}

@Suite struct HKDFSHA256Tests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var name: String
        var ikm: String
        var salt: String
        var info: String
        var length: Int
        var okm: String
        var testDescription: String { name }
    }

    // RFC 5869 appendix A, test cases 1 to 3.
    static let vectors: [Vector] = [
        Vector(
            name: "RFC 5869 case 1", ikm: String(repeating: "0b", count: 22), salt: "000102030405060708090a0b0c",
            info: "f0f1f2f3f4f5f6f7f8f9", length: 42,
            okm: "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"),
        Vector(
            name: "RFC 5869 case 2",
            ikm: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
                + "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
                + "404142434445464748494a4b4c4d4e4f",
            salt: "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
                + "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
                + "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
            info: "b0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
                + "d0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeef"
                + "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
            length: 82,
            okm: "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
                + "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
                + "cc30c58179ec3e87c14c01d5c1f3434f1d87"),
        Vector(
            name: "RFC 5869 case 3", ikm: String(repeating: "0b", count: 22), salt: "", info: "", length: 42,
            okm: "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"),
    ]

    @Test(arguments: vectors)
    func rfc5869(vector: Vector) throws {
        let ikm = SymmetricKey(bytes: try hexBytes(vector.ikm))
        let key = try HKDFSHA256.deriveKey(
            from: ikm, salt: try hexBytes(vector.salt), info: try hexBytes(vector.info),
            outputByteCount: vector.length)
        #expect(key.byteCount == vector.length)
        #expect(Hex.encode(keyBytes(key)) == vector.okm)
    }

    @Test func stringInfoIsItsUTF8() throws {
        let ikm = SymmetricKey(bytes: [UInt8](repeating: 7, count: 32))
        let viaString = try HKDFSHA256.deriveKey(from: ikm, salt: [1, 2], info: "rain/storage/v1")
        let viaBytes = try HKDFSHA256.deriveKey(
            from: ikm, salt: [1, 2], info: Array("rain/storage/v1".utf8), outputByteCount: 32)
        #expect(viaString.byteCount == 32)
        #expect(keyBytes(viaString) == keyBytes(viaBytes))
        let other = try HKDFSHA256.deriveKey(from: ikm, salt: [1, 2], info: "rain/storage/v2")
        #expect(keyBytes(other) != keyBytes(viaString))
    }

    @Test func shorterOutputIsAPrefix() throws {
        let ikm = SymmetricKey(bytes: [UInt8](repeating: 9, count: 32))
        let long = try HKDFSHA256.deriveKey(from: ikm, salt: [], info: "x", outputByteCount: 255 * 32)
        let short = try HKDFSHA256.deriveKey(from: ikm, salt: [], info: "x", outputByteCount: 45)
        #expect(long.byteCount == 8160)
        #expect(Array(keyBytes(long).prefix(45)) == keyBytes(short))
    }

    @Test(arguments: [0, -1, 255 * 32 + 1])
    func refusesOutputLengthOutOfRange(length: Int) {
        let ikm = SymmetricKey(bytes: [1])
        let error = #expect(throws: RainError.self) {
            try HKDFSHA256.deriveKey(from: ikm, salt: [], info: "", outputByteCount: length)
        }
        #expect(error?.code == .invalidArgument)
    }
}
