import RainCore
import RainCrypto
import RainWebAuthn

/// CTAP2 PIN/UV auth protocol 2 (CTAP 2.1 §6.5.7), the authenticator's side.
///
/// The platform and the authenticator agree on ECDH P-256 (the x coordinate Z), then derive two
/// keys with HKDF-SHA-256 over Z with a salt of 32 zero bytes: "CTAP2 HMAC key" and
/// "CTAP2 AES key". Encryption is AES-256-CBC with a random IV in front; authentication is the
/// full 32-byte HMAC-SHA-256.
struct SoftCTAP2PINProtocol {
    /// The protocol number in `pinUvAuthProtocol`.
    static let number: Int64 = 2

    /// The keys one key agreement yields.
    struct SharedSecret {
        var hmacKey: SymmetricKey
        var aesKey: SymmetricKey
    }

    /// The authenticator's key agreement key, new at power-up and after each wrong PIN.
    private(set) var keyAgreementKey: P256PrivateKey

    init() throws {
        keyAgreementKey = try P256PrivateKey()
    }

    /// A new key agreement key: the old shared secrets stop working.
    mutating func regenerate() throws {
        keyAgreementKey = try P256PrivateKey()
    }

    /// The public key for `getKeyAgreement` (COSE, alg -25: ECDH-ES + HKDF-256).
    var keyAgreementCOSE: CBORValue {
        .map([
            .init(.integer(1), .integer(2)), .init(.integer(3), .integer(-25)), .init(.integer(-1), .integer(1)),
            .init(.integer(-2), .bytes(keyAgreementKey.publicKey.x)), .init(.integer(-3), .bytes(keyAgreementKey.publicKey.y)),
        ])
    }

    /// The shared secret with the platform's key (`keyAgreement`, a COSE EC2 P-256 key).
    func sharedSecret(platformKey: CBORValue) throws -> SharedSecret {
        guard platformKey[1]?.integerValue == 2, platformKey[-1]?.integerValue == 1,
            let x = platformKey[-2]?.bytesValue, let y = platformKey[-3]?.bytesValue
        else { throw CTAPStatus.invalidParameter }
        let peer: P256PublicKey
        do { peer = try P256PublicKey(x: x, y: y) } catch { throw CTAPStatus.invalidParameter }
        let z = try keyAgreementKey.sharedSecret(with: peer)
        let salt = [UInt8](repeating: 0, count: 32)
        return SharedSecret(
            hmacKey: try HKDFSHA256.deriveKey(from: z, salt: salt, info: "CTAP2 HMAC key"),
            aesKey: try HKDFSHA256.deriveKey(from: z, salt: salt, info: "CTAP2 AES key"))
    }

    /// `encrypt(key, demPlaintext)`: a random IV, then AES-256-CBC.
    static func encrypt(_ plaintext: [UInt8], key: SymmetricKey) throws -> [UInt8] {
        let iv = try SecureRandom.bytes(count: AES256CBC.blockByteCount)
        return iv + (try AES256CBC.encrypt(plaintext, key: key, iv: iv))
    }

    /// `decrypt(key, demCiphertext)`: the IV is the first block.
    static func decrypt(_ ciphertext: [UInt8], key: SymmetricKey) throws -> [UInt8] {
        guard ciphertext.count > AES256CBC.blockByteCount, ciphertext.count % AES256CBC.blockByteCount == 0 else {
            throw CTAPStatus.invalidParameter
        }
        return try AES256CBC.decrypt(
            Array(ciphertext.dropFirst(AES256CBC.blockByteCount)), key: key,
            iv: Array(ciphertext.prefix(AES256CBC.blockByteCount)))
    }

    /// `verify(key, message, signature)`: the full HMAC-SHA-256.
    static func verify(key: SymmetricKey, message: [UInt8], signature: [UInt8]) -> Bool {
        // Test support: a plain comparison is enough (no attacker times it).
        HMACSHA256.authenticate(message, key: key) == signature
    }
}

/// A CTAP2 status code, thrown inside the software authenticator and sent as the response's first byte.
struct CTAPStatus: Error, Equatable {
    var code: UInt8

    static let invalidCommand = CTAPStatus(code: 0x01)
    static let invalidParameter = CTAPStatus(code: 0x02)
    static let invalidCBOR = CTAPStatus(code: 0x12)
    static let missingParameter = CTAPStatus(code: 0x14)
    static let credentialExcluded = CTAPStatus(code: 0x19)
    static let unsupportedAlgorithm = CTAPStatus(code: 0x26)
    static let invalidOption = CTAPStatus(code: 0x2C)
    static let keepaliveCancel = CTAPStatus(code: 0x2D)
    static let noCredentials = CTAPStatus(code: 0x2E)
    static let userActionTimeout = CTAPStatus(code: 0x2F)
    static let notAllowed = CTAPStatus(code: 0x30)
    static let pinInvalid = CTAPStatus(code: 0x31)
    static let pinBlocked = CTAPStatus(code: 0x32)
    static let pinAuthInvalid = CTAPStatus(code: 0x33)
    static let pinAuthBlocked = CTAPStatus(code: 0x34)
    static let pinNotSet = CTAPStatus(code: 0x35)
    static let pinRequired = CTAPStatus(code: 0x36)
    static let pinPolicyViolation = CTAPStatus(code: 0x37)
    static let other = CTAPStatus(code: 0x7F)
}
