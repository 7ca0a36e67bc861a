import RainCore
import RainCrypto
import Testing

/// The OpenSSL key types RainWebAuthn adds to RainCrypto.
@Suite struct CryptoKeyTests {
    // RFC 6979 A.2.5: P-256, SHA-256, message "sample".
    static let rfc6979PrivateKey = "c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721"
    static let rfc6979X = "60fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6"
    static let rfc6979Y = "7903fe1008b8bc99a41ae9e95628bc64f2f1b20c2d7e9f5177a3c294d4462299"
    static let rfc6979Signature =
        "3046022100efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716"
        + "022100f7cb1c942d657c41d436c7a1b6e29f65f3e900dbb9aff4064dc4ab2f843acda8"

    @Test func p256VerifiesTheRFC6979Vector() throws {
        let key = try P256PublicKey(x: try hexBytes(Self.rfc6979X), y: try hexBytes(Self.rfc6979Y))
        let signature = try hexBytes(Self.rfc6979Signature)
        let message = Array("sample".utf8)
        #expect(key.isValidSignature(derSignature: signature, for: message))
        #expect(!key.isValidSignature(derSignature: signature, for: Array("samplf".utf8)))
        // A signature with a trailing byte is not DER.
        #expect(!key.isValidSignature(derSignature: signature + [0], for: message))
        #expect(!key.isValidSignature(derSignature: [], for: message))
    }

    @Test func p256PrivateKeyFromItsScalar() throws {
        let key = try P256PrivateKey(rawRepresentation: try hexBytes(Self.rfc6979PrivateKey))
        #expect(Hex.encode(key.publicKey.x) == Self.rfc6979X)
        #expect(Hex.encode(key.publicKey.y) == Self.rfc6979Y)
        #expect(Hex.encode(key.rawRepresentation) == Self.rfc6979PrivateKey)
        let message = Array("ES256".utf8)
        #expect(key.publicKey.isValidSignature(derSignature: try key.signature(for: message), for: message))
        #expect("\(key)" == "P256PrivateKey(<redacted>)")
    }

    @Test func p256GeneratedKeysSignAndRestore() throws {
        let key = try P256PrivateKey()
        let other = try P256PrivateKey()
        #expect(key.publicKey != other.publicKey)
        let message = Array("message".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.first == 0x30)
        #expect(key.publicKey.isValidSignature(derSignature: signature, for: message))
        #expect(!other.publicKey.isValidSignature(derSignature: signature, for: message))
        let restored = try P256PrivateKey(rawRepresentation: key.rawRepresentation)
        #expect(restored.publicKey == key.publicKey)
        #expect(try P256PublicKey(derRepresentation: key.publicKey.derRepresentation) == key.publicKey)
        #expect(try P256PublicKey(x963Representation: key.publicKey.x963Representation) == key.publicKey)
    }

    @Test func p256RefusesBadScalarsAndPoints() throws {
        #expect(throws: RainError.self) { try P256PrivateKey(rawRepresentation: Array(repeating: 0, count: 32)) }
        #expect(throws: RainError.self) { try P256PrivateKey(rawRepresentation: Array(repeating: 0xFF, count: 32)) }
        #expect(throws: RainError.self) { try P256PrivateKey(rawRepresentation: [1]) }
        var y = try hexBytes(Self.rfc6979Y)
        y[31] ^= 1
        let x = try hexBytes(Self.rfc6979X)
        let error = expectRainError(.invalidArgument) { () throws(RainError) in
            _ = try P256PublicKey(x: x, y: y)
        }
        #expect(error?.details.reason == "not_on_curve")
        let short = expectRainError(.invalidArgument) { () throws(RainError) in
            _ = try P256PublicKey(x: [1], y: [2])
        }
        #expect(short?.details.reason == "wrong_length")
    }

    @Test func ed25519PointCheck() throws {
        #expect(Ed25519PublicKeyFixture.key.isOnCurve)
        for _ in 0..<8 { #expect(try Ed25519PrivateKey().publicKey.isOnCurve) }
        // y = 1 is the neutral element (x = 0); with the sign bit set it has no encoding.
        #expect(try Ed25519PublicKey(rawRepresentation: [1] + Array(repeating: 0, count: 31)).isOnCurve)
        #expect(try !Ed25519PublicKey(rawRepresentation: [1] + Array(repeating: 0, count: 30) + [0x80]).isOnCurve)
        for y: UInt8 in [2, 7, 8, 11] {
            #expect(try !Ed25519PublicKey(rawRepresentation: [y] + Array(repeating: 0, count: 31)).isOnCurve)
        }
        #expect(try !Ed25519PublicKey(rawRepresentation: [0xED] + Array(repeating: 0xFF, count: 30) + [0x7F]).isOnCurve)
    }

    @Test func rsaVerifiesTheFixedVectorAndRefusesBadKeys() throws {
        let modulus = try hexBytes(RS256Vector.modulus.filter { !$0.isWhitespace })
        let key = try RSAPublicKey(modulus: [0, 0] + modulus, exponent: [0, 1, 0, 1])
        #expect(key.modulus == modulus)
        #expect(key.exponent == [1, 0, 1])
        #expect(key.derRepresentation.count == 294)
        let message =
            SHA256.hash(Array("example.com".utf8)) + [0x05, 0, 0, 0, 7]
            + SHA256.hash(Array(RS256Vector.assertionClientDataJSON.utf8))
        let signature = try hexBytes(RS256Vector.assertionSignature.filter { !$0.isWhitespace })
        #expect(key.isValidSignature(signature, for: message))
        #expect(!key.isValidSignature(signature, for: message + [0]))
        #expect(!key.isValidSignature(Array(signature.dropFirst()), for: message))

        let small = expectRainError(.invalidArgument) { () throws(RainError) in
            _ = try RSAPublicKey(modulus: Array(modulus.prefix(128)), exponent: [1, 0, 1])
        }
        #expect(small?.details.reason == "unsupported_size")
        let exponentThree = expectRainError(.invalidArgument) { () throws(RainError) in
            _ = try RSAPublicKey(modulus: modulus, exponent: [3])
        }
        #expect(exponentThree?.details.reason == "malformed")
        #expect(throws: RainError.self) { try RSAPublicKey(modulus: Array(modulus.dropLast()) + [0x10], exponent: [1, 0, 1]) }
    }
}
