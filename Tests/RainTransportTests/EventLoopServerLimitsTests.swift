import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Synchronization
import Testing

@testable import RainTransport

/// Answers every request at once with an empty OK.
final class OKHandler: ServerHandler {
    func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision { .respond(.ok([])) }
    func cancel(connection: ConnectionID, requestID: UInt64) {}
    func connectionClosed(_ connection: ConnectionID) {}
}

/// Answers every request at once with its payload twice: an answer larger than its request.
final class DoublingHandler: ServerHandler {
    func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision {
        .respond(.ok(request.payload + request.payload))
    }
    func cancel(connection: ConnectionID, requestID: UInt64) {}
    func connectionClosed(_ connection: ConnectionID) {}
}

/// An `EventLoopServer` on a Unix socket or a loopback TCP port, its loop on a thread, its log
/// captured.
final class LoopUnderTest: Sendable {
    let server: EventLoopServer
    let directory: String
    let socketPath: String
    let port: UInt16
    let sink = CapturingLogSink()
    private let isFinished = Mutex(false)

    /// A Unix-socket server, or with `tcp` a TCP one listening on that host (TLS with `tls`).
    init(
        _ options: ServerOptions, tcp host: String? = nil, tls: TLSContext? = nil, directory: String? = nil,
        handler: any ServerHandler = OKHandler()
    ) throws {
        self.directory = try directory ?? makeTemporaryDirectory()
        var options = options
        let fd: Int32
        if let host {
            fd = try TCPSocket.listen(try TCPAddress(parsing: "\(host):0", allowsNonLoopback: true))
            port = try TCPSocket.localPort(of: fd)
            socketPath = ""
            options.isTCP = true
            options.tls = tls
        } else {
            socketPath = self.directory + "/s.sock"
            fd = try UnixSocket.listen(path: socketPath, mode: 0o600)
            port = 0
        }
        server = try EventLoopServer(
            listeningSocket: fd, options: options, handler: handler, logger: Logger(label: "loop", sink: sink))
        let thread = Thread { [self] in
            server.run()
            isFinished.withLock { $0 = true }
        }
        thread.name = "test.limits.loop"
        thread.start()
    }

    func stop() async {
        server.stop(drainTimeout: .zero)
        _ = await eventually { isFinished.withLock { $0 } }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A new client of this server.
    func connect(source: String? = nil) throws -> RawPeer {
        port == 0 ? try RawPeer.unix(path: socketPath) : try RawPeer.tcp(port: port, source: source)
    }

    /// The log lines of `event`.
    func lines(_ event: String) -> [String] { sink.captured.filter { $0.contains(" \(event) ") || $0.hasSuffix(" \(event)") } }
}

func makeTemporaryDirectory() throws -> String {
    var template = Array("/tmp/rtl-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp: errno \(errno)") }
    return String(cString: made)
}

/// Runs blocking work on a thread of its own.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
        Thread { c.resume(with: Result { try body() }) }.start()
    }
}

/// Polls `condition` every 5 ms; false after `timeout`.
func eventually(timeout: Duration = .seconds(2), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return true
}

/// A framed request envelope.
func requestFrame(id: UInt64, method: String = "/test/Ping", payload: [UInt8] = []) throws -> [UInt8] {
    try Envelope(requestID: id, kind: .request(WireRequest(method: method, payload: payload))).encodeFrame()
}

/// A frame header declaring `length`, then `count` bytes of it.
func halfFrame(declaring length: Int, sending count: Int) -> [UInt8] {
    var out: [UInt8] = []
    Frame.appendHeader(length: length, to: &out)
    return out + [UInt8](repeating: 0x41, count: count)
}

extension RawPeer {
    /// Sends request `id` and reads its answer: true when it is an OK under that id.
    func isServed(id: UInt64 = 1) throws -> Bool {
        guard send(try requestFrame(id: id)) else { return false }
        guard case .envelope(let e) = readFrame(timeout: .seconds(2)), e.requestID == id,
            case .response(let r) = e.kind
        else { return false }
        return r.status.isOK
    }

    /// Reads a refusal: an error under request id 0, then the close. Returns its reason.
    func refusalReason(code: RainError.Code = .refused, timeout: Duration = .seconds(2)) -> String? {
        guard case .envelope(let e) = readFrame(timeout: timeout), e.requestID == 0, case .response(let r) = e.kind,
            r.status.code == code.rawValue
        else { return nil }
        return isClosedByServer(within: timeout) ? r.status.details.reason : nil
    }
}

