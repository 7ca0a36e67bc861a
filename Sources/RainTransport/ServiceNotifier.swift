import FoundationEssentials
import Glibc
import RainCore
import RainSystem

/// Tells the service manager how the daemon is doing: the `sd_notify(3)` protocol, without
/// libsystemd. Each message is one datagram of `KEY=value` lines on an `AF_UNIX` `SOCK_DGRAM`
/// socket whose address is in `NOTIFY_SOCKET` (a path, or `@name` for an abstract address).
///
/// Sending never blocks and never fails the daemon: a message that cannot be sent is logged.
public final class ServiceNotifier: Sendable {
    /// The socket address as `NOTIFY_SOCKET` gave it (for logs).
    public let address: String
    private let addressBytes: [UInt8]
    private let isAbstract: Bool
    private let descriptor: Int32
    private let logger: Logger

    private init(address: String, addressBytes: [UInt8], isAbstract: Bool, descriptor: Int32, logger: Logger) {
        self.address = address
        self.addressBytes = addressBytes
        self.isAbstract = isAbstract
        self.descriptor = descriptor
        self.logger = logger
    }

    deinit { Syscall.closeUnchecked(descriptor, because: .socket) }

    /// Reads `NOTIFY_SOCKET` and removes it from the environment, so programs the daemon starts
    /// cannot speak for it. Call it before any other thread reads the environment.
    /// - Returns: a notifier, or nil when the variable is unset, or unusable (logged).
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger
    ) -> ServiceNotifier? {
        guard let value = environment["NOTIFY_SOCKET"] else { return nil }
        unsetenv("NOTIFY_SOCKET")
        let isAbstract = value.hasPrefix("@")
        let bytes = Array((isAbstract ? String(value.dropFirst()) : value).utf8)
        // An abstract name fills sun_path after its leading NUL; a path needs room for its NUL.
        let room = MemoryLayout<sockaddr_un>.size - (MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2) - 1
        guard isAbstract || value.hasPrefix("/"), !bytes.isEmpty, bytes.count <= room, !bytes.contains(0) else {
            logger.warning("notify.unsupported_socket", ["address": value])
            return nil
        }
        let fd: Int32
        do {
            fd = try Syscall.socket(family: AF_UNIX, type: Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
        } catch {
            logger.warning("notify.failed", ["address": value, "error": "\(ErrnoError(code: error.errno ?? 0))"])
            return nil
        }
        return ServiceNotifier(address: value, addressBytes: bytes, isAbstract: isAbstract, descriptor: fd, logger: logger)
    }

    /// Sends `READY=1`, a status line and `MAINPID`: the daemon is serving.
    public func ready(status: String) {
        send(["READY=1", "STATUS=\(status)", "MAINPID=\(getpid())"])
    }

    /// Sends `STOPPING=1` and a status line: the daemon is draining and will exit.
    public func stopping(status: String) {
        send(["STOPPING=1", "STATUS=\(status)"])
    }

    /// Sends the given `KEY=value` assignments as one datagram.
    /// - Returns: true when the datagram was sent.
    @discardableResult
    public func send(_ assignments: [String]) -> Bool {
        let message = Array(assignments.joined(separator: "\n").utf8)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let offset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2
        let start = isAbstract ? 1 : 0  // an abstract address starts with a NUL byte
        withUnsafeMutableBytes(of: &addr.sun_path) { buf in
            for (i, b) in addressBytes.enumerated() { buf[start + i] = b }
        }
        // Abstract names are exactly as long as given; a path's length counts its NUL.
        let length = socklen_t(offset + start + addressBytes.count + (isAbstract ? 0 : 1))
        let sent = message.withUnsafeBytes { body in
            withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    Result { () throws(RainError) in try Syscall.sendDatagram(descriptor, body, to: address, length: length) }
                }
            }
        }
        let reason: String
        switch sent {
        case .success(.processed(let count)) where count == message.count: return true
        case .success(.processed): reason = "short write"
        case .success(.wouldBlock): reason = "\(ErrnoError(code: EAGAIN))"
        case .failure(let error): reason = "\(ErrnoError(code: error.errno ?? 0))"
        }
        logger.warning("notify.failed", ["address": address, "error": reason])
        return false
    }
}
