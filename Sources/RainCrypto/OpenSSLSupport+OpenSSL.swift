internal import COpenSSL
import RainCore

/// The entries of OpenSSL's per-thread error queue at the time of a failure, kept as
/// `RainError.underlying` for debugging. OpenSSL error strings name a library, a function and a
/// reason; they never contain key material.
struct OpenSSLErrorQueue: Error, Sendable, CustomStringConvertible {
    var entries: [String]

    var description: String {
        entries.isEmpty ? "OpenSSL recorded no error" : entries.joined(separator: "; ")
    }

    /// Reads and empties the calling thread's error queue, so a stale entry cannot be blamed on a
    /// later, unrelated call.
    static func drain() -> OpenSSLErrorQueue {
        var entries: [String] = []
        // Bounded: the queue holds at most 16 entries, and a stuck queue must not hang us.
        for _ in 0..<16 {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            buffer.withUnsafeMutableBufferPointer { ERR_error_string_n(code, $0.baseAddress, $0.count) }
            let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            entries.append(String(decoding: bytes, as: UTF8.self))
        }
        ERR_clear_error()
        return OpenSSLErrorQueue(entries: entries)
    }
}

extension RainError {
    /// RAIN_502 for a failed OpenSSL call. Empties the OpenSSL error queue and keeps its entries as
    /// the underlying cause; the message names only the operation.
    static func openSSL(_ operation: String) -> RainError {
        RainError(.internalError, "\(operation) failed", underlying: OpenSSLErrorQueue.drain())
    }
}

/// Calls `body` with a pointer that is never NULL, even for an empty buffer: several OpenSSL
/// functions reject a NULL pointer even when the length is zero.
func withNonNullBytes<R>(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafePointer<UInt8>, Int) -> R) -> R {
    if let base = bytes.baseAddress, bytes.count > 0 {
        return body(base.assumingMemoryBound(to: UInt8.self), bytes.count)
    }
    let zero: UInt8 = 0
    return withUnsafePointer(to: zero) { body($0, 0) }
}

/// `withNonNullBytes` for an array.
func withNonNullBytes<R>(_ bytes: [UInt8], _ body: (UnsafePointer<UInt8>, Int) -> R) -> R {
    bytes.withUnsafeBytes { withNonNullBytes($0, body) }
}
