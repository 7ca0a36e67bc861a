import Foundation
import RainCore
import RainCrypto
import RainWire

/// A deliberately dumb client for attacker tests of the listeners: a blocking socket to
/// a Unix path or a TCP port (optionally from a chosen loopback source address, to stand for many
/// hosts), optionally TLS, that writes raw bytes (half frames, whatever) and reads frames with a
/// deadline. Every wait is bounded by the timeout the caller gives.
public final class RawPeer: @unchecked Sendable {
    // @unchecked Sendable: used by one test thread at a time; the descriptor and session are only
    // touched by the calls of that thread.

    /// What a read found.
    public enum ReadOutcome: Sendable, Equatable {
        /// A whole frame, decoded.
        case envelope(Envelope)
        /// The server closed the connection (end of stream or reset) before a whole frame.
        case closed
        /// Nothing conclusive before the deadline.
        case timedOut
    }

    /// The socket.
    public let fd: Int32
    private var tls: TLSSession?
    private var received: [UInt8] = []

    private init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }

    /// Connects to the Unix socket at `path`.
    /// - Throws: `HarnessError` naming the call that failed (for example `connect` with `EAGAIN`
    ///   when the listener's backlog is full).
    public static func unix(path: String) throws -> RawPeer {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: errno \(errno)") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { buf in
            for (i, b) in bytes.enumerated() where i < buf.count - 1 { buf[i] = b }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try closeUnlessZero(rc, fd, "connect \(path)")
        return RawPeer(fd: fd)
    }

    /// Connects to `127.0.0.1:port` (or `host`), from `source` when given (any 127.x.y.z works on
    /// Linux loopback without configuration).
    /// - Throws: `HarnessError` naming the call that failed.
    public static func tcp(port: UInt16, host: String = "127.0.0.1", source: String? = nil) throws -> RawPeer {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: errno \(errno)") }
        func address(_ text: String, port: UInt16) -> sockaddr_in {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            _ = inet_pton(AF_INET, text, &a.sin_addr)
            return a
        }
        if let source {
            var local = address(source, port: 0)
            let rc = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            try closeUnlessZero(rc, fd, "bind \(source)")
        }
        var remote = address(host, port: port)
        let rc = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try closeUnlessZero(rc, fd, "connect \(host):\(port)")
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return RawPeer(fd: fd)
    }

    /// Runs the client side of a TLS 1.3 handshake with `context` (a client context trusting the
    /// server's CA) for `serverName`.
    /// - Returns: false when the server closed the connection or the deadline passed first.
    /// - Throws: the session's `RainError` when the handshake fails.
    public func handshake(_ context: TLSContext, serverName: String = "127.0.0.1", timeout: Duration) throws -> Bool {
        let session = try context.makeClientSession(serverName: serverName)
        tls = session
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let isComplete = try session.handshake()
            guard sendRaw(session.takeOutput()) else { return false }
            if isComplete { return true }
            guard let n = readRaw(into: &buffer, deadline: deadline), n > 0 else { return false }
            session.receive(Array(buffer[0..<n]))
        }
    }

    /// Forgets the TLS session (its memory goes back) while keeping the connection open: for a
    /// flood that only needs to hold connections. Later sends go out unencrypted.
    public func releaseSession() { tls = nil }

    /// True when the server has closed the connection, seen without waiting (a pending end of
    /// stream or reset; frames queued before it are dropped).
    public var isClosedNow: Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 0) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 { continue }
            if n == 0 { return true }
            return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR
        }
    }

    /// Sends `bytes` (encrypted when the handshake was made).
    /// - Returns: false when the server closed the connection (`EPIPE`, `ECONNRESET`).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        guard let tls else { return sendRaw(bytes) }
        do {
            try tls.write(bytes)
        } catch {
            return false
        }
        return sendRaw(tls.takeOutput())
    }

    /// Sends bytes as they are, bypassing TLS (a half TLS record, for example).
    @discardableResult
    public func sendRaw(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Glibc.send(fd, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }

    /// Reads the next frame, waiting at most `timeout`.
    public func readFrame(timeout: Duration) -> ReadOutcome {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            if received.count >= 4 {
                let n = Int(received[0]) << 24 | Int(received[1]) << 16 | Int(received[2]) << 8 | Int(received[3])
                if received.count >= 4 + n {
                    let body = Array(received[4..<4 + n])
                    received.removeFirst(4 + n)
                    guard let envelope = try? Envelope.decode(body) else { return .closed }
                    return .envelope(envelope)
                }
            }
            guard let n = readRaw(into: &buffer, deadline: deadline) else { return .timedOut }
            if n == 0 { return .closed }
            if let tls {
                tls.receive(Array(buffer[0..<n]))
                var plain = [UInt8](repeating: 0, count: 16 * 1024 + 256)
                readLoop: while true {
                    let result = plain.withUnsafeMutableBytes { try? tls.readPlaintext(into: $0) }
                    switch result {
                    case .bytes(let count)?: received += plain[0..<count]
                    case .needsMoreInput?: break readLoop
                    case .closed?, nil: return .closed
                    }
                }
            } else {
                received += buffer[0..<n]
            }
        }
    }

    /// True when the server closes the connection within `timeout` (frames sent before the close
    /// are read and dropped).
    public func isClosedByServer(within timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = deadline - ContinuousClock.now
            if left <= .zero { return false }
            switch readFrame(timeout: left) {
            case .closed: return true
            case .timedOut: return false
            case .envelope: continue
            }
        }
    }

    /// One `read` once the socket is readable: the count (0 at end of stream or on a reset), or
    /// nil at the deadline.
    private func readRaw(into buffer: inout [UInt8], deadline: ContinuousClock.Instant) -> Int? {
        while true {
            let left = deadline - ContinuousClock.now
            if left <= .zero { return nil }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(clamping: max(1, left.milliseconds)))
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return 0  // ECONNRESET and the like: the connection is gone
            }
            return n
        }
    }
}

/// The resident memory of process `pid` (`VmRSS` in /proc/PID/status), in KiB; nil when unreadable.
public func residentKiB(pid: Int32) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return nil }
    return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
}

/// The CPU time (user + system) process `pid` has used, from /proc/PID/stat; nil when unreadable.
public func cpuTime(pid: Int32) -> Duration? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return nil }
    // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
    let ticks = Int(sysconf(Int32(_SC_CLK_TCK)))
    return .milliseconds((user + system) * 1000 / max(1, ticks))
}

/// Throws `HarnessError` "`what`: errno N" and closes `fd` when a call returned non-zero.
private func closeUnlessZero(_ rc: Int32, _ fd: Int32, _ what: String) throws {
    guard rc != 0 else { return }
    let e = errno
    close(fd)
    throw HarnessError("\(what): errno \(e)")
}
