import Dispatch
import FoundationEssentials
import Glibc
import RainCore
import RainSystem
import Synchronization

/// An answer of `MetricsHTTPServer`.
public struct HTTPAnswer: Sendable, Equatable {
    /// The status code (200, 404, 503…).
    public var status: Int
    /// The `Content-Type` header.
    public var contentType: String
    /// The body.
    public var body: String

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: String) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }
}

/// A tiny HTTP/1.1 server for operators' scrapes (`GET /metrics`, `GET /healthz`), apart from the
/// daemon's event loop so that a stuck loop still answers its health check (with a failure).
///
/// One thread polls the listening socket and the requests being read; a request must arrive whole
/// (request line and headers, at most `maximumRequestBytes`) within `readTimeout` of its
/// connection, or the connection is closed: a client that never finishes cannot hold the server,
/// and the others are read meanwhile. A complete request is answered on a concurrent queue (a
/// health check may wait on the store) and the connection closed. At most `maximumConnections`
/// are read or answered at once; more are closed at once. Only `GET` (and `HEAD`) is served;
/// request bodies are not read.
public final class MetricsHTTPServer: Sendable {
    /// Answers a path (without its query); runs on the answering queue and may block briefly.
    public typealias Handler = @Sendable (_ path: String) -> HTTPAnswer

    private let listener: Int32
    private let handler: Handler
    private let logger: Logger
    private let readTimeout: Duration
    private let maximumRequestBytes: Int
    private let maximumConnections: Int
    private let isStopping = Atomic<Bool>(false)
    private let isStarted = Atomic<Bool>(false)
    /// Connections being answered on `answering` (the loop thread counts them with its own).
    private let answeringCount = Atomic<Int>(0)
    private let loop = DispatchQueue(label: "rain.metrics.http")
    private let answering = DispatchQueue(label: "rain.metrics.answer", attributes: .concurrent)
    /// Signalled when the loop thread has returned (its connections closed).
    private let stopped = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - listeningSocket: a listening TCP or Unix socket; the server owns it from now on.
    ///   - readTimeout: how long a connection has to send its whole request.
    ///   - maximumRequestBytes: the most a request line and its headers may take.
    ///   - maximumConnections: the most connections read or answered at once.
    ///   - logger: connection failures (no request content is logged).
    ///   - handler: the answer to each `GET`.
    public init(
        listeningSocket: Int32, readTimeout: Duration = .seconds(5), maximumRequestBytes: Int = 8192,
        maximumConnections: Int = 64, logger: Logger, handler: @escaping Handler
    ) {
        self.listener = listeningSocket
        self.readTimeout = readTimeout
        self.maximumRequestBytes = maximumRequestBytes
        self.maximumConnections = maximumConnections
        self.logger = logger
        self.handler = handler
    }

    /// Starts serving on the server's own thread.
    public func start() {
        guard !isStarted.exchange(true, ordering: .acquiringAndReleasing) else { return }
        loop.async { self.serve() }
    }

    /// Stops accepting, closes the connections being read and the listening socket; waits (at most
    /// a second) for the loop to return. Answers being written finish on their own.
    public func stop() {
        guard !isStopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Never started (the daemon stopped while starting): only the socket is left to close.
        if !isStarted.exchange(true, ordering: .acquiringAndReleasing) {
            Syscall.closeUnchecked(listener, because: .socket)
            return
        }
        _ = stopped.wait(timeout: .now() + 1)
    }

    // MARK: the loop thread

    /// A request being read.
    private struct Pending {
        var bytes: [UInt8] = []
        let deadline: ContinuousClock.Instant
    }

    /// How often the loop looks at `isStopping` when nothing happens.
    private static let stopCheckMilliseconds: Int64 = 200

    private func serve() {
        Syscall.setCurrentThreadName("rain-metrics")
        var pending: [Int32: Pending] = [:]
        defer {
            for fd in pending.keys { Syscall.closeUnchecked(fd, because: .socket) }
            Syscall.closeUnchecked(listener, because: .socket)
            stopped.signal()
        }
        do {
            try Syscall.setNonBlocking(listener, true)
        } catch {
            logger.error("metrics.failed", ["error": error.message])
            return
        }
        var buffer = [UInt8](repeating: 0, count: 2048)
        while !isStopping.load(ordering: .acquiring) {
            let now = ContinuousClock.now
            // Connections out of time are closed unanswered.
            for (fd, request) in pending where request.deadline <= now {
                pending.removeValue(forKey: fd)
                Syscall.closeUnchecked(fd, because: .socket)
            }
            var wait = Self.stopCheckMilliseconds
            if let soonest = pending.values.map(\.deadline).min() {
                wait = max(1, min(wait, (now.duration(to: soonest)).milliseconds + 1))
            }
            var descriptors = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            descriptors += pending.keys.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            do {
                guard try Syscall.poll(&descriptors, timeoutMilliseconds: Int32(wait)) > 0 else { continue }
            } catch {
                logger.error("metrics.failed", ["error": error.message])
                return
            }
            for descriptor in descriptors.dropFirst() where descriptor.revents != 0 {
                read(descriptor.fd, into: &pending, buffer: &buffer)
            }
            if descriptors[0].revents != 0 { accept(into: &pending) }
        }
    }

