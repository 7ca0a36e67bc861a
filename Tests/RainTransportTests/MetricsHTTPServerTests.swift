import Dispatch
import Foundation
import RainCore
import RainSystem
import RainWire
import Testing

@testable import RainTransport

/// The metrics server's request reading: where the headers end, what the request line says, and
/// what it answers over a real socket.
@Suite("Metrics HTTP server")
struct MetricsHTTPServerTests {
    @Test(
        "the headers end at the first blank line, CRLF or LF",
        arguments: [
            ("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 23), ("GET / HTTP/1.1\n\n", 14), ("GET / HTTP/1.1\r\nHost: x\r\n", nil),
            ("", nil),
        ] as [(String, Int?)])
    func endOfHeaders(text: String, end: Int?) {
        #expect(MetricsHTTPServer.endOfHeaders(Array(text.utf8)) == end)
    }

    @Test("the request line gives the method and the path without its query; anything else is refused")
    func requestLine() {
        let ok = MetricsHTTPServer.requestLine(Array("GET /metrics?x=1 HTTP/1.1".utf8))
        #expect(ok?.method == "GET" && ok?.path == "/metrics")
        for bad in ["GET /metrics", "GET metrics HTTP/1.1", "GET /metrics SPDY/3", "GET  /metrics HTTP/1.1", "\u{FF}"] {
            #expect(MetricsHTTPServer.requestLine(Array(bad.utf8)) == nil, "\(bad)")
        }
    }

    @Test("a server on a loopback port answers the handler's body, 405 for POST and 431 for a header too large")
    func answers() throws {
        let fd = try TCPSocket.listen(try TCPAddress(parsing: "127.0.0.1:0"))
        let port = try TCPSocket.localPort(of: fd)
        let server = MetricsHTTPServer(
            listeningSocket: fd, maximumRequestBytes: 256, logger: Logger(label: "test", minimumLevel: .error)
        ) { path in HTTPAnswer(status: 200, body: "path \(path)\n") }
        server.start()
        defer { server.stop() }
        #expect(try Self.exchange(port, "GET /a?b HTTP/1.1\r\n\r\n").hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(try Self.exchange(port, "GET /a?b HTTP/1.1\r\n\r\n").hasSuffix("\r\n\r\npath /a\n"))
        #expect(try Self.exchange(port, "POST /a HTTP/1.1\r\n\r\n").hasPrefix("HTTP/1.1 405 "))
        #expect(try Self.exchange(port, "GET /a HTTP/1.1\r\nX: " + String(repeating: "y", count: 400)).hasPrefix("HTTP/1.1 431 "))
    }

    /// Sends `request` on a new connection and reads the answer to its end.
    static func exchange(_ port: UInt16, _ request: String) throws -> String {
        let fd = try TCPSocket.connect(try TCPAddress(parsing: "127.0.0.1:\(port)"), timeout: .seconds(5))
        defer { close(fd) }
        try Syscall.setNonBlocking(fd, false)
        try Syscall.setReceiveTimeout(fd, milliseconds: 5000)
        try Array(request.utf8).withUnsafeBytes { raw in try Syscall.sendAll(fd, raw) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            answer += buffer[0..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }
}

/// The health check's view of the event loop.
@Suite("Event loop liveness")
struct EventLoopLivenessTests {
    /// Holds the loop thread in its handler until released.
    final class HoldingHandler: ServerHandler {
        let release = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision {
            entered.signal()
            release.wait()
            return .respond(.ok([]))
        }
        func cancel(connection: ConnectionID, requestID: UInt64) {}
        func connectionClosed(_ connection: ConnectionID) {}
    }

    @Test("a running loop answers a wake-up; one held in a handler does not, and answers again once let go")
    func heldLoopIsNotResponsive() async throws {
        let handler = HoldingHandler()
        let loop = try LoopUnderTest(ServerOptions(), handler: handler)
        let responsiveAtStart = try await onThread { loop.server.isResponsive(within: .seconds(10)) }
        #expect(responsiveAtStart)
        let peer = try loop.connect()
        #expect(peer.send(try requestFrame(id: 1)))
        // Only once the loop is inside the handler is it held.
        let handlerEntered = try await onThread { handler.entered.wait(timeout: .now() + 10) == .success }
        #expect(handlerEntered)
        let unresponsiveWhileHeld = try await onThread { !loop.server.isResponsive(within: .milliseconds(300)) }
        #expect(unresponsiveWhileHeld)
        handler.release.signal()
        let responsiveOnceReleased = try await onThread { loop.server.isResponsive(within: .seconds(10)) }
        #expect(responsiveOnceReleased)
        await loop.stop()
        let unresponsiveOnceStopped = try await onThread { !loop.server.isResponsive(within: .milliseconds(100)) }
        #expect(unresponsiveOnceStopped)
    }
}
