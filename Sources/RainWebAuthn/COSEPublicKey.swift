import RainCore
import RainCrypto

/// A COSE algorithm identifier (IANA "COSE Algorithms"), as in `pubKeyCredParams[].alg`.
public struct COSEAlgorithm: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The registered integer.
    public var rawValue: Int

    /// Creates an identifier from its integer.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// ES256: ECDSA with SHA-256 on P-256 (−7).
    public static let es256 = COSEAlgorithm(rawValue: -7)
    /// EdDSA; with WebAuthn, Ed25519 (−8).
    public static let edDSA = COSEAlgorithm(rawValue: -8)
    /// RS256: RSASSA-PKCS1-v1_5 with SHA-256 (−257).
    public static let rs256 = COSEAlgorithm(rawValue: -257)

    /// The three algorithms this relying party verifies, in its order of preference.
    public static let supported: [COSEAlgorithm] = [.es256, .edDSA, .rs256]

    /// `ES256`, `EdDSA`, `RS256`, or the number.
    public var description: String {
        switch self {
        case .es256: return "ES256"
        case .edDSA: return "EdDSA"
        case .rs256: return "RS256"
        default: return "COSE algorithm \(rawValue)"
        }
    }

    /// Decodes the identifier from a JSON number.
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(Int.self)
    }

    /// Encodes the identifier as a JSON number.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// A credential public key in COSE_Key form (RFC 9052 §7, RFC 9053 §7, RFC 8230): EC2 P-256 with
/// ES256, OKP Ed25519 with EdDSA, or RSA with RS256. It verifies the signatures of its algorithm.
public struct COSEPublicKey: Sendable {
    /// The key material, by type.
    public enum Material: Sendable {
        /// kty 2 (EC2), crv 1 (P-256).
        case p256(P256PublicKey)
        /// kty 1 (OKP), crv 6 (Ed25519).
        case ed25519(Ed25519PublicKey)
        /// kty 3 (RSA).
        case rsa(RSAPublicKey)
    }

    // COSE labels and values used here.
    private enum Label {
        static let kty: Int64 = 1
        static let alg: Int64 = 3
        static let crv: Int64 = -1
        static let x: Int64 = -2
        static let y: Int64 = -3
        static let n: Int64 = -1
        static let e: Int64 = -2
    }

    /// The key's algorithm (its `alg` parameter).
    public let algorithm: COSEAlgorithm
    /// The key.
    public let material: Material
    /// The COSE_Key encoding: as received when parsed, canonical when built. Store these bytes.
    public let encoded: [UInt8]

    /// Parses a COSE_Key from its CBOR encoding (exactly one item).
    /// - Parameter encoded: the bytes, for example `VerifiedCredential.publicKey.encoded` read back
    ///   from storage.
    /// - Throws: RAIN_102 with `details.reason` `malformed_public_key` (not CBOR, a missing or
    ///   mistyped parameter, a wrong length), `unsupported_public_key` (another kty, alg or crv, an RSA
    ///   modulus outside 2048–8192 bits) or `public_key_not_on_curve`.
    public init(encoded: [UInt8]) throws(RainError) {
        let value: CBORValue
        do {
            value = try CBORDecoder.decode(encoded)
        } catch {
            throw RainError.webAuthn(.malformedPublicKey, "the credential public key is not valid CBOR: \(error.message)")
        }
        try self.init(cbor: value, encoded: encoded)
    }

    /// Parses a decoded COSE_Key.
    /// - Parameters:
    ///   - value: the decoded map.
    ///   - encoded: the bytes it was decoded from.
    /// - Throws: as ``init(encoded:)``.
    public init(cbor value: CBORValue, encoded: [UInt8]) throws(RainError) {
        guard value.mapEntries != nil else {
            throw RainError.webAuthn(.malformedPublicKey, "the credential public key is not a CBOR map")
        }
        let kty = try Self.integer(value, Label.kty, "kty")
        let alg = COSEAlgorithm(rawValue: Int(clamping: try Self.integer(value, Label.alg, "alg")))
        switch kty {
        case 2:
            guard alg == .es256 else { throw Self.unsupported("an EC2 key with \(alg); only ES256 is accepted") }
            let crv = try Self.integer(value, Label.crv, "crv")
            guard crv == 1 else { throw Self.unsupported("an EC2 key on curve \(crv); only P-256 (1) is accepted") }
            let x = try Self.bytes(value, Label.x, "x", count: 32)
            let y = try Self.bytes(value, Label.y, "y", count: 32)
            do {
                material = .p256(try P256PublicKey(x: x, y: y))
            } catch {
                throw RainError.webAuthn(.publicKeyNotOnCurve, "the credential public key is not a point on P-256")
            }
        case 1:
            guard alg == .edDSA else { throw Self.unsupported("an OKP key with \(alg); only EdDSA is accepted") }
            let crv = try Self.integer(value, Label.crv, "crv")
            guard crv == 6 else { throw Self.unsupported("an OKP key on curve \(crv); only Ed25519 (6) is accepted") }
            let x = try Self.bytes(value, Label.x, "x", count: 32)
            let key: Ed25519PublicKey
            do {
                key = try Ed25519PublicKey(rawRepresentation: x)
            } catch {
                throw RainError.webAuthn(.malformedPublicKey, "the Ed25519 public key was refused: \(error.message)")
            }
            guard key.isOnCurve else {
                throw RainError.webAuthn(.publicKeyNotOnCurve, "the credential public key is not a point on Ed25519")
            }
            material = .ed25519(key)
        case 3:
            guard alg == .rs256 else { throw Self.unsupported("an RSA key with \(alg); only RS256 is accepted") }
            let n = try Self.bytes(value, Label.n, "n", count: nil)
            let e = try Self.bytes(value, Label.e, "e", count: nil)
            do {
                material = .rsa(try RSAPublicKey(modulus: n, exponent: e))
            } catch {
                if error.details.reason == "unsupported_size" { throw Self.unsupported(error.message) }
                throw RainError.webAuthn(.malformedPublicKey, "the RSA public key was refused: \(error.message)")
            }
        default:
            throw Self.unsupported("COSE key type \(kty); only EC2 (2), OKP (1) and RSA (3) are accepted")
        }
        self.algorithm = alg
        self.encoded = encoded
    }

