internal import COpenSSL
import RainCore

/// An RSA public key that verifies RSASSA-PKCS1-v1_5 signatures with SHA-256 (COSE RS256).
public struct RSAPublicKey: Sendable, Equatable {
    /// The smallest modulus accepted, in bits.
    public static let minimumModulusBits = 2048
    /// The largest modulus accepted, in bits; bounds the cost of a verification.
    public static let maximumModulusBits = 8192

    private let n: [UInt8]
    private let e: [UInt8]
    private let key: EVPKey

    /// Creates a key from its modulus and public exponent, as a COSE RSA key carries them
    /// (unsigned big-endian integers).
    /// - Parameters:
    ///   - modulus: `n`; 2048 to 8192 bits, odd.
    ///   - exponent: `e`; odd, `2^16 < e < 2^256` (65537 in practice).
    /// - Throws: RAIN_102 with `details.reason` `unsupported_size` for a modulus outside 2048–8192
    ///   bits, or `malformed` when OpenSSL refuses the key.
    public init(modulus: [UInt8], exponent: [UInt8]) throws(RainError) {
        let n = Array(modulus.drop { $0 == 0 })
        let e = Array(exponent.drop { $0 == 0 })
        let bits = n.first.map { n.count * 8 - $0.leadingZeroBitCount } ?? 0
        guard bits >= Self.minimumModulusBits, bits <= Self.maximumModulusBits else {
            throw RainError.invalid(
                "an RSA modulus must have \(Self.minimumModulusBits) to \(Self.maximumModulusBits) bits, not \(bits)",
                field: "publicKey", reason: "unsupported_size")
        }
        // SP 800-56B: an odd exponent with 2^16 < e < 2^256.
        guard let lastN = n.last, lastN & 1 == 1, let lastE = e.last, lastE & 1 == 1, e.count <= 32,
            e.count >= 3
        else {
            throw RainError.invalid("not a valid RSA modulus and exponent", field: "publicKey", reason: "malformed")
        }
        let der = Self.subjectPublicKeyInfo(modulus: n, exponent: e)
        guard let key = EVPKey.fromSubjectPublicKeyInfo(der), EVP_PKEY_is_a(key.pointer, "RSA") == 1,
            EVPKeyContext.isValidPublicKey(key)
        else {
            ERR_clear_error()
            throw RainError.invalid("OpenSSL refused the RSA public key", field: "publicKey", reason: "malformed")
        }
        self.n = n
        self.e = e
        self.key = key
    }

    /// The modulus, big-endian without leading zeros.
    public var modulus: [UInt8] { n }

    /// The public exponent, big-endian without leading zeros.
    public var exponent: [UInt8] { e }

    /// The DER SubjectPublicKeyInfo (rsaEncryption).
    public var derRepresentation: [UInt8] { Self.subjectPublicKeyInfo(modulus: n, exponent: e) }

    /// Checks an RSASSA-PKCS1-v1_5 signature with SHA-256 (RS256).
    /// - Parameters:
    ///   - signature: the signature, as long as the modulus.
    ///   - message: the signed message (hashed here).
    /// - Returns: `true` only for a valid signature.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard signature.count == n.count else { return false }
        return key.verify(signature: signature, message: message, digest: EVP_sha256())
    }

    /// Keys are equal when their modulus and exponent are equal.
    public static func == (lhs: RSAPublicKey, rhs: RSAPublicKey) -> Bool { lhs.n == rhs.n && lhs.e == rhs.e }

    /// `SEQUENCE { SEQUENCE { rsaEncryption, NULL }, BIT STRING { SEQUENCE { INTEGER n, INTEGER e } } }`.
    static func subjectPublicKeyInfo(modulus: [UInt8], exponent: [UInt8]) -> [UInt8] {
        let rsaPublicKey = DER.sequence(DER.integer(modulus) + DER.integer(exponent))
        let algorithm = DER.sequence([0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00])
        return DER.sequence(algorithm + DER.element(tag: 0x03, [0x00] + rsaPublicKey))
    }
}

/// The few DER encodings the RSA key needs.
private enum DER {
    static func element(tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + length(content.count) + content
    }

    static func sequence(_ content: [UInt8]) -> [UInt8] { element(tag: 0x30, content) }

    /// A non-negative INTEGER from unsigned big-endian bytes: leading zeros dropped, one added when
    /// the top bit is set.
    static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        var bytes = Array(magnitude.drop { $0 == 0 })
        if bytes.isEmpty { bytes = [0] }
        if let first = bytes.first, first & 0x80 != 0 { bytes.insert(0, at: 0) }
        return element(tag: 0x02, bytes)
    }

    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var value = count
        while value > 0 {
            bytes.insert(UInt8(value & 0xFF), at: 0)
            value >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }
}
