import Glibc
import RainCore
import RainSecurityKey
import RainSystem
import RainTransport
import Synchronization

/// The tests' security keys: each Unix socket `*.sock` in a directory is one key, whose 64-byte
/// HID reports go over the socket as they are (one report a record, each direction). The
/// integration tests serve software CTAP2 keys there, so real libfido2 in a real daemon talks to
/// keys a test can touch, unplug and give a PIN.
///
/// Only `rainwalletd-test` may use it: ``TestSecurityKeysEnvironment`` is refused by `rainwalletd`
/// (`DaemonHooks`), which lists the machine's hidraw keys.
enum SocketSecurityKeys {
    /// The keys in `directory` now, registered for libfido2's injected io (a socket that went away
    /// is a key that was unplugged: it is no longer listed).
    static func list(directory: String) throws(RainError) -> [SecurityKeyInfo] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name.hasSuffix(".sock") { names.append(name) }
        }
        var listing: [(path: String, manufacturer: String, product: String)] = []
        for name in names.sorted() {
            let socketPath = directory + "/" + name
            let path = InjectedSecurityKeys.pathPrefix + "socket:" + socketPath
            InjectedSecurityKeys.register(SocketHIDTransport(socketPath: socketPath), path: path)
            listing.append((path, "Rain Test", "socket key " + name))
        }
        return try SecurityKeys.injected(listing)
    }
}

/// `RAINWALLET_TEST_SECURITY_KEYS=DIR`: the daemon's security keys are the sockets in `DIR`
/// (`rainwalletd-test` only).
public enum TestSecurityKeysEnvironment {
    /// The variable's name.
    public static let variable = "RAINWALLET_TEST_SECURITY_KEYS"
}

/// One key behind a Unix socket: a connection per `open`, 64-byte records each way.
// @unchecked Sendable: `descriptor` is guarded by its Mutex; reads and writes use the descriptor
// taken under the lock, and a write during a blocked read (libfido2's cancel) is a send on a
// socket another thread reads, which the kernel allows.
final class SocketHIDTransport: SecurityKeyHIDTransport, @unchecked Sendable {
    private let socketPath: String
    private let descriptor = Mutex<Int32?>(nil)
    private static let reportByteCount = 64

    init(socketPath: String) { self.socketPath = socketPath }

    func open() -> Bool {
        guard let fd = try? UnixSocket.connect(path: socketPath) else { return false }
        descriptor.withLock { previous in
            if let previous { Syscall.closeUnchecked(previous, because: .socket) }
            previous = fd
        }
        return true
    }

    func close() {
        descriptor.withLock { fd in
            if let open = fd { Syscall.closeUnchecked(open, because: .socket) }
            fd = nil
        }
    }

    func readReport(timeoutMilliseconds: Int) -> [UInt8]? {
        guard let fd = descriptor.withLock({ $0 }) else { return nil }
        var polled = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        let deadline = timeoutMilliseconds < 0 ? nil : ContinuousClock.now + .milliseconds(timeoutMilliseconds)
        while true {
            var wait: Int32 = -1
            if let deadline {
                let left = deadline - ContinuousClock.now
                guard left > .zero else { return nil }
                wait = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            }
            guard let ready = try? Syscall.poll(&polled, timeoutMilliseconds: wait) else { return nil }
            if ready > 0 { break }
        }
        var report = [UInt8](repeating: 0, count: Self.reportByteCount)
        let complete = report.withUnsafeMutableBytes { buffer in
            (try? Syscall.readExactly(fd, into: buffer)) ?? false
        }
        return complete ? report : nil
    }

    func writeReport(_ report: [UInt8]) -> Bool {
        guard report.count == Self.reportByteCount, let fd = descriptor.withLock({ $0 }) else { return false }
        return report.withUnsafeBytes { bytes in (try? Syscall.sendAll(fd, bytes)) != nil }
    }
}
