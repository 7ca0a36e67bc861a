internal import COpenSSL
import RainCore

/// secp256k1 (SEC 2) private-key arithmetic and public keys, through OpenSSL's `EC_POINT` and
/// `BN` functions, for BIP-32. Private scalars are 32 big-endian bytes.
enum Secp256k1 {
    /// The length of a private key (a scalar) in bytes.
    static let scalarByteCount = 32
    /// The length of a compressed public key: `02` or `03`, then x.
    static let compressedPublicKeyByteCount = 33
    /// The length of an uncompressed public key: `04`, then x and y.
    static let uncompressedPublicKeyByteCount = 65

    /// The error for a key that BIP-32 declares invalid (a master or child IL ≥ n, or a zero
    /// key). It happens with probability below 2^-127; BIP-32 says to use the next index.
    static var invalidDerivedKey: RainError {
        RainError(
            .internalError, "derived key is not a valid secp256k1 key; BIP-32 says to use the next index",
            details: RainError.Details(reason: "invalid_derived_key"))
    }

    /// Whether `scalar` is a valid private key: 32 bytes with 0 < k < n.
    /// - Throws: RAIN_502 when OpenSSL fails.
    static func isValidPrivateKey(_ scalar: UnsafeRawBufferPointer) throws(RainError) -> Bool {
        guard scalar.count == scalarByteCount else { return false }
        let curve = try Curve()
        let k = try SecretBigNumber(scalar)
        return BN_is_zero(k.pointer) == 0 && BN_cmp(k.pointer, curve.order) < 0
    }

    /// BIP-32's private child key: `(tweak + key) mod n`, written to the first 32 bytes of
    /// `output`.
    /// - Parameters:
    ///   - tweak: IL, the first half of the child's HMAC-SHA512; must be below n.
    ///   - key: the parent private key.
    ///   - output: at least 32 bytes.
    /// - Throws: ``invalidDerivedKey`` (RAIN_502) when IL ≥ n or the sum is zero; RAIN_502 when
    ///   OpenSSL fails or the sizes are wrong.
    static func addTweak(
        _ tweak: UnsafeRawBufferPointer, to key: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(RainError) {
        guard tweak.count == scalarByteCount, key.count == scalarByteCount, output.count >= scalarByteCount else {
            throw RainError(.internalError, "secp256k1 scalars are 32 bytes")
        }
        let curve = try Curve()
        let il = try SecretBigNumber(tweak)
        guard BN_cmp(il.pointer, curve.order) < 0 else { throw invalidDerivedKey }
        let parent = try SecretBigNumber(key)
        let sum = try SecretBigNumber()
        guard BN_mod_add(sum.pointer, il.pointer, parent.pointer, curve.order, curve.context) == 1 else {
            throw RainError.openSSL("BN_mod_add")
        }
        guard BN_is_zero(sum.pointer) == 0 else { throw invalidDerivedKey }
        try sum.write(to: UnsafeMutableRawBufferPointer(rebasing: output[0..<scalarByteCount]))
    }

    /// The public key k·G of a private key.
    /// - Parameters:
    ///   - privateKey: 32 bytes, 0 < k < n.
    ///   - compressed: 33 bytes (`02`/`03` ‖ x) when true, 65 bytes (`04` ‖ x ‖ y) when false.
    /// - Returns: the encoded point.
    /// - Throws: RAIN_102 when `privateKey` is not a valid secp256k1 private key; RAIN_502 when
    ///   OpenSSL fails.
    static func publicKey(privateKey: UnsafeRawBufferPointer, compressed: Bool) throws(RainError) -> [UInt8] {
        guard privateKey.count == scalarByteCount else {
            throw RainError.invalid("a secp256k1 private key is 32 bytes", field: "privateKey")
        }
        let curve = try Curve()
        let k = try SecretBigNumber(privateKey)
        guard BN_is_zero(k.pointer) == 0, BN_cmp(k.pointer, curve.order) < 0 else {
            throw RainError.invalid("not a secp256k1 private key", field: "privateKey")
        }
        let point = try Point(curve)
        guard EC_POINT_mul(curve.group, point.pointer, k.pointer, nil, nil, curve.context) == 1 else {
            throw RainError.openSSL("EC_POINT_mul")
        }
        let form = compressed ? POINT_CONVERSION_COMPRESSED : POINT_CONVERSION_UNCOMPRESSED
        let expected = compressed ? compressedPublicKeyByteCount : uncompressedPublicKeyByteCount
        var encoded = [UInt8](repeating: 0, count: uncompressedPublicKeyByteCount)
        let written = encoded.withUnsafeMutableBufferPointer { buffer in
            EC_POINT_point2oct(curve.group, point.pointer, form, buffer.baseAddress, buffer.count, curve.context)
        }
        guard written == expected else { throw RainError.openSSL("EC_POINT_point2oct") }
        return Array(encoded.prefix(expected))
    }
}

extension Secp256k1 {
    /// Owns the secp256k1 `EC_GROUP` and a `BN_CTX` for one operation; the order n is borrowed
    /// from the group.
    fileprivate final class Curve {
        let group: OpaquePointer
        let context: OpaquePointer
        let order: OpaquePointer

        init() throws(RainError) {
            guard let group = EC_GROUP_new_by_curve_name(NID_secp256k1) else {
                throw RainError.openSSL("EC_GROUP_new_by_curve_name(secp256k1)")
            }
            guard let context = BN_CTX_new() else {
                EC_GROUP_free(group)
                throw RainError.openSSL("BN_CTX_new")
            }
            guard let order = EC_GROUP_get0_order(group) else {
                BN_CTX_free(context)
                EC_GROUP_free(group)
                throw RainError.openSSL("EC_GROUP_get0_order")
            }
            self.group = group
            self.context = context
            self.order = order
        }

        deinit {
            BN_CTX_free(context)
            EC_GROUP_free(group)
        }
    }

