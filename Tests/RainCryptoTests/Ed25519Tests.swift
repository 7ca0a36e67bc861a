import RainCore
import RainCrypto
import Testing

@Suite struct Ed25519Tests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var name: String
        var secret: String
        var publicKey: String
        var message: String
        var signature: String
        var testDescription: String { name }
    }

    // RFC 8032 §7.1, tests 1 to 3.
    static let vectors: [Vector] = [
        Vector(
            name: "RFC 8032 test 1", secret: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            publicKey: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", message: "",
            signature:
                "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        ),
        Vector(
            name: "RFC 8032 test 2", secret: "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            publicKey: "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", message: "72",
            signature:
                "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
        ),
        Vector(
            name: "RFC 8032 test 3", secret: "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
            publicKey: "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", message: "af82",
            signature:
                "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"
        ),
    ]

    @Test(arguments: vectors)
    func rfc8032(vector: Vector) throws {
        let key = try Ed25519PrivateKey(rawRepresentation: try hexBytes(vector.secret))
        #expect(Hex.encode(key.rawRepresentation) == vector.secret)
        #expect(Hex.encode(key.publicKey.rawRepresentation) == vector.publicKey)
        let message = try hexBytes(vector.message)
        let signature = try key.signature(for: message)
        #expect(Hex.encode(signature) == vector.signature)

        let publicKey = try Ed25519PublicKey(rawRepresentation: try hexBytes(vector.publicKey))
        #expect(publicKey == key.publicKey)
        #expect(publicKey.isValidSignature(try hexBytes(vector.signature), for: message))
    }

    @Test func signAndVerifyWithAGeneratedKey() throws {
        let key = try Ed25519PrivateKey()
        let other = try Ed25519PrivateKey()
        #expect(key.rawRepresentation.count == 32)
        #expect(key.rawRepresentation != other.rawRepresentation)
        #expect(key.publicKey != other.publicKey)

        let message = Array("device enrollment challenge".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.count == 64)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(!other.publicKey.isValidSignature(signature, for: message))
        #expect(!key.publicKey.isValidSignature(signature, for: message + [0]))

        let restored = try Ed25519PrivateKey(rawRepresentation: key.rawRepresentation)
        #expect(restored.publicKey == key.publicKey)
        // Ed25519 is deterministic: the restored key makes the same signature.
        #expect(try restored.signature(for: message) == signature)
    }

    @Test func everyFlippedBitFailsVerification() throws {
        let key = try Ed25519PrivateKey()
        let message = Array("sign me".utf8)
        let signature = try key.signature(for: message)
        var accepted: [String] = []
        for bit in 0..<(signature.count * 8) {
            var flipped = signature
            flipped[bit / 8] ^= 1 << (bit % 8)
            if key.publicKey.isValidSignature(flipped, for: message) { accepted.append("signature bit \(bit)") }
        }
        for bit in 0..<(message.count * 8) {
            var flipped = message
            flipped[bit / 8] ^= 1 << (bit % 8)
            if key.publicKey.isValidSignature(signature, for: flipped) { accepted.append("message bit \(bit)") }
        }
        let publicBytes = key.publicKey.rawRepresentation
        for bit in 0..<(publicBytes.count * 8) {
            var flipped = publicBytes
            flipped[bit / 8] ^= 1 << (bit % 8)
            // Some flipped encodings are not points at all; those may be refused outright.
            guard let flippedKey = try? Ed25519PublicKey(rawRepresentation: flipped) else { continue }
            if flippedKey.isValidSignature(signature, for: message) { accepted.append("public key bit \(bit)") }
        }
        #expect(accepted.isEmpty, "accepted: \(accepted)")
        #expect(key.publicKey.isValidSignature(signature, for: message))
    }

    @Test func signaturesOfTheWrongLengthAreInvalid() throws {
        let key = try Ed25519PrivateKey()
        let signature = try key.signature(for: [1])
        #expect(!key.publicKey.isValidSignature(Array(signature.dropLast()), for: [1]))
        #expect(!key.publicKey.isValidSignature(signature + [0], for: [1]))
        #expect(!key.publicKey.isValidSignature([], for: [1]))
    }

    @Test(arguments: [0, 31, 33, 64])
    func refusesKeysOfTheWrongLength(length: Int) {
        let bytes = [UInt8](repeating: 1, count: length)
        #expect(throws: RainError.invalidArgument) { try Ed25519PrivateKey(rawRepresentation: bytes) }
        #expect(throws: RainError.invalidArgument) { try Ed25519PublicKey(rawRepresentation: bytes) }
    }

    @Test func privateKeyDescriptionIsRedacted() throws {
        let key = try Ed25519PrivateKey(rawRepresentation: [UInt8](repeating: 0xCD, count: 32))
        let text = "\(key) \(String(reflecting: key))"
        #expect(text.contains("<redacted>"))
        #expect(!text.lowercased().contains("cdcd"))
    }
}
