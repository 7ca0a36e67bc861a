import RainCore

/// Random values for secrets, codes and identifiers, all from OpenSSL's CSPRNG.
public enum SecureRandom {
    /// A uniformly distributed integer in `0..<upperBound`, without modulo bias: draws that fall
    /// in the incomplete last range of `UInt32` are rejected and drawn again.
    /// - Parameter upperBound: the exclusive upper bound; must be positive.
    /// - Throws: RAIN_102 when `upperBound` is zero; RAIN_502 when the generator fails.
    public static func uniform(upperBound: UInt32) throws(RainError) -> UInt32 {
        guard upperBound > 0 else {
            throw RainError.invalid("upper bound must be positive", field: "upperBound")
        }
        // 2^32 mod upperBound: values below it belong to an incomplete range and are rejected.
        let threshold = (0 &- upperBound) % upperBound
        while true {
            var value: UInt32 = 0
            try withUnsafeMutableBytes(of: &value) { (buffer) throws(RainError) in try fill(buffer) }
            if value >= threshold { return value % upperBound }
        }
    }

    /// `count` decimal digits, each uniform over 0–9 and independent, for example `"042917"`.
    /// Leading zeros are kept.
    /// - Parameter count: how many digits; zero gives an empty string.
    /// - Throws: RAIN_102 when `count` is negative; RAIN_502 when the generator fails.
    public static func digits(count: Int) throws(RainError) -> String {
        guard count >= 0 else {
            throw RainError.invalid("digit count must not be negative", field: "count")
        }
        var result: [UInt8] = []
        result.reserveCapacity(count)
        while result.count < count {
            let missing = count - result.count
            // Bytes of 250...255 are rejected (250 is the largest multiple of 10 below 256), so a
            // batch a little larger than needed usually finishes in one round.
            var batch = try bytes(count: missing + missing / 16 + 4)
            for byte in batch where byte < 250 && result.count < count {
                result.append(UInt8(ascii: "0") + byte % 10)
            }
            SecureMemory.cleanse(&batch)
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// A random token: `byteCount` random bytes, base64url-encoded without padding (43 characters
    /// for the default 32 bytes).
    /// - Parameter byteCount: the entropy in bytes; must be positive.
    /// - Throws: RAIN_102 when `byteCount` is not positive; RAIN_502 when the generator fails.
    public static func token(byteCount: Int = 32) throws(RainError) -> String {
        guard byteCount > 0 else {
            throw RainError.invalid("token length must be positive", field: "byteCount")
        }
        var raw = try bytes(count: byteCount)
        defer { SecureMemory.cleanse(&raw) }
        return Base64URL.encode(raw)
    }

    /// A random identifier: `prefix`, an underscore and 16 random bytes as 32 lowercase hex digits,
    /// for example `acct_0f3a9c…`.
    /// - Parameter prefix: names the kind of object; must not be empty.
    /// - Throws: RAIN_102 when `prefix` is empty; RAIN_502 when the generator fails.
    public static func identifier(prefix: String) throws(RainError) -> String {
        guard !prefix.isEmpty else {
            throw RainError.invalid("identifier prefix must not be empty", field: "prefix")
        }
        return prefix + "_" + Hex.encode(try bytes(count: 16))
    }
}
