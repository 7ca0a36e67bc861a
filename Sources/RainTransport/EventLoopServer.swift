import Foundation
import RainCore
import RainCrypto
import RainSystem
import RainWire
import Synchronization

/// Identifies one accepted connection for the life of the server.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "c\(rawValue)" }
}

/// The process on the other end of a Unix socket (SO_PEERCRED).
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// A TCP peer's numeric source address (`192.0.2.7`, `2001:db8::1`); nil for a Unix peer, or
    /// when it could not be read. The authority counts code sends per address (issue 13).
    public var address: String? = nil

    /// The placeholder for a TCP peer, which has no Unix credentials: pid 0, uid and gid
    /// `UInt32.max` (never a real uid).
    public static let tcpPeer = PeerCredentials(pid: 0, uid: UInt32.max, gid: UInt32.max)

    /// A TCP peer at `address` (see `tcpPeer`).
    public static func tcpPeer(address: String?) -> PeerCredentials {
        PeerCredentials(pid: 0, uid: UInt32.max, gid: UInt32.max, address: address)
    }
}

/// How a handler answers a request it was given on the loop thread.
public enum HandlerDecision: Sendable {
    /// Answer now (cheap calls: snapshot reads, GetInfo, refusals).
    case respond(WireResponse)
    /// The handler will answer later through `RequestContext.responder`.
    case deferred
    /// A server stream: messages and the final response come through the responder.
    case stream
}

/// Everything a handler knows about one call.
public struct RequestContext: Sendable {
    public let connection: ConnectionID
    public let requestID: UInt64
    public let peer: PeerCredentials
    /// Answers this call from any thread.
    public let responder: Responder
}

/// Sends the answers of one call from any thread. The final `respond` ends the call; anything
/// sent after that, or after the client cancelled, is dropped.
public struct Responder: Sendable {
    let server: EventLoopServer
    let connection: ConnectionID
    let requestID: UInt64
    let token: UInt64

    /// Sends the final response.
    public func respond(_ response: WireResponse) {
        server.post(connection: connection, requestID: requestID, token: token, kind: .response(response), isFinal: true)
    }

    /// Sends one stream message.
    public func send(streamPayload: [UInt8]) {
        server.post(
            connection: connection, requestID: requestID, token: token, kind: .stream(payload: streamPayload), isFinal: false)
    }

    /// Fails the call with a Rain error.
    public func fail(_ error: RainError) { respond(.failure(error)) }
}

/// The application side of the server.
public protocol ServerHandler: AnyObject, Sendable {
    /// Called on the loop thread for each request: must not block.
    func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision
    /// The client cancelled a call that is still in flight (loop thread).
    func cancel(connection: ConnectionID, requestID: UInt64)
    /// A connection closed; drop its streams (loop thread).
    func connectionClosed(_ connection: ConnectionID)
}

/// Settings of the server.
public struct ServerOptions: Sendable {
    /// Largest frame accepted or sent.
    public var maximumFrameLength: Int = Frame.defaultMaximumLength
    /// Uids served besides the daemon's own.
    public var allowedUIDs: Set<UInt32> = []
    /// A connection whose unread output grows past this is closed (a client that never reads).
    public var maximumPendingOutput: Int = 16 << 20
    /// Calls in flight per connection.
    public var maximumCallsPerConnection: Int = 1024
    /// The listening socket is TCP (the authority hop, `TCPSocket.listen`), not a Unix socket.
    /// TCP peers have no SO_PEERCRED: every connection is admitted with
    /// `PeerCredentials.tcpPeer` and `allowedUIDs` does not apply (loopback-only addresses are the
    /// guard without TLS). Accepted sockets get `TCP_NODELAY`.
    public var isTCP: Bool = false
    /// Serve TLS 1.3 with this server context (TCP only): each connection first completes a
    /// handshake, driven by the loop through memory BIOs, so a slow peer never blocks it. A peer
    /// that fails the handshake gets the alert and is closed; the others are not affected.
    public var tls: TLSContext?
    /// A connection whose TLS handshake has not completed this long after it was accepted is closed.
    public var tlsHandshakeTimeout: Duration = .seconds(10)
    public init() {}
}

