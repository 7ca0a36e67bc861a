internal import COpenSSL
import RainCore

/// SHA-256 (FIPS 180-4) through OpenSSL's `EVP_Digest`.
public enum SHA256 {
    /// The digest length in bytes.
    static let byteCount = 32

    /// The SHA-256 digest of `data`.
    ///
    /// OpenSSL fails here only when it cannot allocate memory; that stops the process
    /// (a precondition failure) rather than returning a wrong digest.
    /// - Parameter data: the message.
    /// - Returns: 32 bytes.
    public static func hash(_ data: [UInt8]) -> [UInt8] {
        data.withUnsafeBytes { hash($0) }
    }

    /// The SHA-256 digest of raw bytes; see the public `hash(_:)`.
    static func hash(_ data: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: byteCount)
        let result = digest.withUnsafeMutableBytes { output in
            Result { () throws(RainError) in try hash(data, into: output) }
        }
        switch result {
        case .success: return digest
        case .failure(let error): preconditionFailure("SHA-256: \(error)")
        }
    }

    /// Writes the digest of `data` into the first 32 bytes of `output`.
    /// - Throws: RAIN_502 when `EVP_Digest` fails.
    static func hash(_ data: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(RainError) {
        guard output.count >= byteCount, let outputBase = output.baseAddress else {
            throw RainError(.internalError, "SHA-256 output buffer is too small")
        }
        var length: UInt32 = 0
        let status = withNonNullBytes(data) { pointer, count in
            EVP_Digest(
                pointer, count, outputBase.assumingMemoryBound(to: UInt8.self), &length, EVP_sha256(), nil)
        }
        guard status == 1 else { throw RainError.openSSL("EVP_Digest(SHA-256)") }
        guard length == UInt32(byteCount) else {
            throw RainError(.internalError, "EVP_Digest(SHA-256) returned \(length) bytes")
        }
    }
}
