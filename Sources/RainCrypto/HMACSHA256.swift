import RainCore

/// HMAC-SHA256 (RFC 2104, FIPS 198-1) through OpenSSL's one-shot `HMAC`.
public enum HMACSHA256 {
    /// The MAC length in bytes.
    static let byteCount = 32

    /// The HMAC-SHA256 of `data` under `key`. Compare MACs with ``constantTimeEquals(_:_:)``.
    ///
    /// OpenSSL fails here only when it cannot allocate memory; that stops the process
    /// (a precondition failure) rather than returning a wrong MAC.
    /// - Parameters:
    ///   - data: the message.
    ///   - key: the key; any length (keys longer than 64 bytes are hashed first, per RFC 2104).
    /// - Returns: 32 bytes.
    public static func authenticate(_ data: [UInt8], key: SymmetricKey) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: byteCount)
        let result = mac.withUnsafeMutableBytes { output in
            data.withUnsafeBytes { message in
                key.withUnsafeBytes { keyBytes in
                    Result { () throws(RainError) in try authenticate(message, key: keyBytes, into: output) }
                }
            }
        }
        switch result {
        case .success: return mac
        case .failure(let error): preconditionFailure("HMAC-SHA256: \(error)")
        }
    }

    /// Writes the HMAC-SHA256 of `message` under `key` into the first 32 bytes of `output`.
    /// - Throws: RAIN_502 when `HMAC` fails.
    static func authenticate(
        _ message: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(RainError) {
        try HMACOneShot.authenticate(.sha256, message, key: key, into: output)
    }
}
