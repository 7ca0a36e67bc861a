internal import COpenSSL
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
        guard output.count >= byteCount, let outputBase = output.baseAddress else {
            throw RainError(.internalError, "HMAC-SHA256 output buffer is too small")
        }
        guard key.count <= Int(Int32.max) else {
            throw RainError.invalid("HMAC key is too long", field: "key")
        }
        var length: UInt32 = 0
        let result = withNonNullBytes(key) { keyPointer, keyCount in
            withNonNullBytes(message) { messagePointer, messageCount in
                HMAC(
                    EVP_sha256(), keyPointer, Int32(keyCount), messagePointer, messageCount,
                    outputBase.assumingMemoryBound(to: UInt8.self), &length)
            }
        }
        guard result != nil else { throw RainError.openSSL("HMAC(SHA-256)") }
        guard length == UInt32(byteCount) else {
            throw RainError(.internalError, "HMAC(SHA-256) returned \(length) bytes")
        }
    }
}
