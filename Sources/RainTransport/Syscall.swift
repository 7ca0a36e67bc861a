import Foundation
import RainCore

/// One wrapper for syscalls: retries EINTR, maps failures to `RainError` with errno's text.
enum Syscall {
    /// Calls `body` until it does not fail with EINTR. Returns its result, or throws for -1.
    @discardableResult
    static func call<T: BinaryInteger>(
        _ name: String, code: RainError.Code = .internalError, _ body: () -> T
    ) throws(RainError) -> T {
        while true {
            let r = body()
            if r >= 0 { return r }
            let e = errno
            if e == EINTR { continue }
            throw RainError(code, "\(name) failed: \(String(cString: strerror(e)))", underlying: ErrnoError(code: e))
        }
    }
}

/// An errno value, kept as the underlying cause of a `RainError`.
public struct ErrnoError: Error, Sendable, Equatable {
    public var code: Int32
    public init(code: Int32) { self.code = code }
}

extension RainError {
    /// The errno behind this error, if a syscall failed.
    public var errno: Int32? { (underlying as? ErrnoError)?.code }
}
