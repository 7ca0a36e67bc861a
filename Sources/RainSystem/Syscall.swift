import Glibc
import RainCore

/// The one wrapper every system call of the package goes through (in the manner of swift-nio's
/// `NIOPosix/System.swift`): it calls again when the call was interrupted by a signal (`EINTR`),
/// hands back `EAGAIN` / `EWOULDBLOCK` as `IOResult.wouldBlock` where the caller asked for a
/// non-blocking call, and turns any other `errno` into a `RainError` that names the call and gives
/// `strerror`'s text, with the errno kept as its `underlying` `ErrnoError`.
///
/// Messages name the call and, for file calls, the path: never a buffer's contents, so a secret
/// being read or written cannot reach a message.
///
/// The named wrappers (`read`, `sendNonBlocking`, `accept`, `open`, `fsync`, …) are in the
/// `Syscall+…` files; `Epoll` and `EventFD` own those descriptors.
public enum Syscall {
    /// Calls `body` until it does not fail with `EINTR`; returns its result (never negative), or
    /// the errno it failed with. `errno` is read right after the call, before anything else can
    /// change it (the reason for `@inline(never)`, as in swift-nio).
    /// - Parameter body: the system call; returns -1 (or any negative value) and sets errno on failure.
    @inline(never)
    public static func retrying<T: FixedWidthInteger>(_ body: () -> T) -> Result<T, ErrnoError> {
        while true {
            let result = body()
            if result >= 0 { return .success(result) }
            let e = errno
            if e == EINTR { continue }
            return .failure(ErrnoError(code: e))
        }
    }

    /// Makes a blocking system call: retries `EINTR`, throws for any other failure.
    /// - Parameters:
    ///   - name: the call, for the message (`"listen"`, `"epoll_ctl add"`).
    ///   - path: the file the call is about, if any, for the message.
    ///   - code: the code of the error thrown (RAIN_502 unless told).
    ///   - body: the call.
    /// - Returns: the call's non-negative result.
    /// - Throws: a `RainError` with `code`, naming `name` (and `path`), with errno's text.
    @discardableResult
    public static func call<T: FixedWidthInteger>(
        _ name: String, path: String? = nil, code: RainError.Code = .internalError, _ body: () -> T
    ) throws(RainError) -> T {
        switch retrying(body) {
        case .success(let value): return value
        case .failure(let e): throw error(name, path: path, e, code: code)
        }
    }

    /// Makes a call on a non-blocking descriptor: retries `EINTR`, returns `.wouldBlock` for
    /// `EAGAIN` / `EWOULDBLOCK`, throws for any other failure.
    /// - Throws: as `call(_:path:code:_:)`.
    public static func callNonBlocking<T: FixedWidthInteger>(
        _ name: String, path: String? = nil, code: RainError.Code = .internalError, _ body: () -> T
    ) throws(RainError) -> IOResult<T> {
        switch retrying(body) {
        case .success(let value): return .processed(value)
        case .failure(let e) where e.isWouldBlock: return .wouldBlock
        case .failure(let e): throw error(name, path: path, e, code: code)
        }
    }

    /// The error of a failed call: `"<name> failed: <strerror>"`, or `"cannot <name> <path>:
    /// <strerror>"` for a call about a file, with `errno` as the underlying cause.
    public static func error(
        _ name: String, path: String? = nil, _ errno: ErrnoError, code: RainError.Code = .internalError
    ) -> RainError {
        let message = path.map { "cannot \(name) \($0): \(errno)" } ?? "\(name) failed: \(errno)"
        return RainError(code, message, underlying: errno)
    }
}

/// What a call on a non-blocking descriptor did: its result, or nothing because it would block.
public enum IOResult<Value: Sendable>: Sendable {
    /// The call completed with this result.
    case processed(Value)
    /// The descriptor is not ready (`EAGAIN` / `EWOULDBLOCK`): wait for readiness and call again.
    case wouldBlock
}

extension IOResult: Equatable where Value: Equatable {}

/// An errno value, kept as the underlying cause of a `RainError`; prints as `strerror`'s text.
public struct ErrnoError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The errno value.
    public var code: Int32
    /// Wraps an errno value.
    public init(code: Int32) { self.code = code }
    /// `strerror`'s text for the value.
    public var description: String { String(cString: strerror(code)) }
    /// True for `EAGAIN` / `EWOULDBLOCK`: a non-blocking descriptor is not ready.
    public var isWouldBlock: Bool { code == EAGAIN || code == EWOULDBLOCK }
}

extension RainError {
    /// The errno behind this error, if a system call failed.
    public var errno: Int32? { (underlying as? ErrnoError)?.code }
}