/// What an unauthenticated peer can make the event loop hold. Every limit is
/// set small here (300 ms deadlines, a few connections) so no test waits long.
@Suite("EventLoopServer limits", .serialized)
struct EventLoopServerLimitsTests {
    static func options(_ change: (inout ServerOptions) -> Void = { _ in }) -> ServerOptions {
        var o = ServerOptions()
        o.admissionTimeout = .seconds(10)
        o.frameProgressTimeout = .seconds(10)
        change(&o)
        return o
    }

    @Test(
        "a peer uid that is not allowed gets one refusal frame (RAIN_202 uid_not_allowed) and is closed at accept, nothing read; the refusals make one log line"
    )
    func peerNotAllowedClosedAtAccept() async throws {
        // The server takes another uid as its own, so this process is a peer it does not allow.
        let loop = try LoopUnderTest(Self.options { $0.ownUID = getuid() &+ 1 })
        let peer = try loop.connect()
        peer.send(try requestFrame(id: 1))
        #expect(peer.refusalReason(code: .unauthorized) == "uid_not_allowed", "a refused peer got no refusal, or no close")
        for _ in 0..<20 {
            let again = try loop.connect()
            again.send(halfFrame(declaring: 1 << 20, sending: 1000))
            #expect(again.refusalReason(code: .unauthorized) == "uid_not_allowed")
        }
        #expect(loop.server.bufferedInputByteCount == 0)
        #expect(loop.server.counts.connections == 0)
        let refused = loop.lines("peer.refused")
        #expect(refused.count == 1, "\(refused)")
        #expect(refused.first?.contains("uid=\(getuid())") == true)
        #expect(refused.first?.contains("pid=\(getpid())") == true)
        await loop.stop()

        // Control: the same peer, allowed, is served.
        let allowing = try LoopUnderTest(
            Self.options {
                $0.ownUID = getuid() &+ 1; $0.allowedUIDs = [getuid()]
            })
        #expect(try allowing.connect().isServed())
        await allowing.stop()
    }

    @Test("before admission a connection holds at most 4 KiB; once admitted, a larger frame is held")
    func unadmittedInputCapped() async throws {
        let loop = try LoopUnderTest(Self.options())
        let stranger = try loop.connect()
        stranger.send(halfFrame(declaring: 100_000, sending: 5000))
        #expect(stranger.refusalReason() == "unadmitted_input")

        let within = try loop.connect()
        within.send(halfFrame(declaring: 100_000, sending: 3000))
        #expect(within.readFrame(timeout: .milliseconds(200)) == .timedOut)

        let admitted = try loop.connect()
        #expect(try admitted.isServed())
        admitted.send(halfFrame(declaring: 100_000, sending: 5000))
        #expect(admitted.readFrame(timeout: .milliseconds(200)) == .timedOut, "an admitted connection was refused")
        #expect(await eventually { loop.server.bufferedInputByteCount == 3004 + 5004 })
        await loop.stop()
    }

    @Test("a connection not admitted within the admission timeout is closed; an admitted idle one stays")
    func admissionDeadline() async throws {
        let loop = try LoopUnderTest(Self.options { $0.admissionTimeout = .milliseconds(300) })
        let admitted = try loop.connect()
        #expect(try admitted.isServed())
        let silent = try loop.connect()
        let started = ContinuousClock.now
        #expect(silent.refusalReason() == "admission_timeout")
        #expect(ContinuousClock.now - started >= .milliseconds(250))
        #expect(!loop.lines("connection.admission_timeout").isEmpty)
        // Long past the deadline, the admitted connection (no partial frame: a stream, a session)
        // is still served.
        #expect(admitted.readFrame(timeout: .milliseconds(400)) == .timedOut)
        #expect(try admitted.isServed(id: 2))
        await loop.stop()
    }

    @Test("the reference client reports the server's refusal, not only a lost connection")
    func clientSeesTheRefusal() async throws {
        let loop = try LoopUnderTest(Self.options { $0.admissionTimeout = .milliseconds(300) })
        let client = try ClientConnection(path: loop.socketPath)
        // Silent past the admission deadline: the server answers request id 0 with RAIN_302, closes.
        #expect(await eventually { client.isClosed })
        let error = await #expect(throws: RainError.self) { _ = try await client.call(method: "/x", payload: []) }
        #expect(error?.details.reason == "admission_timeout", "\(String(describing: error))")
        #expect(error?.message.contains("RAIN_302") == true, "\(String(describing: error))")
        await loop.stop()
    }

