import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Synchronization
import Testing

extension DaemonHarness {
    /// A client library provider talking to this harness's daemon.
    func provider(profile: String = ProfileName.defaultName) -> RainProvider {
        RainProvider(RainWalletConfig(profile: profile, socketPath: socketPath))
    }

    /// Sends a code to `contact` through `provider`, reads it from the outbox and confirms it.
    /// - Returns: the new session, whether the account was created, and the code used.
    @discardableResult
    func logIn(
        _ provider: RainProvider, _ contact: RainWalletContact
    ) async throws -> (session: SessionSnapshot, accountCreated: Bool, code: String) {
        let value = try contact.normalized().value
        let profile = provider.config.profile
        let before = try await outbox(profile: profile).filter { $0.contact?.value == value }.count
        try await provider.sendLoginCode(to: contact)
        let code = try await waitForCode(for: value, count: before + 1, profile: profile)
        let (session, created) = try await provider.confirmLoginCodeReturningSession(code)
        return (session, created, code)
    }
}

/// Runs `body` and returns the `RainError` it threw, or nil when it succeeded. Any other error is
/// recorded as an issue.
func rainError(_ body: () async throws -> Void) async -> RainError? {
    do {
        try await body()
    } catch let e as RainError {
        return e
    } catch {
        Issue.record("expected a RainError, got \(error)")
    }
    return nil
}

/// A code that is certainly not `code` (same shape).
func wrongCode(for code: String) -> String {
    String(format: "%06d", ((Int(code) ?? 0) + 1) % 1_000_000)
}

/// Polls `condition` every 10 ms until it holds; false at the deadline.
func eventually(timeout: Duration = .seconds(10), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
}

/// Values appended from any task, read by the test.
final class Recorder<T: Sendable>: Sendable {
    private let values = Mutex<[T]>([])
    func append(_ v: T) { values.withLock { $0.append(v) } }
    var all: [T] { values.withLock { $0 } }
    var count: Int { values.withLock { $0.count } }
}

/// Parses the CLI's JSON output.
func jsonObject(_ text: String) throws -> [String: Any] {
    let any = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    return try #require(any as? [String: Any], "not a JSON object: \(text)")
}

/// RFC 3339 UTC with a `Z` suffix, as the CLI prints times; returns the date.
func parseRFC3339UTC(_ text: String) -> Date? {
    guard text.hasSuffix("Z") else { return nil }
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime]
    if let d = f.date(from: text) { return d }
    f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return f.date(from: text)
}

/// `stat` of a path: file type and permission bits, or nil when it does not exist.
func fileMode(_ path: String) -> (type: mode_t, permissions: mode_t)? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return (st.st_mode & S_IFMT, st.st_mode & 0o7777)
}

/// Runs blocking work on a thread of its own, so the two-thread Swift concurrency pool never waits
/// on a socket read.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
        let t = Thread {
            c.resume(with: Result { try body() })
        }
        t.start()
    }
}

/// A deliberately dumb, blocking client for the daemon's socket: writes raw bytes and reads raw
/// frames, so tests can send what `ClientConnection` never would. Reads time out after 10 s.
final class RawConnection: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let fd: Int32

    init(path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)  // a failure-only deadline: a loaded machine can take 10 s
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { buf in
            for (i, b) in bytes.enumerated() { buf[i] = b }
            buf[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            let e = errno
            close(fd)
            throw Failure(description: "connect \(path): \(String(cString: strerror(e)))")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Writes all of `bytes` (MSG_NOSIGNAL: a closed peer is an error, not a signal).
    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }  // never: offset < count
                return send(fd, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "send: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
    }

    /// Reads exactly `count` bytes; nil on end of stream before the first byte.
    func read(count: Int) throws -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }  // never: got < count
                return Glibc.read(fd, base + got, count - got)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "read: \(String(cString: strerror(errno)))")
            }
            if n == 0 {
                if got == 0 { return nil }
                throw Failure(description: "end of stream inside a frame")
            }
            got += n
        }
        return out
    }

    /// The next frame's envelope; nil at end of stream.
    func readEnvelope() throws -> Envelope? {
        guard let header = try read(count: 4) else { return nil }
        let n = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard n <= Frame.defaultMaximumLength else { throw Failure(description: "the daemon sent a frame of \(n) bytes") }
        let body = try read(count: n) ?? []
        return try Envelope.decode(body)
    }

    /// True when the daemon closes the connection (reads end of stream) within the read timeout.
    func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = Glibc.read(fd, &byte, 1)
            if n == 0 { return true }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == ECONNRESET) { return true }
            return false
        }
    }
}

extension Envelope {
    /// A request envelope framed for the wire.
    static func requestFrame(id: UInt64, method: String, payload: [UInt8]) throws -> [UInt8] {
        try Envelope(requestID: id, kind: .request(WireRequest(method: method, payload: payload))).encodeFrame()
    }

    /// The response this envelope carries, or nil.
    var response: WireResponse? {
        if case .response(let r) = kind { return r }
        return nil
    }
}