/// A non-blocking server on one epoll event-loop thread (DESIGN §9): no thread per connection.
/// Requests are decoded and dispatched on the loop thread; answers posted from other threads wake
/// the loop through an eventfd.
public final class EventLoopServer: @unchecked Sendable {
    // @unchecked Sendable: every var below except `outbound` and `stopRequest` is touched only on
    // the loop thread (inside `run()`); those two are behind Mutexes.

    struct Outbound {
        var connection: ConnectionID
        var requestID: UInt64
        var token: UInt64
        var frame: [UInt8]
        var isFinal: Bool
    }

    final class Call {
        let token: UInt64
        var isStream = false
        init(token: UInt64) { self.token = token }
    }

    final class Connection {
        let id: ConnectionID
        let fd: Int32
        let peer: PeerCredentials
        let isAllowed: Bool
        var decoder: FrameDecoder
        var output: [UInt8] = []
        var outputOffset = 0
        var calls: [UInt64: Call] = [:]
        var wantsWrite = false
        var closeAfterFlush = false
        var isReadClosed = false
        /// The TLS state when the server speaks TLS: frames are encrypted into `output` and input
        /// is decrypted before the decoder sees it.
        var tls: TLSSession?
        init(id: ConnectionID, fd: Int32, peer: PeerCredentials, isAllowed: Bool, maximumFrame: Int) {
            self.id = id
            self.fd = fd
            self.peer = peer
            self.isAllowed = isAllowed
            self.decoder = FrameDecoder(maximumLength: maximumFrame)
        }
        var pendingOutput: Int { output.count - outputOffset }
    }

    private let listenFD: Int32
    private let epoll: Epoll
    private let wakeFD: EventFD
    private let options: ServerOptions
    private let handler: any ServerHandler
    private let logger: Logger
    private let ownUID = getuid()

    private var connections: [UInt64: Connection] = [:]
    /// When each connection still in its TLS handshake must have finished it.
    private var handshakeDeadlines: [UInt64: ContinuousClock.Instant] = [:]
    private var nextConnection: UInt64 = 2  // tokens 0 and 1 are the listener and the eventfd
    private var nextToken: UInt64 = 1
    private var listening = true
    /// The most connections held since memory was last given back.
    private var connectionHighWater = 0
    /// Set when many connections left: once the loop is idle, free heap memory goes back to the
    /// kernel, so the daemon returns to its idle size after a crowd of clients.
    private var releaseMemoryWhenIdle = false
    private let outbound = Mutex<[Outbound]>([])
    private let stopRequest = Mutex<Duration?>(nil)
    private let stats = Mutex<(connections: Int, calls: Int)>((0, 0))

    private static let listenToken: UInt64 = 0
    private static let wakeToken: UInt64 = 1

    /// Takes ownership of a listening socket (non-blocking or not; it is made non-blocking).
    public init(listeningSocket fd: Int32, options: ServerOptions, handler: any ServerHandler, logger: Logger) throws(RainError) {
        self.listenFD = fd
        self.options = options
        self.handler = handler
        self.logger = logger
        try Syscall.setNonBlocking(fd, true)
        epoll = try Epoll(maximumEvents: 128)
        wakeFD = try EventFD()
        try epoll.add(listenFD, events: .input, token: Self.listenToken)
        try epoll.add(wakeFD.descriptor, events: .input, token: Self.wakeToken)
    }

    /// Open connections and calls in flight, for logs and tests.
    public var counts: (connections: Int, calls: Int) { stats.withLock { $0 } }

    /// Asks the loop to stop accepting, wait up to `drainTimeout` for calls in flight, close every
    /// connection and return from `run()`. Safe from any thread.
    public func stop(drainTimeout: Duration) {
        stopRequest.withLock { $0 = drainTimeout }
        wake()
    }

    private func wake() { wakeFD.signal() }

    /// The frame of an answer, or of RAIN_502 when the answer would exceed the frame limit (a
    /// client must refuse such a frame, so it would lose the connection instead of the call).
    func frame(requestID: UInt64, kind: Envelope.Kind) throws(RainError) -> [UInt8] {
        let frame = try Envelope(requestID: requestID, kind: kind).encodeFrame()
        guard frame.count - Frame.headerLength > options.maximumFrameLength else { return frame }
        logger.error("answer.too_large", ["bytes": "\(frame.count)"])
        return try Envelope(
            requestID: requestID,
            kind: .response(.failure(RainError(.internalError, "internal error: the answer exceeds the frame limit")))
        ).encodeFrame()
    }