    private func accept(into pending: inout [Int32: Pending]) {
        while true {
            let fd: Int32
            do {
                guard case .processed(let accepted) = try Syscall.accept(listener) else { return }
                fd = accepted
            } catch {
                // Out of descriptors, or the peer left already: the next poll tries again.
                logger.warning("metrics.accept_failed", ["error": error.message])
                return
            }
            guard pending.count + answeringCount.load(ordering: .relaxed) < maximumConnections else {
                Syscall.closeUnchecked(fd, because: .socket)
                continue
            }
            pending[fd] = Pending(deadline: .now + readTimeout)
        }
    }

    private func read(_ fd: Int32, into pending: inout [Int32: Pending], buffer: inout [UInt8]) {
        let result = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(RainError) in try Syscall.readNonBlocking(fd, into: raw) }
        }
        switch result {
        case .success(.wouldBlock):
            return
        case .success(.processed(let count)) where count > 0:
            pending[fd]?.bytes += buffer[0..<count]
        case .success(.processed), .failure:
            pending.removeValue(forKey: fd)
            Syscall.closeUnchecked(fd, because: .socket)
            return
        }
        guard let bytes = pending[fd]?.bytes else { return }
        if let end = Self.endOfHeaders(bytes) {
            pending.removeValue(forKey: fd)
            answer(fd, head: Array(bytes[..<end]))
        } else if bytes.count > maximumRequestBytes {
            pending.removeValue(forKey: fd)
            answer(fd, fixed: HTTPAnswer(status: 431, body: "request too large\n"))
        }
    }

    /// The index of the blank line ending the headers (`\r\n\r\n`, or `\n\n`), or nil.
    static func endOfHeaders(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 2 else { return nil }
        for i in 1..<bytes.count where bytes[i] == 0x0A {
            if bytes[i - 1] == 0x0A { return i - 1 }
            if i >= 3, bytes[i - 1] == 0x0D, bytes[i - 2] == 0x0A, bytes[i - 3] == 0x0D { return i - 3 }
        }
        return nil
    }

    // MARK: answering

    private func answer(_ fd: Int32, head: [UInt8]? = nil, fixed: HTTPAnswer? = nil) {
        answeringCount.add(1, ordering: .relaxed)
        answering.async {
            defer {
                Syscall.closeUnchecked(fd, because: .socket)
                self.answeringCount.subtract(1, ordering: .relaxed)
            }
            var isHead = false
            let reply: HTTPAnswer
            if let fixed {
                reply = fixed
            } else {
                let request = Self.requestLine(head ?? [])
                isHead = request?.method == "HEAD"
                reply = self.reply(to: request)
            }
            self.write(reply, isHead: isHead, to: fd)
        }
    }

    /// The method and path (without the query) of a request's first line, or nil when malformed.
    static func requestLine(_ head: [UInt8]) -> (method: String, path: String)? {
        let firstLine = head.prefix { $0 != 0x0D && $0 != 0x0A }
        let parts = firstLine.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, let method = String(validating: parts[0], as: UTF8.self),
            let target = String(validating: parts[1], as: UTF8.self),
            let version = String(validating: parts[2], as: UTF8.self), version.hasPrefix("HTTP/1."),
            target.hasPrefix("/")
        else { return nil }
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? target
        return (method, path)
    }

    private func reply(to request: (method: String, path: String)?) -> HTTPAnswer {
        guard let request else { return HTTPAnswer(status: 400, body: "bad request\n") }
        guard request.method == "GET" || request.method == "HEAD" else {
            return HTTPAnswer(status: 405, body: "only GET is served\n")
        }
        return handler(request.path)
    }

    private func write(_ reply: HTTPAnswer, isHead: Bool, to fd: Int32) {
        let body = Array(reply.body.utf8)
        var head = "HTTP/1.1 \(reply.status) \(Self.reason(reply.status))\r\n"
        head += "Content-Type: \(reply.contentType)\r\nContent-Length: \(body.count)\r\n"
        if reply.status == 405 { head += "Allow: GET, HEAD\r\n" }
        head += "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + (isHead ? [] : body)
        do throws(RainError) {
            try Syscall.setNonBlocking(fd, false)
            // A client that stops reading fails the send instead of holding this thread.
            try Syscall.setSendTimeout(fd, milliseconds: Int32(readTimeout.milliseconds))
            let sent = bytes.withUnsafeBytes { raw in Result { () throws(RainError) in try Syscall.sendAll(fd, raw) } }
            try sent.get()
        } catch {
            logger.debug("metrics.write_failed", ["error": error.message])
        }
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 431: "Request Header Fields Too Large"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}
