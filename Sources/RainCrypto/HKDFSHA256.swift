import RainCore

/// HKDF with SHA-256 (RFC 5869): extract-then-expand over ``HMACSHA256``.
///
/// Written in Swift over HMAC rather than through `EVP_KDF`, whose parameters are `OSSL_PARAM`
/// arrays that should not be built from Swift. Every intermediate secret (the pseudorandom key and
/// each block) lives in memory that is zeroed before it is freed.
public enum HKDFSHA256 {
    /// The largest output RFC 5869 allows for SHA-256: 255 blocks of 32 bytes.
    static let maximumOutputByteCount = 255 * HMACSHA256.byteCount

    /// Derives a key from input keying material.
    /// - Parameters:
    ///   - ikm: the input keying material.
    ///   - salt: a non-secret salt; empty means 32 zero bytes, as RFC 5869 says.
    ///   - info: context that binds the key to its use, for example `"rain/storage/v1"` (UTF-8).
    ///   - outputByteCount: the key length in bytes, 1 through 8160.
    /// - Returns: the derived key.
    /// - Throws: RAIN_102 when `outputByteCount` is out of range; RAIN_502 when HMAC fails.
    public static func deriveKey(
        from ikm: SymmetricKey, salt: [UInt8], info: String, outputByteCount: Int = 32
    ) throws(RainError) -> SymmetricKey {
        try deriveKey(from: ikm, salt: salt, info: Array(info.utf8), outputByteCount: outputByteCount)
    }

    /// ``deriveKey(from:salt:info:outputByteCount:)`` with `info` as raw bytes (RFC 5869's test
    /// vectors use `info` that is not UTF-8).
    static func deriveKey(
        from ikm: SymmetricKey, salt: [UInt8], info: [UInt8], outputByteCount: Int
    ) throws(RainError) -> SymmetricKey {
        guard outputByteCount > 0, outputByteCount <= maximumOutputByteCount else {
            throw RainError.invalid(
                "HKDF output length must be between 1 and \(maximumOutputByteCount) bytes", field: "outputByteCount")
        }
        let hashLength = HMACSHA256.byteCount

        // Extract: PRK = HMAC(salt, IKM).
        let prk = UnsafeMutableRawBufferPointer.allocate(byteCount: hashLength, alignment: 16)
        prk.initializeMemory(as: UInt8.self, repeating: 0)
        defer {
            SecureMemory.cleanse(prk)
            prk.deallocate()
        }
        let saltBytes = salt.isEmpty ? [UInt8](repeating: 0, count: hashLength) : salt
        let extracted = saltBytes.withUnsafeBytes { saltBuffer in
            ikm.withUnsafeBytes { ikmBuffer in
                Result { () throws(RainError) in
                    try HMACSHA256.authenticate(ikmBuffer, key: saltBuffer, into: prk)
                }
            }
        }
        try extracted.get()

        // Expand: T(i) = HMAC(PRK, T(i-1) ‖ info ‖ i); the output is T(1) ‖ T(2) ‖ … truncated.
        // The scratch buffer holds T(i-1), which is secret.
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: hashLength + info.count + 1, alignment: 16)
        scratch.initializeMemory(as: UInt8.self, repeating: 0)
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: hashLength, alignment: 16)
        block.initializeMemory(as: UInt8.self, repeating: 0)
        defer {
            SecureMemory.cleanse(scratch)
            scratch.deallocate()
            SecureMemory.cleanse(block)
            block.deallocate()
        }
        return try SymmetricKey(byteCount: outputByteCount) { (output) throws(RainError) in
            var previousLength = 0
            var offset = 0
            var counter: UInt8 = 1
            while offset < outputByteCount {
                if previousLength > 0 {
                    scratch.copyMemory(from: UnsafeRawBufferPointer(block))
                }
                info.withUnsafeBytes { infoBuffer in
                    UnsafeMutableRawBufferPointer(rebasing: scratch[previousLength..<(previousLength + info.count)])
                        .copyMemory(from: infoBuffer)
                }
                scratch[previousLength + info.count] = counter
                let messageLength = previousLength + info.count + 1
                try HMACSHA256.authenticate(
                    UnsafeRawBufferPointer(rebasing: scratch[0..<messageLength]), key: UnsafeRawBufferPointer(prk),
                    into: block)
                let take = min(hashLength, outputByteCount - offset)
                UnsafeMutableRawBufferPointer(rebasing: output[offset..<(offset + take)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: block[0..<take]))
                offset += take
                previousLength = hashLength
                counter &+= 1
            }
        }
    }
}