    func post(connection: ConnectionID, requestID: UInt64, token: UInt64, kind: Envelope.Kind, isFinal: Bool) {
        let frame: [UInt8]
        do {
            frame = try self.frame(requestID: requestID, kind: kind)
        } catch {
            logger.error("encode.failed", ["connection": "\(connection)", "error": "\(error.code)"])
            let fallback = Envelope(
                requestID: requestID,
                kind: .response(.failure(RainError(.internalError, "internal error: response could not be encoded"))))
            guard let f = try? fallback.encodeFrame() else { return }
            enqueue(Outbound(connection: connection, requestID: requestID, token: token, frame: f, isFinal: true))
            return
        }
        enqueue(Outbound(connection: connection, requestID: requestID, token: token, frame: frame, isFinal: isFinal))
    }

    /// Queues an answer for the loop, waking it only when the queue was empty: a non-empty queue
    /// already has a wake pending, since `drainOutbound` reads the eventfd before it takes the queue.
    private func enqueue(_ item: Outbound) {
        let wasEmpty = outbound.withLock { q -> Bool in
            defer { q.append(item) }
            return q.isEmpty
        }
        if wasEmpty { wake() }
    }

    // MARK: the loop (loop thread only below)

    /// Runs the loop on the calling thread until `stop` completes.
    public func run() {
        var events = [EpollEvent](repeating: EpollEvent(), count: 128)
        let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { readBuffer.deallocate() }
        var drainDeadline: Duration?
        let clock = ContinuousClock()
        let start = clock.now

        while true {
            if let timeout = stopRequest.withLock({ r -> Duration? in
                defer { r = nil }; return r
            }) {
                if listening {
                    listening = false
                    epoll.deleteBeforeClose(listenFD)
                    Syscall.closeUnchecked(listenFD, because: .socket)
                }
                drainDeadline = (clock.now - start) + timeout
            }
            if let deadline = drainDeadline {
                let inFlight = connections.values.reduce(0) { $0 + $1.calls.values.filter { !$0.isStream }.count }
                if inFlight == 0 || clock.now - start >= deadline {
                    if inFlight > 0 { logger.warning("drain.timeout", ["calls": "\(inFlight)"]) }
                    for c in Array(connections.values) { flush(c); closeConnection(c) }
                    return
                }
            }
            var timeoutMS: Int32 = drainDeadline != nil ? 20 : releaseMemoryWhenIdle ? 200 : -1
            if !handshakeDeadlines.isEmpty {
                expireHandshakes(now: clock.now)
                if let earliest = handshakeDeadlines.values.min() {
                    let wait = max(1, (earliest - clock.now).milliseconds + 1)
                    timeoutMS = timeoutMS < 0 ? Int32(clamping: wait) : min(timeoutMS, Int32(clamping: wait))
                }
            }
            let n: Int
            do {
                n = try epoll.wait(into: &events, timeoutMilliseconds: timeoutMS)
            } catch {
                logger.error("epoll.failed", ["errno": "\(error.errno ?? 0)"])
                return
            }
            if n == 0 && releaseMemoryWhenIdle {
                releaseMemoryWhenIdle = false
                Syscall.releaseFreeMemory()
            }
            for i in 0..<n {
                let ev = events[i]
                switch ev.token {
                case Self.listenToken: acceptAll()
                case Self.wakeToken: drainOutbound()
                default:
                    guard let c = connections[ev.token] else { continue }
                    if c.isReadClosed && !ev.events.isDisjoint(with: [.hangUp, .error]) {
                        closeConnection(c)  // the peer is gone both ways: nobody to answer
                        continue
                    }
                    if !c.isReadClosed && !ev.events.isDisjoint(with: [.input, .hangUp, .error, .readHangUp]) {
                        readAvailable(c, readBuffer)
                    }
                    if connections[ev.token] != nil { flush(c) }
                }
            }
        }
    }