    /// An ES256 key, encoded canonically: `{1: 2, 3: −7, −1: 1, −2: x, −3: y}`.
    public init(p256 key: P256PublicKey) {
        material = .p256(key)
        algorithm = .es256
        encoded = CBOREncoder.encode(
            .map([
                .init(.integer(Label.kty), .integer(2)), .init(.integer(Label.alg), .integer(-7)),
                .init(.integer(Label.crv), .integer(1)), .init(.integer(Label.x), .bytes(key.x)),
                .init(.integer(Label.y), .bytes(key.y)),
            ]))
    }

    /// An EdDSA key, encoded canonically: `{1: 1, 3: −8, −1: 6, −2: x}`.
    public init(ed25519 key: Ed25519PublicKey) {
        material = .ed25519(key)
        algorithm = .edDSA
        encoded = CBOREncoder.encode(
            .map([
                .init(.integer(Label.kty), .integer(1)), .init(.integer(Label.alg), .integer(-8)),
                .init(.integer(Label.crv), .integer(6)), .init(.integer(Label.x), .bytes(key.rawRepresentation)),
            ]))
    }

    /// An RS256 key, encoded canonically: `{1: 3, 3: −257, −1: n, −2: e}`.
    public init(rsa key: RSAPublicKey) {
        material = .rsa(key)
        algorithm = .rs256
        encoded = CBOREncoder.encode(
            .map([
                .init(.integer(Label.kty), .integer(3)), .init(.integer(Label.alg), .integer(-257)),
                .init(.integer(Label.n), .bytes(key.modulus)), .init(.integer(Label.e), .bytes(key.exponent)),
            ]))
    }

    /// Checks a WebAuthn signature: DER ECDSA-SHA256 for ES256, Ed25519 for EdDSA,
    /// RSASSA-PKCS1-v1_5 SHA-256 for RS256.
    /// - Parameters:
    ///   - signature: the signature as the authenticator returned it.
    ///   - message: the signed bytes (`authenticatorData ‖ SHA-256(clientDataJSON)`).
    /// - Returns: `true` only for a valid signature.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        switch material {
        case .p256(let key): return key.isValidSignature(derSignature: signature, for: message)
        case .ed25519(let key): return key.isValidSignature(signature, for: message)
        case .rsa(let key): return key.isValidSignature(signature, for: message)
        }
    }

    /// The key as a DER SubjectPublicKeyInfo (`response.publicKey` in the JSON forms).
    public var subjectPublicKeyInfo: [UInt8] {
        switch material {
        case .p256(let key): return key.derRepresentation
        case .ed25519(let key):
            return [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00] + key.rawRepresentation
        case .rsa(let key): return key.derRepresentation
        }
    }

    private static func integer(_ map: CBORValue, _ label: Int64, _ name: String) throws(RainError) -> Int64 {
        guard let item = map[label] else {
            throw RainError.webAuthn(.malformedPublicKey, "the credential public key has no \(name) (\(label))")
        }
        guard let value = item.integerValue else {
            throw RainError.webAuthn(.malformedPublicKey, "the credential public key's \(name) is not an integer")
        }
        return value
    }

    private static func bytes(_ map: CBORValue, _ label: Int64, _ name: String, count: Int?) throws(RainError) -> [UInt8] {
        guard let item = map[label] else {
            throw RainError.webAuthn(.malformedPublicKey, "the credential public key has no \(name) (\(label))")
        }
        guard let bytes = item.bytesValue else {
            throw RainError.webAuthn(.malformedPublicKey, "the credential public key's \(name) is not a byte string")
        }
        if let count, bytes.count != count {
            throw RainError.webAuthn(
                .malformedPublicKey, "the credential public key's \(name) has \(bytes.count) bytes, not \(count)")
        }
        return bytes
    }

    private static func unsupported(_ what: String) -> RainError {
        RainError.webAuthn(.unsupportedPublicKey, "unsupported credential public key: \(what)")
    }
}
