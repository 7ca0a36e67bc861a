import Dispatch
import Foundation
import Glibc

/// Serves a ``SoftCTAP2Authenticator`` on a Unix socket, for a daemon started with
/// `RAINWALLET_TEST_SECURITY_KEYS=DIR` (`rainwalletd-test` only): the daemon's libfido2 reaches
/// the key through injected io that sends each 64-byte HID report over the socket, so the test
/// that owns the key can touch it, unplug it and give it a PIN while a real daemon uses it.
///
/// One connection at a time is served (libfido2 opens a key once per ceremony); each connection
/// is one `open` of the key.
// @unchecked Sendable: `listener` is written only in `init`; `connections` is guarded by its lock.
public final class SoftCTAP2SocketServer: @unchecked Sendable {
    /// The key served.
    public let key: SoftCTAP2Authenticator
    /// The socket's path (`DIR/NAME.sock`).
    public let socketPath: String
    private let listener: Int32
    private let lock = NSLock()
    private var connections: Set<Int32> = []
    private var isStopped = false
    private static let reportByteCount = 64

    /// Listens on `directory/name.sock` and serves `key` there.
    public init(key: SoftCTAP2Authenticator, directory: String, name: String) throws {
        self.key = key
        socketPath = "\(directory)/\(name).sock"
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw HarnessError("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(socketPath.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            Glibc.close(listener)
            throw HarnessError("socket path too long: \(socketPath)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in pathBytes.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 8) == 0 else {
            Glibc.close(listener)
            throw HarnessError("bind/listen \(socketPath): errno \(errno)")
        }
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Pulls the key out: its socket goes away (the daemon no longer lists it) and the open
    /// connection breaks (a ceremony in progress fails as a removed key).
    public func unplug() {
        key.unplug()
        unlink(socketPath)
        lock.withLock { for fd in connections { Glibc.shutdown(fd, Int32(SHUT_RDWR)) } }
    }

    /// Stops serving and removes the socket.
    public func stop() {
        let wasStopped = lock.withLock {
            defer { isStopped = true }
            for fd in connections { Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
            return isStopped
        }
        guard !wasStopped else { return }
        unlink(socketPath)
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
        key.detach()
    }

    private func acceptLoop() {
        // The key has one queue of input reports: a connection is served once the one before it
        // ended, as the daemon closes a key before it opens it again.
        var previous: DispatchGroup?
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                break
            }
            previous?.wait()
            let admitted = lock.withLock {
                if isStopped { return false }
                connections.insert(fd)
                return true
            }
            guard admitted, key.open() else {
                lock.withLock { _ = connections.remove(fd) }
                Glibc.close(fd)
                continue
            }
            let done = DispatchGroup()
            previous = done
            let finished = ConnectionEnd(fd)
            Thread { [self] in
                // Host to key: each 64-byte output report.
                var report = [UInt8](repeating: 0, count: Self.reportByteCount)
                while Self.readExactly(fd, &report), key.writeReport(report) {}
                finished.end()
                finished.directionEnded()
            }.start()
            Thread { [self] in
                // Key to host: each input report, until the connection or the key goes.
                while !finished.isEnded {
                    guard let report = key.readReport(timeoutMilliseconds: 100) else {
                        if key.isUnplugged { break }
                        continue
                    }
                    let sent = report.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if sent != report.count { break }
                }
                finished.end()
                finished.directionEnded()
            }.start()
            done.enter()
            Thread { [self] in
                // Both directions ended (the two leaves below): the key is closed before the
                // next connection is served.
                while finished.pendingDirections > 0 { usleep(1000) }
                key.close()
                lock.withLock { _ = connections.remove(fd) }
                Glibc.close(fd)
                done.leave()
            }.start()
        }
        Glibc.close(listener)
    }

    private static func readExactly(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
        var offset = 0
        while offset < buffer.count {
            let count = buffer.withUnsafeMutableBytes { raw in
                Glibc.read(fd, raw.baseAddress.map { $0 + offset }, raw.count - offset)
            }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return false }
            offset += count
        }
        return true
    }
}

/// Whether a served connection ended (either direction): the other direction then stops too.
// @unchecked Sendable: `isEndedValue` is guarded by `lock`; `fd` is immutable.
private final class ConnectionEnd: @unchecked Sendable {
    private let fd: Int32
    private let lock = NSLock()
    private var isEndedValue = false
    private var pending = 2

    init(_ fd: Int32) { self.fd = fd }

    var isEnded: Bool { lock.withLock { isEndedValue } }

    /// The directions (host to key, key to host) still served.
    var pendingDirections: Int { lock.withLock { pending } }

    func directionEnded() { lock.withLock { pending -= 1 } }

    func end() {
        lock.withLock { isEndedValue = true }
        Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }
}
