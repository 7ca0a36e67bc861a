import RainCore
import RainCrypto
import RainWebAuthn
import Testing

@Suite struct AuthenticatorDataTests {
    static let rpIDHash = SHA256.hash(Array("example.com".utf8))

    @Test func minimalAuthenticatorData() throws {
        let bytes = Self.rpIDHash + [0x05, 0x01, 0x02, 0x03, 0x04]
        let data = try AuthenticatorData(parsing: bytes)
        #expect(data.rpIDHash == Self.rpIDHash)
        #expect(data.flags == [.userPresent, .userVerified])
        #expect(data.signCount == 0x0102_0304)
        #expect(data.attestedCredentialData == nil)
        #expect(data.extensions == nil)
        #expect(data.encoded == bytes)
    }

    @Test func flagBits() {
        #expect(AuthenticatorData.Flags.userPresent.rawValue == 0x01)
        #expect(AuthenticatorData.Flags.userVerified.rawValue == 0x04)
        #expect(AuthenticatorData.Flags.backupEligible.rawValue == 0x08)
        #expect(AuthenticatorData.Flags.backupState.rawValue == 0x10)
        #expect(AuthenticatorData.Flags.attestedCredentialData.rawValue == 0x40)
        #expect(AuthenticatorData.Flags.extensionData.rawValue == 0x80)
    }

    @Test func reservedFlagBitsAreKeptAndIgnored() throws {
        let data = try AuthenticatorData(parsing: Self.rpIDHash + [0x23, 0, 0, 0, 0])
        #expect(data.flags.contains(.userPresent))
        #expect(data.flags.rawValue == 0x23)
    }

    @Test func attestedCredentialDataAndExtensionsRoundTrip() throws {
        let key = try P256PrivateKey()
        let extensions = CBOREncoder.encode(.map([.init(.text("credProtect"), .integer(2))]))
        let data = AuthenticatorData(
            rpIDHash: Self.rpIDHash, flags: [.userPresent, .backupEligible], signCount: 9,
            attestedCredentialData: .init(
                aaguid: Array(1...16), credentialID: Array(repeating: 0xCC, count: 300),
                publicKeyBytes: COSEPublicKey(p256: key.publicKey).encoded),
            extensions: extensions)
        #expect(data.flags.contains(.attestedCredentialData) && data.flags.contains(.extensionData))
        let bytes = data.encoded
        #expect(bytes[32] == 0xC9)
        #expect(Array(bytes[53...54]) == [0x01, 0x2C])
        let parsed = try AuthenticatorData(parsing: bytes)
        #expect(parsed == data)
        #expect(parsed.attestedCredentialData?.credentialID.count == 300)
        #expect(parsed.extensions == extensions)
    }

    struct Bad: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var testDescription: String { name }
    }

    static let goodKey = COSEPublicKey(ed25519: Ed25519PublicKeyFixture.key).encoded
    static let attestedPrefix = rpIDHash + [0x41, 0, 0, 0, 0] + Array(repeating: 0, count: 16)

    static let bad: [Bad] = [
        Bad(name: "empty", bytes: []),
        Bad(name: "36 bytes", bytes: rpIDHash + [0x01, 0, 0, 0]),
        Bad(name: "a trailing byte without ED", bytes: rpIDHash + [0x01, 0, 0, 0, 0, 0x00]),
        Bad(name: "a trailing map without ED", bytes: rpIDHash + [0x01, 0, 0, 0, 0, 0xA0]),
        Bad(name: "ED without extensions", bytes: rpIDHash + [0x81, 0, 0, 0, 0]),
        Bad(name: "ED with an array", bytes: rpIDHash + [0x81, 0, 0, 0, 0, 0x80]),
        Bad(name: "ED with a map and a trailing byte", bytes: rpIDHash + [0x81, 0, 0, 0, 0, 0xA0, 0x00]),
        Bad(name: "ED with an indefinite map", bytes: rpIDHash + [0x81, 0, 0, 0, 0, 0xBF, 0xFF]),
        Bad(name: "ED with a hostile header", bytes: rpIDHash + [0x81, 0, 0, 0, 0, 0xBA, 0x10, 0, 0, 0]),
        Bad(name: "AT without attested data", bytes: rpIDHash + [0x41, 0, 0, 0, 0]),
        Bad(name: "AT with a truncated AAGUID", bytes: rpIDHash + [0x41, 0, 0, 0, 0] + Array(repeating: 0, count: 10)),
        Bad(name: "AT without a credential ID length", bytes: attestedPrefix),
        Bad(name: "credential ID longer than what remains", bytes: attestedPrefix + [0xFF, 0xFF, 1, 2, 3]),
        Bad(name: "credential ID without a key", bytes: attestedPrefix + [0x00, 0x02, 1, 2]),
        Bad(name: "truncated key", bytes: attestedPrefix + [0x00, 0x01, 9] + goodKey.dropLast()),
        Bad(name: "key followed by a byte without ED", bytes: attestedPrefix + [0x00, 0x01, 9] + goodKey + [0x00]),
        Bad(name: "key with a hostile header", bytes: attestedPrefix + [0x00, 0x01, 9, 0x9B] + Array(repeating: 0xFF, count: 8)),
    ]

    @Test(arguments: bad)
    func malformedAuthenticatorDataIsRefused(input: Bad) {
        expectFailure(.malformedAuthenticatorData) { () throws(RainError) in _ = try AuthenticatorData(parsing: input.bytes) }
    }

    @Test func everyTruncationIsRefused() throws {
        let full = Self.attestedPrefix + [0x00, 0x01, 9] + Self.goodKey
        _ = try AuthenticatorData(parsing: full)
        for length in 0..<full.count {
            let prefix = Array(full.prefix(length))
            // 37 bytes of a header whose AT flag is set are refused too: AT promises more.
            expectFailure(.malformedAuthenticatorData) { () throws(RainError) in _ = try AuthenticatorData(parsing: prefix) }
        }
    }

    @Test func keyBytesAreNotParsedAsAKeyHere() throws {
        // The layout is checked here; the key itself is checked when the RP parses it.
        let notAKey = CBOREncoder.encode(.map([.init(.integer(1), .integer(99)), .init(.integer(3), .integer(-7))]))
        let data = try AuthenticatorData(parsing: Self.attestedPrefix + [0x00, 0x01, 9] + notAKey)
        #expect(data.attestedCredentialData?.publicKeyBytes == notAKey)
        expectFailure(.unsupportedPublicKey) { () throws(RainError) in _ = try COSEPublicKey(encoded: notAKey) }
    }
}

/// RFC 8032 §7.1 test 1's public key.
enum Ed25519PublicKeyFixture {
    static let key: Ed25519PublicKey = {
        let bytes = Hex.decode("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a") ?? []
        guard let key = try? Ed25519PublicKey(rawRepresentation: bytes) else { fatalError("RFC 8032 key refused") }
        return key
    }()
}