    @Test("a client whose uid is refused at accept fails its calls with RAIN_202 uid_not_allowed, not a lost connection")
    func clientSeesTheUIDRefusal() async throws {
        let loop = try LoopUnderTest(Self.options { $0.ownUID = getuid() &+ 1 })
        let client = try ClientConnection(path: loop.socketPath)
        #expect(await eventually { client.isClosed })
        let error = await #expect(throws: RainError.self) { _ = try await client.call(method: "/x", payload: []) }
        #expect(error?.code == .unauthorized, "\(String(describing: error))")
        #expect(error?.details.reason == "uid_not_allowed", "\(String(describing: error))")
        await loop.stop()
    }

    @Test("a partial frame with no progress for the progress timeout is dropped; one that trickles is not")
    func stalledFrameDropped() async throws {
        let loop = try LoopUnderTest(Self.options { $0.frameProgressTimeout = .milliseconds(300) })
        let stalled = try loop.connect()
        #expect(try stalled.isServed())
        let trickling = try loop.connect()
        #expect(try trickling.isServed())
        let idle = try loop.connect()
        #expect(try idle.isServed())

        stalled.send(halfFrame(declaring: 1000, sending: 10))
        let frame = try requestFrame(id: 2)
        let started = ContinuousClock.now
        // On a thread of its own, so the byte gaps do not depend on the concurrency pool.
        let trickled = try await onThread { () -> ContinuousClock.Instant in
            for byte in frame.dropLast() {
                trickling.send([byte])
                usleep(UInt32(700_000 / frame.count))
            }
            return ContinuousClock.now
        }
        #expect(trickled - started >= .milliseconds(600))
        #expect(stalled.refusalReason() == "frame_stalled")
        trickling.send([frame[frame.count - 1]])
        guard case .envelope(let answer) = trickling.readFrame(timeout: .seconds(2)) else {
            Issue.record("the trickling request was not answered")
            return
        }
        #expect(answer.requestID == 2)
        #expect(try idle.isServed(id: 2), "an admitted connection without a partial frame was dropped")
        await loop.stop()
    }

    @Test("buffered input across connections is capped: the connection going beyond is refused, the others go on")
    func bufferedInputBudget() async throws {
        let loop = try LoopUnderTest(Self.options { $0.maximumBufferedInput = 64 << 10 })
        let first = try loop.connect()
        #expect(try first.isServed())
        let second = try loop.connect()
        #expect(try second.isServed())
        first.send(halfFrame(declaring: 200_000, sending: 40_000))
        #expect(await eventually { loop.server.bufferedInputByteCount == 40_004 })
        second.send(halfFrame(declaring: 200_000, sending: 40_000))
        #expect(second.refusalReason() == "input_budget")
        #expect(await eventually { loop.server.bufferedInputByteCount == 40_004 })
        // Whole requests are never held: a client that sends them is still served.
        #expect(try loop.connect().isServed())
        #expect(first.readFrame(timeout: .milliseconds(100)) == .timedOut)
        await loop.stop()
    }

