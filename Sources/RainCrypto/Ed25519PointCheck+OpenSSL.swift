internal import COpenSSL
import RainCore

extension Ed25519PublicKey {
    /// Whether the 32-byte encoding decodes to a point of edwards25519 (RFC 8032 §5.1.3): `y` below
    /// `p = 2^255 − 19`, and `(y² − 1) / (d·y² + 1)` a square mod `p` (zero only with the sign bit
    /// clear).
    ///
    /// OpenSSL accepts any 32 bytes as an Ed25519 public key and refuses a bad point only when it
    /// verifies; a relying party checks the point when the key is registered.
    public var isOnCurve: Bool {
        (try? Ed25519PointCheck.isOnCurve(rawRepresentation)) ?? false
    }
}

/// The arithmetic behind ``Ed25519PublicKey/isOnCurve``, with OpenSSL's `BN` functions.
private enum Ed25519PointCheck {
    static func isOnCurve(_ encoded: [UInt8]) throws(RainError) -> Bool {
        guard encoded.count == 32, let last = encoded.last else { return false }
        let signBit = last >> 7
        var yBytes = encoded
        yBytes[31] = last & 0x7F

        let numbers = try BigNumbers()
        let p = try numbers.make()
        guard BN_set_bit(p, 255) == 1, BN_sub_word(p, 19) == 1 else { throw RainError.openSSL("BN p") }
        let y = try numbers.make()
        let loaded = yBytes.withUnsafeBufferPointer { BN_lebin2bn($0.baseAddress, 32, y) }
        guard loaded != nil else { throw RainError.openSSL("BN_lebin2bn") }
        guard BN_cmp(y, p) < 0 else { return false }

        // d = −121665 / 121666 mod p
        let numerator = try numbers.make(word: 121_665)
        let denominator = try numbers.make(word: 121_666)
        let d = try numbers.make()
        let inverse = try numbers.make()
        guard BN_mod_inverse(inverse, denominator, p, numbers.context) != nil,
            BN_mod_mul(d, numerator, inverse, p, numbers.context) == 1,
            BN_mod_sub(d, p, d, p, numbers.context) == 1
        else { throw RainError.openSSL("BN d") }

        let one = try numbers.make(word: 1)
        let y2 = try numbers.make()
        let u = try numbers.make()
        let v = try numbers.make()
        guard BN_mod_sqr(y2, y, p, numbers.context) == 1,
            BN_mod_sub(u, y2, one, p, numbers.context) == 1,
            BN_mod_mul(v, d, y2, p, numbers.context) == 1,
            BN_mod_add(v, v, one, p, numbers.context) == 1
        else { throw RainError.openSSL("BN u, v") }
        // v is never zero: −1/d is not a square mod p.
        let w = try numbers.make()
        let vInverse = try numbers.make()
        guard BN_mod_inverse(vInverse, v, p, numbers.context) != nil,
            BN_mod_mul(w, u, vInverse, p, numbers.context) == 1
        else { throw RainError.openSSL("BN w") }
        if BN_is_zero(w) == 1 { return signBit == 0 }

        // Euler's criterion: w^((p−1)/2) is 1 for a non-zero square.
        let exponent = try numbers.make()
        let legendre = try numbers.make()
        guard BN_copy(exponent, p) != nil, BN_sub_word(exponent, 1) == 1, BN_rshift1(exponent, exponent) == 1,
            BN_mod_exp(legendre, w, exponent, p, numbers.context) == 1
        else { throw RainError.openSSL("BN legendre") }
        return BN_is_one(legendre) == 1
    }
}

/// Owns a `BN_CTX` and every `BIGNUM` made through it.
private final class BigNumbers {
    let context: OpaquePointer
    private var owned: [OpaquePointer] = []

    init() throws(RainError) {
        guard let context = BN_CTX_new() else { throw RainError.openSSL("BN_CTX_new") }
        self.context = context
    }

    deinit {
        for number in owned { BN_free(number) }
        BN_CTX_free(context)
    }

    func make(word: UInt = 0) throws(RainError) -> OpaquePointer {
        guard let number = BN_new() else { throw RainError.openSSL("BN_new") }
        owned.append(number)
        guard BN_set_word(number, word) == 1 else { throw RainError.openSSL("BN_set_word") }
        return number
    }
}
