internal import CSystem
import Glibc
import RainCore

/// The readiness bits of an `Epoll` registration or event.
public struct EpollEvents: OptionSet, Sendable, Hashable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `EPOLLIN`: readable (or a connection to accept).
    public static let input = EpollEvents(rawValue: RAIN_EPOLLIN)
    /// `EPOLLOUT`: writable.
    public static let output = EpollEvents(rawValue: RAIN_EPOLLOUT)
    /// `EPOLLERR`: an error is pending (always reported, never needs asking for).
    public static let error = EpollEvents(rawValue: RAIN_EPOLLERR)
    /// `EPOLLHUP`: both directions are closed (always reported).
    public static let hangUp = EpollEvents(rawValue: RAIN_EPOLLHUP)
    /// `EPOLLRDHUP`: the peer finished sending.
    public static let readHangUp = EpollEvents(rawValue: RAIN_EPOLLRDHUP)
}

/// One event `Epoll.wait` reported: what the descriptor registered with `token` is ready for.
public struct EpollEvent: Sendable, Equatable {
    public var events: EpollEvents
    public var token: UInt64
    public init(events: EpollEvents = [], token: UInt64 = 0) {
        self.events = events
        self.token = token
    }
}

/// An epoll instance (close-on-exec) with named operations: `add`, `modify`, `delete`, `wait`.
/// Owns its descriptor (closed by `deinit`) and the buffer `wait` fills. Used by one thread (an
/// event loop), so it is not `Sendable`.
public final class Epoll {
    /// The epoll descriptor.
    public let descriptor: Int32
    /// Filled by `epoll_wait`; a raw allocation, so the loop's every wait takes no exclusivity
    /// check or uniqueness test of an array (they showed in the per-call instruction count).
    private let buffer: UnsafeMutableBufferPointer<rain_epoll_event>

    /// Creates an epoll instance.
    /// - Parameter maximumEvents: the most events one `wait` reports (1 to 256).
    /// - Throws: RAIN_502 naming `epoll_create1`.
    public init(maximumEvents: Int = 128) throws(RainError) {
        descriptor = try Syscall.call("epoll_create1") { rain_epoll_create() }
        buffer = .allocate(capacity: min(max(1, maximumEvents), 256))
        buffer.initialize(repeating: rain_epoll_event())
    }

    deinit {
        Syscall.closeUnchecked(descriptor, because: .eventDescriptor)
        buffer.deallocate()
    }

    private enum Operation: Int32 {
        // EPOLL_CTL_ADD, EPOLL_CTL_DEL, EPOLL_CTL_MOD
        case add = 1, delete = 2, modify = 3
        var name: String {
            switch self {
            case .add: return "epoll_ctl add"
            case .delete: return "epoll_ctl delete"
            case .modify: return "epoll_ctl modify"
            }
        }
    }

    private func control(_ operation: Operation, _ fd: Int32, _ events: EpollEvents, _ token: UInt64) throws(RainError) {
        try Syscall.call(operation.name) { rain_epoll_ctl(descriptor, operation.rawValue, fd, events.rawValue, token) }
    }

    /// Watches `fd` for `events`; `wait` reports them with `token`.
    /// - Throws: RAIN_502 naming `epoll_ctl add` (`EEXIST` when `fd` is already watched).
    public func add(_ fd: Int32, events: EpollEvents, token: UInt64) throws(RainError) {
        try control(.add, fd, events, token)
    }

    /// Changes what `fd` is watched for, and its token.
    /// - Throws: RAIN_502 naming `epoll_ctl modify` (`ENOENT` when `fd` is not watched).
    public func modify(_ fd: Int32, events: EpollEvents, token: UInt64) throws(RainError) {
        try control(.modify, fd, events, token)
    }

    /// Stops watching `fd`.
    /// - Throws: RAIN_502 naming `epoll_ctl delete` (`ENOENT` when `fd` is not watched).
    public func delete(_ fd: Int32) throws(RainError) {
        try control(.delete, fd, [], 0)
    }

    /// Stops watching `fd` just before it is closed, without looking at the result: closing a
    /// descriptor (never duplicated here) takes it out of the interest list anyway, so the delete
    /// only makes that explicit and a failure has nothing to report.
    public func deleteBeforeClose(_ fd: Int32) {
        _ = rain_epoll_ctl(descriptor, Operation.delete.rawValue, fd, 0, 0)
    }

    /// Waits for events, calling again when interrupted.
    /// - Parameters:
    ///   - events: receives the events; it grows to the instance's `maximumEvents` if smaller.
    ///   - timeoutMilliseconds: -1 waits until an event comes; 0 does not wait.
    /// - Returns: how many events were stored at the front of `events`; 0 on timeout.
    /// - Throws: RAIN_502 naming `epoll_wait`.
    public func wait(into events: inout [EpollEvent], timeoutMilliseconds: Int32) throws(RainError) -> Int {
        let epollFD = descriptor
        let raw = buffer
        let count = Int(
            try Syscall.call("epoll_wait") { rain_epoll_wait(epollFD, raw.baseAddress, Int32(raw.count), timeoutMilliseconds) })
        if events.count < buffer.count {
            events.append(contentsOf: repeatElement(EpollEvent(), count: buffer.count - events.count))
        }
        for i in 0..<count {
            events[i] = EpollEvent(events: EpollEvents(rawValue: buffer[i].events), token: buffer[i].token)
        }
        return count
    }
}
