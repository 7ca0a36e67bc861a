internal import CSystem
import Glibc
import RainCore

/// An eventfd (non-blocking, close-on-exec): a counter one thread adds to, to wake another that
/// waits for it to be readable in epoll or poll. Owns its descriptor (closed by `deinit`).
public final class EventFD: Sendable {
    /// The descriptor, to register with `Epoll` or `Syscall.poll`.
    public let descriptor: Int32

    /// Creates the eventfd, its counter at 0.
    /// - Throws: RAIN_502 naming `eventfd`.
    public init() throws(RainError) {
        descriptor = try Syscall.call("eventfd") { rain_eventfd() }
    }

    deinit { Syscall.closeUnchecked(descriptor, because: .eventDescriptor) }

    /// Adds 1 to the counter, which makes the descriptor readable. Safe from any thread. Nothing
    /// to report: the only failure of an eventfd write is `EAGAIN` when the counter is near
    /// 2^64, and then the descriptor is already readable, which is all a signal is for.
    public func signal() {
        var one: UInt64 = 1
        _ = withUnsafeBytes(of: &one) { bytes in
            Syscall.retrying { Glibc.write(descriptor, bytes.baseAddress, 8) }
        }
    }

    /// Resets the counter to 0, so the descriptor is no longer readable until the next `signal`.
    /// Nothing to report: the only failure is `EAGAIN` when the counter is already 0.
    public func drain() {
        var counter: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &counter) { bytes in
            Syscall.retrying { Glibc.read(descriptor, bytes.baseAddress, 8) }
        }
    }
}
