import RainCore
import RainCrypto
import RainWebAuthn
import Testing

@Suite struct COSEKeyTests {
    static func map(_ entries: [(Int64, CBORValue)]) -> [UInt8] {
        CBOREncoder.encode(.map(entries.map { CBORValue.MapEntry(.integer($0.0), $0.1) }))
    }

    static let x32 = CBORValue.bytes(Array(repeating: 1, count: 32))

    @Test(arguments: SignatureAlgorithm.allCases)
    func generatedKeysRoundTripAndVerify(algorithm: SignatureAlgorithm) throws {
        let key = try TestKey.make(algorithm.cose)
        let parsed = try COSEPublicKey(encoded: key.publicKey.encoded)
        #expect(parsed.algorithm == algorithm.cose)
        #expect(parsed.encoded == key.publicKey.encoded)
        let message = Array("authenticator data and client data hash".utf8)
        let signature = try key.sign(message)
        #expect(parsed.isValidSignature(signature, for: message))
        #expect(!parsed.isValidSignature(signature, for: message + [0]))
        var flipped = signature
        flipped[flipped.count - 1] ^= 1
        #expect(!parsed.isValidSignature(flipped, for: message))
        #expect(!parsed.isValidSignature([], for: message))
    }

    @Test func es256KeyHasTheCanonicalLayout() throws {
        let key = try P256PrivateKey()
        let encoded = COSEPublicKey(p256: key.publicKey).encoded
        // {1: 2, 3: -7, -1: 1, -2: x, -3: y}
        #expect(Array(encoded.prefix(10)) == [0xA5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20])
        #expect(encoded.count == 77)
        let parsed = try COSEPublicKey(encoded: encoded)
        guard case .p256(let point) = parsed.material else {
            Issue.record("not a P-256 key")
            return
        }
        #expect(point == key.publicKey)
        #expect(parsed.subjectPublicKeyInfo == key.publicKey.derRepresentation)
    }

    @Test func edDSAKeyHasTheCanonicalLayout() throws {
        let key = try Ed25519PrivateKey()
        let encoded = COSEPublicKey(ed25519: key.publicKey).encoded
        // {1: 1, 3: -8, -1: 6, -2: x}
        #expect(Array(encoded.prefix(10)) == [0xA4, 0x01, 0x01, 0x03, 0x27, 0x20, 0x06, 0x21, 0x58, 0x20])
        #expect(Array(encoded.suffix(32)) == key.publicKey.rawRepresentation)
        #expect(COSEPublicKey(ed25519: key.publicKey).subjectPublicKeyInfo.count == 44)
    }

    @Test func rs256KeyParses() throws {
        let key = try CeremonyTests.rs256Key()
        let parsed = try COSEPublicKey(encoded: key.encoded)
        #expect(parsed.algorithm == .rs256)
        guard case .rsa(let rsa) = parsed.material else {
            Issue.record("not an RSA key")
            return
        }
        #expect(rsa.exponent == [1, 0, 1])
        #expect(rsa.modulus.count == 256)
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var reason: WebAuthnFailure
        var testDescription: String { name }
    }