    @Test("at most N connections per other uid; the daemon's own uid is bounded only by the total")
    func perUIDLimit() async throws {
        let loop = try LoopUnderTest(
            Self.options {
                $0.ownUID = getuid() &+ 1
                $0.allowedUIDs = [getuid()]
                $0.maximumConnectionsPerPeer = 3
            })
        var held = try (0..<3).map { _ in try loop.connect() }
        for peer in held { #expect(try peer.isServed()) }
        let fourth = try loop.connect()
        #expect(fourth.refusalReason() == "connection_limit")
        held.removeLast()
        #expect(await eventually { loop.server.counts.connections == 2 })
        #expect(try loop.connect().isServed())
        #expect(loop.lines("connection.peer_limit").count == 1)
        await loop.stop()

        let own = try LoopUnderTest(Self.options { $0.maximumConnectionsPerPeer = 3 })
        let many = try (0..<6).map { _ in try own.connect() }
        for peer in many { #expect(try peer.isServed()) }
        await own.stop()
    }

    @Test("at most N connections per TCP source address; another address is served")
    func perAddressLimit() async throws {
        let loop = try LoopUnderTest(Self.options { $0.maximumConnectionsPerPeer = 3 }, tcp: "127.0.0.1")
        let held = try (0..<3).map { _ in try loop.connect(source: "127.0.0.2") }
        for peer in held { #expect(try peer.isServed()) }
        let fourth = try loop.connect(source: "127.0.0.2")
        #expect(fourth.isClosedByServer(within: .seconds(2)))
        #expect(try loop.connect(source: "127.0.0.3").isServed())
        let line = try #require(loop.lines("connection.peer_limit").first)
        #expect(line.contains("127.0.0.2"))
        await loop.stop()
    }

    @Test("at the total limit the oldest connection not admitted makes room; when all are admitted, the new one is refused")
    func totalLimit() async throws {
        let loop = try LoopUnderTest(Self.options { $0.maximumConnections = 3 })
        let a = try loop.connect()
        #expect(try a.isServed())
        let b = try loop.connect()
        #expect(try b.isServed())
        let idle = try loop.connect()
        #expect(await eventually { loop.server.counts.connections == 3 })
        let newcomer = try loop.connect()
        #expect(idle.isClosedByServer(within: .seconds(2)), "the unadmitted connection was not evicted")
        #expect(try newcomer.isServed())
        let refused = try loop.connect()
        #expect(refused.refusalReason() == "connection_limit")
        #expect(try a.isServed(id: 2))
        await loop.stop()
    }

    @Test("beyond the unadmitted limit the oldest unadmitted connection makes room; admitted ones are kept")
    func unadmittedLimit() async throws {
        let loop = try LoopUnderTest(Self.options { $0.maximumUnadmittedConnections = 2 })
        let admitted = try loop.connect()
        #expect(try admitted.isServed())
        let oldest = try loop.connect()
        oldest.send(halfFrame(declaring: 100, sending: 10))
        let younger = try loop.connect()
        #expect(await eventually { loop.server.counts.connections == 3 })
        let newcomer = try loop.connect()
        #expect(oldest.isClosedByServer(within: .seconds(2)), "the oldest unadmitted connection was not evicted")
        #expect(try newcomer.isServed())
        #expect(try younger.isServed())
        #expect(try admitted.isServed(id: 2))
        #expect(loop.lines("connection.evicted").count == 1)
        await loop.stop()
    }

    @Test("TLS: a handshake that sends more than 4 KiB is closed at once; one that stalls is closed at its deadline")
    func tlsHandshakeLimits() async throws {
        let directory = try makeTemporaryDirectory()
        let certificates = try await TestCertificates.make(in: directory)
        let server = try TLSContext.server(
            certificateChainFile: certificates.serverCertificatePath, privateKeyFile: certificates.serverKeyPath)
        let client = try TLSContext.client(trustedCertificatesFile: certificates.caPath)
        let loop = try LoopUnderTest(
            Self.options {
                $0.admissionTimeout = .milliseconds(400)
                $0.frameProgressTimeout = .milliseconds(400)
            }, tcp: "127.0.0.1", tls: server,
            directory: directory)

        // A handshake record announcing 16 KiB, 5,000 bytes of it: over the budget before the
        // handshake could complete, so the connection closes well before any deadline.
        let flood = try loop.connect()
        // (A ClientHello header announcing 16,380 bytes, so OpenSSL waits for the rest.)
        flood.sendRaw([0x16, 0x03, 0x01, 0x40, 0x00, 0x01, 0x00, 0x3f, 0xfc] + [UInt8](repeating: 0, count: 4991))
        #expect(flood.isClosedByServer(within: .milliseconds(300)))

        // Half a ClientHello, then nothing: closed at the admission deadline.
        let half = try loop.connect()
        half.sendRaw([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc] + [UInt8](repeating: 0, count: 96))
        #expect(half.isClosedByServer(within: .seconds(2)))

        // A real client is served, and stays connected past the deadline once admitted.
        let good = try loop.connect()
        #expect(try good.handshake(client, timeout: .seconds(2)))
        #expect(try good.isServed())
        #expect(good.readFrame(timeout: .milliseconds(600)) == .timedOut)
        #expect(try good.isServed(id: 2))

        // Admitted, then half a TLS record and nothing more: dropped when the record makes no
        // progress (here the progress timeout is the same 400 ms).
        let partialRecord = try loop.connect()
        #expect(try partialRecord.handshake(client, timeout: .seconds(2)))
        #expect(try partialRecord.isServed())
        partialRecord.sendRaw([0x17, 0x03, 0x03, 0x10, 0x00] + [UInt8](repeating: 0, count: 100))
        #expect(partialRecord.isClosedByServer(within: .seconds(2)))

        // After the handshake, half a frame and no request: refused at the deadline.
        let silent = try loop.connect()
        #expect(try silent.handshake(client, timeout: .seconds(2)))
        silent.send(halfFrame(declaring: 100, sending: 10))
        #expect(silent.refusalReason() == "admission_timeout")
        await loop.stop()
    }

    @Test("the log throttle lets one line per interval through and counts the others")
    func logThrottle() {
        var throttle = LogThrottle(interval: .seconds(10))
        let t0 = LoopInstant.now
        #expect(throttle.admit("e", now: t0) == 0)
        #expect(throttle.admit("e", now: t0 + .seconds(1)) == nil)
        #expect(throttle.admit("e", now: t0 + .seconds(2)) == nil)
        #expect(throttle.admit("other", now: t0 + .seconds(2)) == 0)
        #expect(throttle.admit("e", now: t0 + .seconds(11)) == 2)
    }

    @Test("a connection's epoll token names its descriptor and its id, and is never the listener's or the eventfd's")
    func connectionTokens() {
        let a = EventLoopServer.token(fd: 7, id: 2)
        #expect(a >> 63 == 1 && (a >> 32) & 0x7FFF_FFFF == 7 && a & 0xFFFF_FFFF == 2)
        // A descriptor reused by a later connection: another token, so a late event finds nothing.
        #expect(EventLoopServer.token(fd: 7, id: 3) != a)
        #expect(EventLoopServer.token(fd: 8, id: 2) != a)
        for (fd, id): (Int32, UInt64) in [(0, 0), (0, 1), (0, 1 << 32), (1, 1 << 32 | 1), (Int32.max, .max)] {
            let t = EventLoopServer.token(fd: fd, id: id)
            #expect(t > 1 && (t >> 32) & 0x7FFF_FFFF == UInt64(fd))
        }
    }

    @Test("the loop's clock adds and subtracts durations in nanoseconds, saturating at the ends")
    func loopInstantArithmetic() {
        let t0 = LoopInstant(nanoseconds: 5_000_000_000)
        #expect((t0 + .milliseconds(1_500)).nanoseconds == 6_500_000_000)
        #expect((t0 + .nanoseconds(-7)).nanoseconds == 4_999_999_993)
        #expect((t0 + .seconds(2)) - t0 == .seconds(2))
        #expect(t0 - (t0 + .microseconds(3)) == .microseconds(-3))
        #expect((t0 + .seconds(Int64.max)).nanoseconds == .max)
        #expect((LoopInstant(nanoseconds: -5) + .seconds(Int64.min)).nanoseconds == .min)
        #expect((t0 + .seconds(Int64.min)).nanoseconds == Int64.min + 5_000_000_000)
        #expect(LoopInstant(nanoseconds: .max) - LoopInstant(nanoseconds: -1) == .nanoseconds(Int64.max))
        #expect(t0 < t0 + .nanoseconds(1))
        let a = LoopInstant.now
        #expect(a <= LoopInstant.now)
    }
}

@Suite("EventLoopServer answers over the frame limit")
struct AnswerFrameLimitTests {
    @Test("an answer over the frame limit is RAIN_502 on the same call; one within it is sent as it is")
    func answerOverTheLimitIsAnError() async throws {
        var options = EventLoopServerLimitsTests.options()
        options.maximumFrameLength = 200
        let loop = try LoopUnderTest(options, handler: DoublingHandler())
        let peer = try loop.connect()
        peer.send(try requestFrame(id: 1, payload: Array(repeating: 7, count: 50)))
        guard case .envelope(let small) = peer.readFrame(timeout: .seconds(2)), case .response(let ok) = small.kind else {
            Issue.record("no answer within the limit")
            await loop.stop()
            return
        }
        #expect(small.requestID == 1 && ok.status.isOK && ok.payload == Array(repeating: 7, count: 100))
        peer.send(try requestFrame(id: 2, payload: Array(repeating: 7, count: 150)))
        guard case .envelope(let big) = peer.readFrame(timeout: .seconds(2)), case .response(let refused) = big.kind else {
            Issue.record("no answer over the limit")
            await loop.stop()
            return
        }
        #expect(big.requestID == 2)
        #expect(refused.status.code == RainError.Code.internalError.rawValue)
        #expect(refused.status.message.contains("exceeds the frame limit"))
        #expect(loop.lines("answer.too_large").count == 1)
        // The connection goes on.
        #expect(try peer.isServed(id: 3))
        await loop.stop()
    }
}

@Suite("EventLoopServer's peer addresses in log lines")
struct PeerAddressDescriptionTests {
    @Test("an address prints as the connection's log lines print its peer; any other length is named, not a crash")
    func addresses() {
        #expect(EventLoopServer.describe(address: [192, 0, 2, 1]) == "192.0.2.1")
        let ipv6: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 1]
        #expect(EventLoopServer.describe(address: ipv6) == "2001:db8::abcd:1")
        #expect(EventLoopServer.describe(address: ipv6) == TCPSocket.addressText(ipv6))
        #expect(EventLoopServer.describe(address: [0x20, 0x01, 0x0d]) == "3-byte address")
        #expect(EventLoopServer.describe(address: []) == "0-byte address")
    }
}