    /// Owns a `BIGNUM` that holds a secret: flagged constant-time, zeroed when freed
    /// (`BN_clear_free`).
    fileprivate final class SecretBigNumber {
        let pointer: OpaquePointer

        /// Zero.
        init() throws(RainError) {
            guard let pointer = BN_new() else { throw RainError.openSSL("BN_new") }
            BN_set_flags(pointer, BN_FLG_CONSTTIME)
            self.pointer = pointer
        }

        /// The big-endian number in `bytes`.
        convenience init(_ bytes: UnsafeRawBufferPointer) throws(RainError) {
            try self.init()
            let parsed = withNonNullBytes(bytes) { base, count in BN_bin2bn(base, Int32(count), pointer) }
            guard parsed != nil else { throw RainError.openSSL("BN_bin2bn") }
            BN_set_flags(pointer, BN_FLG_CONSTTIME)
        }

        /// Writes the number as exactly `output.count` big-endian bytes.
        func write(to output: UnsafeMutableRawBufferPointer) throws(RainError) {
            guard let base = output.baseAddress else { throw RainError(.internalError, "empty scalar buffer") }
            let written = BN_bn2binpad(pointer, base.assumingMemoryBound(to: UInt8.self), Int32(output.count))
            guard written == Int32(output.count) else { throw RainError.openSSL("BN_bn2binpad") }
        }

        deinit { BN_clear_free(pointer) }
    }

    /// Owns an `EC_POINT` (public: freed without clearing) and keeps its group alive.
    fileprivate final class Point {
        let pointer: OpaquePointer
        private let curve: Curve

        init(_ curve: Curve) throws(RainError) {
            guard let pointer = EC_POINT_new(curve.group) else { throw RainError.openSSL("EC_POINT_new") }
            self.pointer = pointer
            self.curve = curve
        }

        deinit { EC_POINT_free(pointer) }
    }
}
