import RainCore

/// AES-256-GCM authenticated encryption (NIST SP 800-38D) with 12-byte random nonces and 16-byte
/// tags.
///
/// A random 96-bit nonce is safe for about 2^32 messages under one key; rotate keys well before.
public enum AESGCM {
    /// The key length in bytes (AES-256).
    static let keyByteCount = 32
    /// The nonce length in bytes.
    static let nonceByteCount = 12
    /// The tag length in bytes.
    static let tagByteCount = 16

    /// The output of ``AESGCM/seal(_:using:authenticating:)``: nonce, ciphertext and tag.
    public struct SealedBox: Sendable, Equatable {
        /// The 12-byte nonce.
        public var nonce: [UInt8]
        /// The ciphertext, as long as the plaintext.
        public var ciphertext: [UInt8]
        /// The 16-byte authentication tag.
        public var tag: [UInt8]

        /// Creates a box from its parts. Sizes are checked when the box is opened.
        /// - Parameters:
        ///   - nonce: the 12-byte nonce.
        ///   - ciphertext: the ciphertext.
        ///   - tag: the 16-byte tag.
        public init(nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8]) {
            self.nonce = nonce
            self.ciphertext = ciphertext
            self.tag = tag
        }

        /// Splits `nonce ‖ ciphertext ‖ tag` into a box.
        /// - Parameter combined: at least 28 bytes (12 of nonce and 16 of tag).
        /// - Throws: RAIN_502 "sealed box too short" when fewer than 28 bytes are given.
        public init(combined: [UInt8]) throws(RainError) {
            let overhead = AESGCM.nonceByteCount + AESGCM.tagByteCount
            guard combined.count >= overhead else {
                throw RainError(.internalError, "sealed box too short")
            }
            let tagStart = combined.count - AESGCM.tagByteCount
            nonce = Array(combined[0..<AESGCM.nonceByteCount])
            ciphertext = Array(combined[AESGCM.nonceByteCount..<tagStart])
            tag = Array(combined[tagStart...])
        }

        /// `nonce ‖ ciphertext ‖ tag`, the form to store or send.
        public var combined: [UInt8] { nonce + ciphertext + tag }
    }

    /// Encrypts and authenticates `plaintext`, and authenticates `aad`, under a fresh random nonce.
    /// - Parameters:
    ///   - plaintext: the data to encrypt.
    ///   - key: a 32-byte key.
    ///   - aad: additional data that is authenticated but not encrypted (for example a record's
    ///     identity, so a ciphertext cannot be moved to another record); the same bytes must be
    ///     given to ``open(_:using:authenticating:)``.
    /// - Returns: the sealed box.
    /// - Throws: RAIN_102 when the key is not 32 bytes or the input is larger than 2 GiB;
    ///   RAIN_502 when OpenSSL fails.
    public static func seal(
        _ plaintext: [UInt8], using key: SymmetricKey, authenticating aad: [UInt8] = []
    ) throws(RainError) -> SealedBox {
        try checkKey(key)
        let nonce = try SecureRandom.bytes(count: nonceByteCount)
        return try seal(plaintext, using: key, nonce: nonce, authenticating: aad)
    }

    /// Checks the tag and decrypts.
    /// - Parameters:
    ///   - box: the sealed box.
    ///   - key: the 32-byte key it was sealed with.
    ///   - aad: the additional data given when sealing.
    /// - Returns: the plaintext.
    /// - Throws: RAIN_502 "authentication failed" with `details.reason == "authentication_failed"`
    ///   when the key, nonce, ciphertext, tag or additional data do not match (or the nonce or tag
    ///   has the wrong size); RAIN_102 when the key is not 32 bytes; RAIN_502 when OpenSSL fails.
    public static func open(
        _ box: SealedBox, using key: SymmetricKey, authenticating aad: [UInt8] = []
    ) throws(RainError) -> [UInt8] {
        try checkKey(key)
        guard box.nonce.count == nonceByteCount, box.tag.count == tagByteCount else {
            throw authenticationFailed
        }
        return try decrypt(box, using: key, authenticating: aad)
    }

    /// ``open(_:using:authenticating:)`` into `output`, so that the plaintext never passes through
    /// an ordinary array (a slot of locked memory). `output` is zeroed on any failure.
    /// - Parameter output: exactly as long as the ciphertext.
    /// - Throws: as ``open(_:using:authenticating:)``, and RAIN_502 when `output` has another length.
    static func open(
        _ box: SealedBox, using key: SymmetricKey, authenticating aad: [UInt8], into output: UnsafeMutableRawBufferPointer
    ) throws(RainError) {
        try checkKey(key)
        guard box.nonce.count == nonceByteCount, box.tag.count == tagByteCount else {
            SecureMemory.cleanse(output)
            throw authenticationFailed
        }
        try decrypt(box, using: key, authenticating: aad, into: output)
    }

    /// The error for a box that does not authenticate. Says nothing about which part was wrong.
    static var authenticationFailed: RainError {
        RainError(.internalError, "authentication failed", details: RainError.Details(reason: "authentication_failed"))
    }

    static func checkKey(_ key: SymmetricKey) throws(RainError) {
        guard key.byteCount == keyByteCount else {
            throw RainError.invalid("AES-256-GCM needs a 32-byte key", field: "key")
        }
    }
}