    private func acceptAll() {
        while listening {
            let fd: Int32
            do {
                guard case .processed(let accepted) = try Syscall.accept(listenFD) else { return }
                fd = accepted
            } catch {
                let e = error.errno ?? 0
                if e == EMFILE || e == ENFILE {
                    logger.warning("accept.no_descriptors")
                    return
                }
                logger.warning("accept.failed", ["errno": "\(e)"])
                return
            }
            let peer: PeerCredentials
            let allowed: Bool
            if options.isTCP {
                TCPSocket.setNoDelay(fd)
                peer = .tcpPeer(address: TCPSocket.peerAddress(of: fd))
                allowed = true
            } else {
                guard let credentials = try? Syscall.peerCredentials(fd) else {
                    // The peer is gone already (or never was): nothing to serve.
                    Syscall.closeUnchecked(fd, because: .socket)
                    continue
                }
                peer = PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
                allowed = peer.uid == ownUID || options.allowedUIDs.contains(peer.uid)
            }
            let id = nextConnection
            nextConnection += 1
            let c = Connection(
                id: ConnectionID(rawValue: id), fd: fd, peer: peer, isAllowed: allowed,
                maximumFrame: options.maximumFrameLength)
            if let tls = options.tls {
                do {
                    c.tls = try tls.makeServerSession()
                } catch {
                    logger.error("tls.session_failed", ["error": error.message])
                    Syscall.closeUnchecked(fd, because: .failurePath)
                    continue
                }
                handshakeDeadlines[id] = ContinuousClock.now + options.tlsHandshakeTimeout
            }
            do {
                try epoll.add(fd, events: [.input, .readHangUp], token: id)
            } catch {
                Syscall.closeUnchecked(fd, because: .failurePath)
                continue
            }
            connections[id] = c
            connectionHighWater = max(connectionHighWater, connections.count)
            stats.withLock { $0.connections += 1 }
            if !allowed {
                logger.warning("peer.refused", ["uid": "\(peer.uid)", "pid": "\(peer.pid)"])
            }
        }
    }

    private func readAvailable(_ c: Connection, _ buffer: UnsafeMutableRawBufferPointer) {
        while true {
            let n: Int
            do {
                guard case .processed(let count) = try Syscall.readNonBlocking(c.fd, into: buffer) else { break }
                n = count
            } catch {
                closeConnection(c)
                return
            }
            if n == 0 {
                // The client finished sending: answer the calls in flight, then close.
                readClosed(c)
                return
            }
            if c.closeAfterFlush { continue }  // discard input from a connection we are ending
            if let tls = c.tls {
                // The session copies the ciphertext, so the buffer is free for the plaintext.
                tls.receive(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                guard decryptAvailable(c, tls, buffer) else { return }
            } else {
                consume(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), on: c)
            }
            if n < buffer.count { break }
        }
    }

    /// Feeds plaintext to the connection's frame decoder and processes the complete frames.
    private func consume(_ plaintext: UnsafeRawBufferPointer, on c: Connection) {
        do {
            try c.decoder.append(plaintext)
            while let body = try c.decoder.nextFrame() {
                process(body, on: c)
                if c.closeAfterFlush || connections[c.id.rawValue] == nil { break }
            }
        } catch {
            // The framing itself is broken: answer once and close, the stream cannot be trusted.
            fail(0, error, on: c)
            c.closeAfterFlush = true
        }
    }