    static let p256Off: [(Int64, CBORValue)] = [(1, .integer(2)), (3, .integer(-7)), (-1, .integer(1)), (-2, x32), (-3, x32)]
    static let refusals: [Refusal] = [
        Refusal(name: "not CBOR", bytes: [0xFF], reason: .malformedPublicKey),
        Refusal(name: "trailing bytes", bytes: map([(1, .integer(1))]) + [0], reason: .malformedPublicKey),
        Refusal(name: "not a map", bytes: CBOREncoder.encode(.array([])), reason: .malformedPublicKey),
        Refusal(name: "no kty", bytes: map([(3, .integer(-7))]), reason: .malformedPublicKey),
        Refusal(
            name: "no alg", bytes: map([(1, .integer(2)), (-1, .integer(1)), (-2, x32), (-3, x32)]), reason: .malformedPublicKey),
        Refusal(name: "kty is text", bytes: map([(1, .text("EC2")), (3, .integer(-7))]), reason: .malformedPublicKey),
        Refusal(name: "kty 4 (symmetric)", bytes: map([(1, .integer(4)), (3, .integer(-7))]), reason: .unsupportedPublicKey),
        Refusal(name: "kty 0", bytes: map([(1, .integer(0)), (3, .integer(-7))]), reason: .unsupportedPublicKey),
        Refusal(
            name: "EC2 with alg -35 (ES384)",
            bytes: map([(1, .integer(2)), (3, .integer(-35)), (-1, .integer(2)), (-2, x32), (-3, x32)]),
            reason: .unsupportedPublicKey),
        Refusal(
            name: "EC2 on P-384", bytes: map([(1, .integer(2)), (3, .integer(-7)), (-1, .integer(2)), (-2, x32), (-3, x32)]),
            reason: .unsupportedPublicKey),
        Refusal(
            name: "EC2 with EdDSA", bytes: map([(1, .integer(2)), (3, .integer(-8)), (-1, .integer(1)), (-2, x32), (-3, x32)]),
            reason: .unsupportedPublicKey),
        Refusal(
            name: "EC2 without crv", bytes: map([(1, .integer(2)), (3, .integer(-7)), (-2, x32), (-3, x32)]),
            reason: .malformedPublicKey),
        Refusal(
            name: "EC2 x of 33 bytes",
            bytes: map([
                (1, .integer(2)), (3, .integer(-7)), (-1, .integer(1)), (-2, .bytes(Array(repeating: 1, count: 33))), (-3, x32),
            ]),
            reason: .malformedPublicKey),
        Refusal(
            name: "EC2 y missing", bytes: map([(1, .integer(2)), (3, .integer(-7)), (-1, .integer(1)), (-2, x32)]),
            reason: .malformedPublicKey),
        Refusal(
            name: "EC2 compressed (y is a bool)",
            bytes: map([(1, .integer(2)), (3, .integer(-7)), (-1, .integer(1)), (-2, x32), (-3, .bool(true))]),
            reason: .malformedPublicKey),
        Refusal(name: "EC2 point not on P-256", bytes: map(p256Off), reason: .publicKeyNotOnCurve),
        Refusal(
            name: "EC2 point (0, 0)",
            bytes: map([
                (1, .integer(2)), (3, .integer(-7)), (-1, .integer(1)), (-2, .bytes(Array(repeating: 0, count: 32))),
                (-3, .bytes(Array(repeating: 0, count: 32))),
            ]), reason: .publicKeyNotOnCurve),
        Refusal(
            name: "OKP X25519", bytes: map([(1, .integer(1)), (3, .integer(-8)), (-1, .integer(4)), (-2, x32)]),
            reason: .unsupportedPublicKey),
        Refusal(
            name: "OKP Ed448", bytes: map([(1, .integer(1)), (3, .integer(-8)), (-1, .integer(7)), (-2, x32)]),
            reason: .unsupportedPublicKey),
        Refusal(
            name: "OKP with ES256", bytes: map([(1, .integer(1)), (3, .integer(-7)), (-1, .integer(6)), (-2, x32)]),
            reason: .unsupportedPublicKey),
        Refusal(
            name: "OKP x of 31 bytes",
            bytes: map([(1, .integer(1)), (3, .integer(-8)), (-1, .integer(6)), (-2, .bytes(Array(repeating: 1, count: 31)))]),
            reason: .malformedPublicKey),
        Refusal(
            name: "OKP point not on Ed25519 (y = 2)",
            bytes: map([
                (1, .integer(1)), (3, .integer(-8)), (-1, .integer(6)), (-2, .bytes([2] + Array(repeating: 0, count: 31))),
            ]),
            reason: .publicKeyNotOnCurve),
        Refusal(
            name: "OKP y = p (not reduced)",
            bytes: map([
                (1, .integer(1)), (3, .integer(-8)), (-1, .integer(6)),
                (-2, .bytes([0xED] + Array(repeating: 0xFF, count: 30) + [0x7F])),
            ]),
            reason: .publicKeyNotOnCurve),
        Refusal(
            name: "RSA with PS256",
            bytes: map([(1, .integer(3)), (3, .integer(-37)), (-1, .bytes([1])), (-2, .bytes([1, 0, 1]))]),
            reason: .unsupportedPublicKey),
        Refusal(
            name: "RSA 1024-bit modulus",
            bytes: map([
                (1, .integer(3)), (3, .integer(-257)), (-1, .bytes([0xC1] + Array(repeating: 0x11, count: 127))),
                (-2, .bytes([1, 0, 1])),
            ]),
            reason: .unsupportedPublicKey),
        Refusal(
            name: "RSA even exponent",
            bytes: map([
                (1, .integer(3)), (3, .integer(-257)), (-1, .bytes([0xC1] + Array(repeating: 0x11, count: 255))),
                (-2, .bytes([1, 0, 0])),
            ]),
            reason: .malformedPublicKey),
        Refusal(
            name: "RSA without e",
            bytes: map([(1, .integer(3)), (3, .integer(-257)), (-1, .bytes([0xC1] + Array(repeating: 0x11, count: 255)))]),
            reason: .malformedPublicKey),
    ]

    @Test(arguments: refusals)
    func malformedOrUnsupportedKeysAreRefused(refusal: Refusal) {
        expectFailure(refusal.reason) { () throws(RainError) in _ = try COSEPublicKey(encoded: refusal.bytes) }
    }

    @Test func unknownLabelsAreIgnored() throws {
        let key = try P256PrivateKey()
        let entries: [(Int64, CBORValue)] = [
            (1, .integer(2)), (3, .integer(-7)), (-1, .integer(1)), (-2, .bytes(key.publicKey.x)), (-3, .bytes(key.publicKey.y)),
            (2, .bytes([1, 2, 3])),
        ]
        #expect(try COSEPublicKey(encoded: Self.map(entries)).algorithm == .es256)
    }
}