    /// Advances the handshake and decrypts every complete record into `buffer`, consuming it.
    /// Returns false when reading must stop (the connection is ending or gone).
    private func decryptAvailable(_ c: Connection, _ tls: TLSSession, _ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        if !tls.isHandshakeComplete {
            do {
                let isComplete = try tls.handshake()
                tls.appendOutput(to: &c.output)
                guard isComplete else { return true }
                handshakeDeadlines[c.id.rawValue] = nil
                logger.debug("tls.handshake_complete", ["connection": "\(c.id)"])
            } catch {
                // The alert (protocol version, …) goes out, then the connection closes.
                tls.appendOutput(to: &c.output)
                logger.warning(
                    "tls.handshake_failed",
                    ["connection": "\(c.id)", "reason": error.details.reason ?? "", "error": error.message])
                handshakeDeadlines[c.id.rawValue] = nil
                c.closeAfterFlush = true
                return false
            }
        }
        while connections[c.id.rawValue] != nil && !c.closeAfterFlush {
            let result: TLSSession.ReadResult
            do {
                result = try tls.readPlaintext(into: buffer)
            } catch {
                logger.warning("tls.record_failed", ["connection": "\(c.id)", "error": error.message])
                tls.appendOutput(to: &c.output)
                c.closeAfterFlush = true
                return false
            }
            switch result {
            case .bytes(let count):
                consume(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), on: c)
            case .needsMoreInput:
                // Replies the session owes without being asked to write (a TLS 1.3 KeyUpdate).
                tls.appendOutput(to: &c.output)
                return true
            case .closed:
                // close_notify: the client finished sending, as with end of file.
                readClosed(c)
                return false
            }
        }
        return false
    }

    /// The client finished sending: stop watching for input, answer the calls in flight, then close.
    private func readClosed(_ c: Connection) {
        c.isReadClosed = true
        guard watch(c, for: c.wantsWrite ? .output : []) else { return }
        if c.calls.isEmpty { c.closeAfterFlush = true }
    }

    /// Changes what the loop waits for on `c`. Returns false when epoll refused (the connection
    /// could no longer be served, so it is closed).
    @discardableResult
    private func watch(_ c: Connection, for events: EpollEvents) -> Bool {
        do {
            try epoll.modify(c.fd, events: events, token: c.id.rawValue)
            return true
        } catch {
            logger.error("epoll.modify_failed", ["connection": "\(c.id)", "errno": "\(error.errno ?? 0)"])
            closeConnection(c)
            return false
        }
    }

    /// Closes the connections whose TLS handshake is overdue.
    private func expireHandshakes(now: ContinuousClock.Instant) {
        for (id, deadline) in handshakeDeadlines where deadline <= now {
            handshakeDeadlines[id] = nil
            guard let c = connections[id] else { continue }
            logger.warning("tls.handshake_timeout", ["connection": "\(c.id)"])
            closeConnection(c)
        }
    }

    private func process(_ body: [UInt8], on c: Connection) {
        let envelope: Envelope
        do {
            envelope = try Envelope.decode(body)
        } catch {
            // The frame boundary is intact, so the connection can go on.
            fail(0, error, on: c)
            return
        }
        let id = envelope.requestID
        switch envelope.kind {
        case .request(let request):
            guard id != 0 else {
                fail(0, .invalid("request id 0 is reserved; use ids from 1", field: "request_id"), on: c)
                return
            }
            guard c.isAllowed else {
                fail(
                    id,
                    RainError(
                        .unauthorized, "uid \(c.peer.uid) may not use this daemon; ask its owner to allow it in the config"),
                    on: c)
                c.closeAfterFlush = true
                return
            }
            guard c.calls[id] == nil else {
                // Answered with request id 0: the call already running under this id keeps it.
                fail(
                    0,
                    .invalid(
                        "request id \(id) is already in flight on this connection", field: "request_id",
                        reason: "duplicate_request_id"),
                    on: c)
                return
            }
            guard c.calls.count < options.maximumCallsPerConnection else {
                fail(
                    id,
                    RainError(
                        .refused, "too many calls in flight on this connection (\(options.maximumCallsPerConnection))",
                        details: .init(retryAfterMilliseconds: 100)),
                    on: c)
                return
            }
            let call = Call(token: nextToken)
            nextToken += 1
            c.calls[id] = call
            stats.withLock { $0.calls += 1 }
            let context = RequestContext(
                connection: c.id, requestID: id, peer: c.peer,
                responder: Responder(server: self, connection: c.id, requestID: id, token: call.token))
            switch handler.handle(request, context: context) {
            case .respond(let response):
                finishCall(id, on: c)
                enqueue(Envelope(requestID: id, kind: .response(response)), on: c)
            case .deferred:
                break
            case .stream:
                call.isStream = true
            }
        case .cancel:
            guard let call = c.calls[id] else { return }  // unknown or finished: nothing to do
            finishCall(id, on: c)
            handler.cancel(connection: c.id, requestID: id)
            let response: WireResponse =
                call.isStream
                ? .ok([])
                : .failure(
                    RainError(.invalidArgument, "the call was cancelled by the client", details: .init(reason: "cancelled")))
            enqueue(Envelope(requestID: id, kind: .response(response)), on: c)
        case .response, .stream:
            fail(id, .invalid("clients send only requests and cancels", field: "kind"), on: c)
        }
    }

    private func finishCall(_ id: UInt64, on c: Connection) {
        if c.calls.removeValue(forKey: id) != nil {
            stats.withLock { $0.calls -= 1 }
        }
    }

    /// Answers request `id` on `c` with `error`.
    private func fail(_ id: UInt64, _ error: RainError, on c: Connection) {
        enqueue(Envelope(requestID: id, kind: .response(.failure(error))), on: c)
    }

    private func enqueue(_ envelope: Envelope, on c: Connection) {
        do {
            append(try frame(requestID: envelope.requestID, kind: envelope.kind), to: c)
        } catch {
            logger.error("encode.failed", ["connection": "\(c.id)"])
        }
    }

    private func append(_ frame: [UInt8], to c: Connection) {
        if c.pendingOutput == 0 {
            c.output.removeAll(keepingCapacity: c.output.capacity <= 256 * 1024)
            c.outputOffset = 0
        }
        if let tls = c.tls {
            do {
                try tls.write(frame)
            } catch {
                logger.error("tls.write_failed", ["connection": "\(c.id)", "error": error.message])
                closeConnection(c)
                return
            }
            tls.appendOutput(to: &c.output)
        } else {
            c.output.append(contentsOf: frame)
        }
        if c.pendingOutput > options.maximumPendingOutput {
            logger.warning("connection.not_reading", ["connection": "\(c.id)", "pending": "\(c.pendingOutput)"])
            closeConnection(c)
        }
    }

    private func drainOutbound() {
        // The eventfd first, then the queue (see `enqueue`): an answer queued in between is taken now.
        wakeFD.drain()
        let items = outbound.withLock { q -> [Outbound] in
            let items = q
            q.removeAll(keepingCapacity: true)
            return items
        }
        var touched: [UInt64: Connection] = [:]
        for item in items {
            guard let c = connections[item.connection.rawValue], let call = c.calls[item.requestID],
                call.token == item.token
            else { continue }  // the call ended (cancelled, connection gone): drop
            if item.isFinal {
                finishCall(item.requestID, on: c)
                if c.isReadClosed && c.calls.isEmpty { c.closeAfterFlush = true }
            }
            append(item.frame, to: c)
            touched[c.id.rawValue] = c
        }
        for c in touched.values where connections[c.id.rawValue] != nil { flush(c) }
    }

    private func flush(_ c: Connection) {
        while c.pendingOutput > 0 {
            let sent: IOResult<Int>
            do {
                sent = try c.output.withUnsafeBytes { buf in
                    Result { () throws(RainError) in
                        try Syscall.sendNonBlocking(c.fd, UnsafeRawBufferPointer(rebasing: buf[c.outputOffset...]))
                    }
                }.get()
            } catch {
                closeConnection(c)
                return
            }
            guard case .processed(let n) = sent else { break }
            c.outputOffset += n
        }
        if c.pendingOutput == 0 && c.closeAfterFlush {
            closeConnection(c)
            return
        }
        let wantsWrite = c.pendingOutput > 0
        if wantsWrite != c.wantsWrite {
            c.wantsWrite = wantsWrite
            var events: EpollEvents = c.isReadClosed ? [] : [.input, .readHangUp]
            if wantsWrite { events.insert(.output) }
            watch(c, for: events)
        }
    }

    private func closeConnection(_ c: Connection) {
        guard connections.removeValue(forKey: c.id.rawValue) != nil else { return }
        if connectionHighWater >= 32 && connections.count * 2 <= connectionHighWater {
            connectionHighWater = connections.count
            releaseMemoryWhenIdle = true
        }
        handshakeDeadlines[c.id.rawValue] = nil
        epoll.deleteBeforeClose(c.fd)
        Syscall.closeUnchecked(c.fd, because: .socket)
        let inFlight = c.calls.count
        c.calls.removeAll()
        stats.withLock {
            $0.connections -= 1
            $0.calls -= inFlight
        }
        handler.connectionClosed(c.id)
    }
}
