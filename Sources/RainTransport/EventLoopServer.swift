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
    /// The connection's TLS channel binding (`TLSSession.channelBinding()`, RFC 9266); nil on a
    /// connection without TLS.
    public var channelBinding: [UInt8]? = nil
    /// The peer's pidfd, taken once when a Unix connection was accepted (`SO_PEERPIDFD`, else
    /// `pidfd_open` of its pid); RainAccess reads the caller's identity through it. Closed when the
    /// connection closes. Nil on TCP, or when the peer was gone before it could be taken.
    public var peerProcess: ProcessDescriptor? = nil
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
    /// The quick lane (issue 18): the OK payload answering `request` at once, from bytes the
    /// handler keeps encoded, or nil to take the ordinary path (`handle`), which must answer the
    /// same. Called on the loop thread, must not block; only for a request in the canonical shape
    /// of a cheap read (`QuickRequest`) on an admitted connection with no call of its id in
    /// flight. `memo` is the connection's to keep what the handler found for the next call (nil
    /// at first; dropped with the connection). The default answers nothing quickly.
    func quickAnswer(
        _ request: QuickRequest, connection: ConnectionID, peer: PeerCredentials, memo: inout AnyObject?
    ) -> [UInt8]?
}

extension ServerHandler {
    /// Nothing is answered quickly: every request takes `handle`.
    public func quickAnswer(
        _ request: QuickRequest, connection: ConnectionID, peer: PeerCredentials, memo: inout AnyObject?
    ) -> [UInt8]? { nil }
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

    // Limits on what a peer can make the server hold (issue 13). A connection is *admitted* once
    // its TLS handshake (if any) is done and its first valid request is decoded; before that it is
    // nobody yet, and may hold very little for very little time.

    /// Bytes a connection may send before it is admitted: the TLS handshake's input, then the
    /// plaintext of its first request. Beyond this it gets RAIN_302 (reason `unadmitted_input`)
    /// and is closed.
    public var maximumUnadmittedInput: Int = 4 << 10
    /// Time a connection has, from accept, to be admitted; then it is closed.
    public var admissionTimeout: Duration = .seconds(10)
    /// A partial frame that gets no new byte for this long is dropped with its connection. An
    /// admitted connection with no partial frame has no deadline at all: a long-lived stream or a
    /// connection that carries a session waits as long as it likes between requests.
    public var frameProgressTimeout: Duration = .seconds(10)
    /// Unfinished frames held across all connections. The connection whose input would go beyond
    /// gets RAIN_302 (reason `input_budget`) and is closed; complete frames are never held, so
    /// clients that send whole requests are not affected. 64 MiB in a device daemon, 256 MiB in
    /// an authority.
    public var maximumBufferedInput: Int = 64 << 20
    /// Connections at once from one uid (Unix socket) or one source address (TCP; an IPv4 address
    /// mapped into IPv6 counts as the IPv4 address). The daemon's own uid is bounded only by
    /// `maximumConnections`: it is the user the daemon serves (`scripts/load` runs 1,000 clients).
    public var maximumConnectionsPerPeer: Int = 256
    /// Connections at once in all. A connection beyond a limit is closed as soon as it is accepted.
    public var maximumConnections: Int = 4096
    /// Connections not admitted yet, at once; beyond, the oldest of them is closed to make room.
    /// A TLS connection costs some 25 KiB in OpenSSL and its buffers before it is admitted, so an
    /// authority sets 1,024 here (its memory stays within 96 MiB of idle under a flood); a device
    /// daemon, whose unadmitted connections cost little, keeps the total.
    public var maximumUnadmittedConnections: Int = 4096
    /// When `accept` fails for want of descriptors (`EMFILE`, `ENFILE`), the listener is paused
    /// this long (the waiting connections are accepted and closed through a reserve descriptor, so
    /// they get an answer) instead of the loop spinning on a listener that stays readable.
    public var acceptBackoff: Duration = .milliseconds(250)
    /// Refusals (a peer uid not allowed, a limit reached, a descriptor shortage) are logged at
    /// most once per this interval for each kind, with the count of the ones left out.
    public var refusalLogInterval: Duration = .seconds(10)
    /// The uid taken as the server's own (tests set another to be a peer that is not the owner);
    /// nil: the process's uid.
    var ownUID: UInt32?
    /// False to take peers' pidfds with `pidfd_open` even where `SO_PEERPIDFD` exists (tests of
    /// the fallback of kernels before 6.5).
    var usesPeerPidfd = true
    public init() {}
}

/// Who a connection counts against for `ServerOptions.maximumConnectionsPerPeer`.
enum PeerKey: Hashable {
    case uid(UInt32)
    case address([UInt8])
}

/// A non-blocking server on one epoll event-loop thread (ARCHITECTURE.md): no thread per connection.
/// Requests are decoded and dispatched on the loop thread; answers posted from other threads wake
/// the loop through an eventfd.
public final class EventLoopServer: @unchecked Sendable {
    // @unchecked Sendable: every var below except `outbound` and `stopRequest` is touched only on
    // the loop thread (inside `run()`); those two are behind Mutexes. The ones the loop reads on
    // every call go without the dynamic exclusivity check, as `Connection`'s do.

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

    /// One connection. Its state is the loop thread's alone (see `EventLoopServer`), so its
    /// properties go without the dynamic exclusivity check: no access to one of them ever
    /// overlaps another on that one thread, and the checks cost about 1,000 instructions per call
    /// (issue 18, `scripts/bench --profile`).
    final class Connection {
        let id: ConnectionID
        let fd: Int32
        let peer: PeerCredentials
        /// What the connection counts against for the per-peer limit; nil for the daemon's own uid.
        let peerKey: PeerKey?
        let acceptedAt: LoopInstant
        /// What epoll reports for it (`EventLoopServer.token(fd:id:)`).
        let epollToken: UInt64
        /// When the last byte of input arrived (the progress of a partial frame).
        @exclusivity(unchecked) var lastInputAt: LoopInstant
        /// True once the TLS handshake is done and a first valid request was decoded.
        @exclusivity(unchecked) var isAdmitted = false
        /// The plaintext of unfinished frames held in `decoder`, as counted in the server's total.
        @exclusivity(unchecked) var bufferedInput = 0
        /// Ciphertext received while the TLS handshake is not done.
        @exclusivity(unchecked) var handshakeInput = 0
        /// A TLS record is partly received (held by OpenSSL, not by the decoder).
        @exclusivity(unchecked) var hasPartialRecord = false
        /// In the server's set of connections with a deadline.
        @exclusivity(unchecked) var isTimed = false
        @exclusivity(unchecked) var decoder: FrameDecoder
        @exclusivity(unchecked) var output: [UInt8] = []
        @exclusivity(unchecked) var outputOffset = 0
        @exclusivity(unchecked) var calls: [UInt64: Call] = [:]
        @exclusivity(unchecked) var wantsWrite = false
        @exclusivity(unchecked) var closeAfterFlush = false
        @exclusivity(unchecked) var isReadClosed = false
        /// Set when the server closed it (it is no longer in `connections`).
        @exclusivity(unchecked) var isClosed = false
        /// The handler's memo for the quick lane (`ServerHandler.quickAnswer`).
        @exclusivity(unchecked) var quickMemo: AnyObject?
        /// The last request the quick lane recognised, after its id (`QuickShape`).
        @exclusivity(unchecked) var quickShape: QuickShape?
        /// The TLS state when the server speaks TLS: frames are encrypted into `output` and input
        /// is decrypted before the decoder sees it.
        @exclusivity(unchecked) var tls: TLSSession?
        /// The TLS exporter value, once the handshake completed.
        @exclusivity(unchecked) var channelBinding: [UInt8]?
        /// The peer's pidfd (Unix connections), closed with the connection.
        @exclusivity(unchecked) var process: ProcessDescriptor?
        init(
            id: ConnectionID, fd: Int32, peer: PeerCredentials, peerKey: PeerKey?, maximumFrame: Int,
            now: LoopInstant
        ) {
            self.id = id
            self.fd = fd
            self.peer = peer
            self.peerKey = peerKey
            self.acceptedAt = now
            self.lastInputAt = now
            self.epollToken = EventLoopServer.token(fd: fd, id: id.rawValue)
            self.decoder = FrameDecoder(maximumLength: maximumFrame)
        }
        var pendingOutput: Int { output.count - outputOffset }
        /// True while the connection has a deadline: not admitted yet, or holding a partial frame.
        var needsDeadline: Bool { !isAdmitted || bufferedInput > 0 || hasPartialRecord }
    }

    private let listenFD: Int32
    private let epoll: Epoll
    private let wakeFD: EventFD
    private let options: ServerOptions
    private let handler: any ServerHandler
    private let logger: Logger
    private let ownUID: UInt32

    @exclusivity(unchecked) private var connections: [UInt64: Connection] = [:]
    /// The same connections by descriptor, for the loop to find the one an event is for without
    /// hashing its id (~120 instructions a call, issue 18): `token(fd:id:)` carries both.
    @exclusivity(unchecked) private var byDescriptor: [Connection?] = []
    /// Connections with a deadline (`Connection.needsDeadline`), checked every `sweepInterval`.
    @exclusivity(unchecked) private var timed: Set<UInt64> = []
    @exclusivity(unchecked) private var nextSweep: LoopInstant?
    private let sweepInterval: Duration
    /// Open connections per uid or source address (`ServerOptions.maximumConnectionsPerPeer`).
    private var connectionsPerPeer: [PeerKey: Int] = [:]
    /// Connection ids in the order they were accepted, from `unadmittedHead` on; admitted or closed
    /// ones are skipped (and dropped by `compactUnadmittedOrder`). The oldest not admitted is the
    /// one evicted at the total limit.
    private var unadmittedOrder: [UInt64] = []
    private var unadmittedHead = 0
    /// Open connections that are admitted.
    @exclusivity(unchecked) private var admittedCount = 0
    /// The plaintext of unfinished frames held across all connections.
    @exclusivity(unchecked) private var bufferedInput = 0
    /// The time of the loop's current turn (read once after each wait).
    @exclusivity(unchecked) private var now = LoopInstant.now
    /// A descriptor kept open on /dev/null to be given up when descriptors run out: it lets the
    /// loop accept and close the waiting connections (-1 when it could not be reopened).
    private var reserveFD: Int32 = -1
    /// Where answers are written before they join a connection's output (loop thread only).
    private let scratch = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 64 * 1024)
    /// Set while the listener is out of the epoll set after `EMFILE` / `ENFILE`.
    @exclusivity(unchecked) private var acceptPausedUntil: LoopInstant?
    private var logThrottle: LogThrottle
    private var nextConnection: UInt64 = 2
    @exclusivity(unchecked) private var nextToken: UInt64 = 1
    @exclusivity(unchecked) private var listening = true
    /// The most connections held since memory was last given back.
    private var connectionHighWater = 0
    /// Set when many connections left: once the loop is idle, free heap memory goes back to the
    /// kernel, so the daemon returns to its idle size after a crowd of clients.
    @exclusivity(unchecked) private var releaseMemoryWhenIdle = false
    private let outbound = Mutex<[Outbound]>([])
    private let stopRequest = Mutex<Duration?>(nil)
    private let stats = Mutex<(connections: Int, calls: Int)>((0, 0))
    private let bufferedInputStat = Mutex(0)

    private static let listenToken: UInt64 = 0
    private static let wakeToken: UInt64 = 1

    /// Takes ownership of a listening socket (non-blocking or not; it is made non-blocking).
    public init(listeningSocket fd: Int32, options: ServerOptions, handler: any ServerHandler, logger: Logger) throws(RainError) {
        self.listenFD = fd
        self.options = options
        self.handler = handler
        self.logger = logger
        self.logThrottle = LogThrottle(interval: options.refusalLogInterval)
        self.ownUID = options.ownUID ?? getuid()
        let shortest = min(options.admissionTimeout, options.frameProgressTimeout, options.tlsHandshakeTimeout)
        self.sweepInterval = max(.milliseconds(5), shortest / 10)
        try Syscall.setNonBlocking(fd, true)
        epoll = try Epoll(maximumEvents: 128)
        wakeFD = try EventFD()
        try epoll.add(listenFD, events: .input, token: Self.listenToken)
        try epoll.add(wakeFD.descriptor, events: .input, token: Self.wakeToken)
        reserveFD = (try? Syscall.open("/dev/null", .readOnly)) ?? -1
    }

    deinit {
        if reserveFD >= 0 { Syscall.closeUnchecked(reserveFD, because: .readOnly) }
        scratch.deallocate()
    }

    /// Open connections and calls in flight, for logs and tests.
    public var counts: (connections: Int, calls: Int) { stats.withLock { $0 } }

    /// The bytes of unfinished frames held across all connections, for tests.
    public var bufferedInputByteCount: Int { bufferedInputStat.withLock { $0 } }

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
        let start = LoopInstant.now

        while true {
            if let timeout = stopRequest.withLock({ r -> Duration? in
                defer { r = nil }; return r
            }) {
                if listening {
                    listening = false
                    epoll.deleteBeforeClose(listenFD)
                    Syscall.closeUnchecked(listenFD, because: .socket)
                }
                drainDeadline = (LoopInstant.now - start) + timeout
            }
            if let deadline = drainDeadline {
                let inFlight = connections.values.reduce(0) { $0 + $1.calls.values.filter { !$0.isStream }.count }
                if inFlight == 0 || LoopInstant.now - start >= deadline {
                    if inFlight > 0 { logger.warning("drain.timeout", ["calls": "\(inFlight)"]) }
                    for c in Array(connections.values) { flush(c); closeConnection(c) }
                    return
                }
            }
            var timeoutMS: Int32 = drainDeadline != nil ? 20 : releaseMemoryWhenIdle ? 200 : -1
            now = LoopInstant.now
            if let sweep = nextSweep, sweep <= now { sweepDeadlines() }
            if let resume = acceptPausedUntil, resume <= now { resumeAccepting() }
            // Each on its own, not an array of them: no allocation per turn of the loop.
            if let wakeAt = nextSweep { timeoutMS = Self.waitUntil(wakeAt, now: now, orEarlier: timeoutMS) }
            if let wakeAt = acceptPausedUntil { timeoutMS = Self.waitUntil(wakeAt, now: now, orEarlier: timeoutMS) }
            let n: Int
            do {
                n = try epoll.wait(into: &events, timeoutMilliseconds: timeoutMS)
            } catch {
                logger.error("epoll.failed", ["errno": "\(error.errno ?? 0)"])
                return
            }
            now = LoopInstant.now
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
                    guard let c = connection(forToken: ev.token) else { continue }
                    if c.isReadClosed && !ev.events.isDisjoint(with: [.hangUp, .error]) {
                        closeConnection(c)  // the peer is gone both ways: nobody to answer
                        continue
                    }
                    if !c.isReadClosed && !ev.events.isDisjoint(with: [.input, .hangUp, .error, .readHangUp]) {
                        readAvailable(c, readBuffer)
                    }
                    if !c.isClosed { flush(c) }
                }
            }
        }
    }

    /// The epoll token of the connection `id` on descriptor `fd`: the top bit set (tokens 0 and 1
    /// are the listener and the eventfd), the descriptor in bits 32 to 62, the id's low 32 bits
    /// below. A late event for a closed connection whose descriptor was reused carries the old
    /// id, and finds nothing.
    static func token(fd: Int32, id: UInt64) -> UInt64 {
        (1 << 63) | (UInt64(UInt32(bitPattern: fd)) & 0x7FFF_FFFF) << 32 | (id & 0xFFFF_FFFF)
    }

    /// The open connection an epoll event with `token` is for.
    private func connection(forToken token: UInt64) -> Connection? {
        let slot = Int((token >> 32) & 0x7FFF_FFFF)
        guard token >> 63 == 1, slot < byDescriptor.count, let c = byDescriptor[slot], c.epollToken == token else {
            return nil
        }
        return c
    }

    /// The wait in milliseconds until `wakeAt` (at least 1), or `timeoutMS` when that is sooner
    /// (-1: no timeout yet).
    private static func waitUntil(
        _ wakeAt: LoopInstant, now: LoopInstant, orEarlier timeoutMS: Int32
    ) -> Int32 {
        let wait = Int32(clamping: max(1, (wakeAt - now).milliseconds + 1))
        return timeoutMS < 0 ? wait : min(timeoutMS, wait)
    }

    private func acceptAll() {
        while listening && acceptPausedUntil == nil {
            let fd: Int32
            do {
                guard case .processed(let accepted) = try Syscall.accept(listenFD) else { return }
                fd = accepted
            } catch {
                let e = error.errno ?? 0
                if e == EMFILE || e == ENFILE {
                    outOfDescriptors(errno: e)
                    return
                }
                logger.warning("accept.failed", ["errno": "\(e)"])
                return
            }
            admit(fd)
        }
    }

    /// Takes an accepted socket in, or closes it at once when its peer is not allowed or a
    /// connection limit is reached: before any byte of it is read.
    private func admit(_ fd: Int32) {
        let peer: PeerCredentials
        let peerKey: PeerKey?
        if options.isTCP {
            guard let address = try? Syscall.peerAddress(fd) else {
                Syscall.closeUnchecked(fd, because: .socket)  // the peer is gone already
                return
            }
            TCPSocket.setNoDelay(fd)
            peer = .tcpPeer(address: TCPSocket.addressText(address))
            peerKey = .address(address)
        } else {
            guard let credentials = try? Syscall.peerCredentials(fd) else {
                // The peer is gone already (or never was): nothing to serve.
                Syscall.closeUnchecked(fd, because: .socket)
                return
            }
            peer = PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
            guard peer.uid == ownUID || options.allowedUIDs.contains(peer.uid) else {
                // Logged before the close, so the line is there by the time the peer sees the end.
                defer { Syscall.closeUnchecked(fd, because: .socket) }
                if let suppressed = logThrottle.admit("peer.refused", now: now) {
                    logger.warning(
                        "peer.refused",
                        [
                            "uid": "\(peer.uid)", "pid": "\(peer.pid)", "suppressed": "\(suppressed)",
                            "hint": "closed at accept: this uid is not allowed in the daemon's config",
                        ])
                }
                return
            }
            peerKey = peer.uid == ownUID ? nil : .uid(peer.uid)
        }
        if let peerKey, connectionsPerPeer[peerKey, default: 0] >= options.maximumConnectionsPerPeer {
            refuseAtAccept(fd, event: "connection.peer_limit", limit: options.maximumConnectionsPerPeer, peer: peerKey)
            return
        }
        // At a limit, the oldest connection not admitted yet makes room: whoever holds idle
        // connections cannot lock a real client out; only admitted connections are kept.
        if connections.count - admittedCount >= options.maximumUnadmittedConnections {
            _ = evictOldestUnadmitted()
        }
        if connections.count >= options.maximumConnections && !evictOldestUnadmitted() {
            refuseAtAccept(fd, event: "connection.limit", limit: options.maximumConnections, peer: peerKey)
            return
        }
        let id = nextConnection
        nextConnection += 1
        let c = Connection(
            id: ConnectionID(rawValue: id), fd: fd, peer: peer, peerKey: peerKey,
            maximumFrame: options.maximumFrameLength, now: now)
        if !options.isTCP { c.process = peerProcess(of: fd, peer: peer) }
        if let tls = options.tls {
            do {
                c.tls = try tls.makeServerSession()
            } catch {
                logger.error("tls.session_failed", ["error": error.message])
                Syscall.closeUnchecked(fd, because: .failurePath)
                c.process?.close()
                return
            }
        }
        do {
            try epoll.add(fd, events: [.input, .readHangUp], token: c.epollToken)
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            c.process?.close()
            return
        }
        connections[id] = c
        let slot = Int(fd)
        if slot >= byDescriptor.count {
            byDescriptor.append(contentsOf: repeatElement(nil, count: slot + 1 - byDescriptor.count))
        }
        byDescriptor[slot] = c
        unadmittedOrder.append(id)
        if let peerKey { connectionsPerPeer[peerKey, default: 0] += 1 }
        connectionHighWater = max(connectionHighWater, connections.count)
        stats.withLock { $0.connections += 1 }
        updateDeadline(c)
    }

    /// The peer's pidfd, taken once per connection; nil (logged, throttled) when the peer is gone
    /// already. Not taken when it cannot be: the connection is still served, and whoever needs the
    /// caller's identity refuses a call without one.
    private func peerProcess(of fd: Int32, peer: PeerCredentials) -> ProcessDescriptor? {
        do {
            return try ProcessDescriptor.peer(ofSocket: fd, pid: peer.pid, usesPeerPidfd: options.usesPeerPidfd)
        } catch {
            if let suppressed = logThrottle.admit("peer.pidfd_failed", now: now) {
                logger.warning(
                    "peer.pidfd_failed",
                    ["pid": "\(peer.pid)", "errno": "\(error.errno ?? 0)", "suppressed": "\(suppressed)"])
            }
            return nil
        }
    }

    /// Closes the oldest connection that is not admitted yet, to make room for a new one.
    /// - Returns: false when every connection is admitted.
    private func evictOldestUnadmitted() -> Bool {
        while unadmittedHead < unadmittedOrder.count {
            let id = unadmittedOrder[unadmittedHead]
            unadmittedHead += 1
            guard let c = connections[id], !c.isAdmitted else { continue }
            if let suppressed = logThrottle.admit("connection.evicted", now: now) {
                logger.warning(
                    "connection.evicted",
                    [
                        "connection": "\(c.id)", "connections": "\(connections.count)",
                        "unadmitted": "\(connections.count - admittedCount)", "suppressed": "\(suppressed)",
                        "hint": "the oldest connection without a request made room for a new one",
                    ])
            }
            closeConnection(c)
            compactUnadmittedOrder()
            return true
        }
        compactUnadmittedOrder()
        return false
    }

    /// Drops the ids of `unadmittedOrder` that no longer stand for a connection waiting for
    /// admission, once they are the larger part of it (so it stays in proportion to the
    /// connections, whatever the churn).
    private func compactUnadmittedOrder() {
        guard unadmittedOrder.count > 64 && unadmittedOrder.count > 2 * (connections.count - admittedCount) else { return }
        unadmittedOrder = unadmittedOrder[unadmittedHead...].filter { connections[$0].map { !$0.isAdmitted } ?? false }
        unadmittedHead = 0
    }

    /// Closes a connection a limit refuses; on a Unix socket it first gets one RAIN_302 frame
    /// (request id 0) saying which limit, written only if the socket takes it at once.
    private func refuseAtAccept(_ fd: Int32, event: String, limit: Int, peer: PeerKey?) {
        if !options.isTCP {
            let who = if case .uid(let uid)? = peer { "uid \(uid)" } else { "this daemon" }
            let error = RainError(
                .refused,
                "too many connections (\(limit) for \(who)); close some, or retry later",
                details: .init(reason: "connection_limit", retryAfterMilliseconds: 1000))
            if let frame = try? Envelope(requestID: 0, kind: .response(.failure(error))).encodeFrame() {
                _ = frame.withUnsafeBytes { try? Syscall.sendNonBlocking(fd, $0) }
            }
        }
        defer { Syscall.closeUnchecked(fd, because: .socket) }
        if let suppressed = logThrottle.admit(event, now: now) {
            var who = ""
            switch peer {
            case .uid(let uid)?: who = "uid \(uid)"
            case .address(let bytes)?: who = Self.describe(address: bytes)
            case nil: who = "own uid"
            }
            logger.warning(
                event,
                ["peer": who, "limit": "\(limit)", "connections": "\(connections.count)", "suppressed": "\(suppressed)"])
        }
    }

    /// An IP address for a log line, written as the connection's own log lines write its peer
    /// (`TCPSocket.addressText`).
    static func describe(address bytes: [UInt8]) -> String {
        TCPSocket.addressText(bytes) ?? "\(bytes.count)-byte address"
    }

    /// `accept` failed for want of descriptors. The listener stays readable while connections
    /// wait, so calling `accept` again at once would spin: give up the reserve descriptor to
    /// accept and close what waits (those clients get an answer instead of hanging), take the
    /// reserve back, and leave the listener out of the epoll set for `acceptBackoff`. One log line
    /// per episode (per `refusalLogInterval` at most).
    private func outOfDescriptors(errno e: Int32) {
        var shed = 0
        if reserveFD >= 0 {
            Syscall.closeUnchecked(reserveFD, because: .readOnly)
            reserveFD = -1
            while shed < 1024, case .processed(let fd)? = try? Syscall.accept(listenFD) {
                Syscall.closeUnchecked(fd, because: .socket)
                shed += 1
            }
            reserveFD = (try? Syscall.open("/dev/null", .readOnly)) ?? -1
        }
        if let suppressed = logThrottle.admit("accept.no_descriptors", now: now) {
            logger.warning(
                "accept.no_descriptors",
                [
                    "errno": "\(e)", "connections": "\(connections.count)", "closedWaiting": "\(shed)",
                    "pauseMs": "\(options.acceptBackoff.milliseconds)", "suppressed": "\(suppressed)",
                    "hint": "raise the descriptor limit (LimitNOFILE=, ulimit -n) or lower maximumConnections",
                ])
        }
        do {
            try epoll.modify(listenFD, events: [], token: Self.listenToken)
            acceptPausedUntil = now + options.acceptBackoff
        } catch {
            // The listener still wakes the loop; the next turns keep shedding through the reserve.
            logger.error("epoll.modify_failed", ["listener": "true", "errno": "\(error.errno ?? 0)"])
        }
    }

    /// Puts the listener back after an `acceptBackoff` pause and accepts what waits.
    private func resumeAccepting() {
        acceptPausedUntil = nil
        guard listening else { return }
        do {
            try epoll.modify(listenFD, events: .input, token: Self.listenToken)
        } catch {
            logger.error("epoll.modify_failed", ["listener": "true", "errno": "\(error.errno ?? 0)"])
        }
        acceptAll()
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
            c.lastInputAt = now
            if let tls = c.tls {
                if !tls.isHandshakeComplete { c.handshakeInput += n }
                // The session copies the ciphertext, so the buffer is free for the plaintext.
                tls.receive(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                let goesOn = decryptAvailable(c, tls, buffer)
                c.hasPartialRecord = tls.hasPartialRecord
                if !tls.isHandshakeComplete && c.handshakeInput > options.maximumUnadmittedInput
                    && !c.isClosed
                {
                    // No channel to answer on yet: the handshake alone is over the budget.
                    logRefusal("input.refused", c, reason: "unadmitted_input")
                    closeConnection(c)
                    return
                }
                guard goesOn else {
                    if !c.isClosed { updateDeadline(c) }
                    return
                }
            } else {
                consume(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), on: c)
            }
            guard !c.isClosed else { return }
            enforceInputLimits(c)
            updateDeadline(c)
            if c.closeAfterFlush { continue }
            if n < buffer.count { break }
        }
    }

    /// Feeds plaintext to the connection's frame decoder and processes the complete frames: in
    /// place while the decoder holds no partial frame (a whole request per read, the usual case),
    /// through the decoder otherwise.
    private func consume(_ plaintext: UnsafeRawBufferPointer, on c: Connection) {
        do {
            var rest = plaintext
            if c.decoder.bufferedByteCount == 0 {
                let taken = try FrameDecoder.completeFrames(in: plaintext, maximumLength: options.maximumFrameLength) {
                    body in
                    serveFrame(body, on: c)
                    return !c.closeAfterFlush && !c.isClosed
                }
                if c.closeAfterFlush || c.isClosed { return }
                rest = UnsafeRawBufferPointer(rebasing: plaintext[taken...])
            }
            if !rest.isEmpty {
                try c.decoder.append(rest)
                while true {
                    // The body is copied out of the decoder's buffer only for the ordinary path's
                    // rare case (a request split across reads).
                    guard let frame = try c.decoder.withNextFrame({ Array($0) }) else { break }
                    frame.withUnsafeBufferPointer { serveFrame($0, on: c) }
                    if c.closeAfterFlush || c.isClosed { break }
                }
            }
        } catch {
            // The framing itself is broken: answer once and close, the stream cannot be trusted.
            fail(0, error, on: c)
            c.closeAfterFlush = true
            c.decoder = FrameDecoder(maximumLength: options.maximumFrameLength)
        }
        countBufferedInput(c)
    }

    /// Serves one frame body: the quick lane when the request is a cheap read the handler answers
    /// at once (`ServerHandler.quickAnswer`), the ordinary path (decode, `process`) otherwise.
    /// Not inlined: `scripts/bench-instructions` counts its calls as the requests served.
    @inline(never)
    private func serveFrame(_ body: UnsafeBufferPointer<UInt8>, on c: Connection) {
        if c.isAdmitted, let request = QuickRequest(body, shape: &c.quickShape),
            c.calls.count < options.maximumCallsPerConnection,
            c.calls.isEmpty || c.calls[request.requestID] == nil,
            let payload = handler.quickAnswer(request, connection: c.id, peer: c.peer, memo: &c.quickMemo)
        {
            let written = payload.withUnsafeBufferPointer {
                QuickAnswer.write(requestID: request.requestID, payload: $0, into: scratch)
            }
            if let n = written, n - Frame.headerLength <= options.maximumFrameLength {
                append(UnsafeBufferPointer(rebasing: scratch[0..<n]), to: c)
                return
            }
        }
        process(Result { () throws(RainError) in try Envelope.decode(body) }, on: c)
    }

    /// Brings the server's total of held input up to date with what `c`'s decoder holds.
    private func countBufferedInput(_ c: Connection) {
        let held = c.decoder.bufferedByteCount
        guard held != c.bufferedInput else { return }
        bufferedInput += held - c.bufferedInput
        c.bufferedInput = held
        let total = bufferedInput
        bufferedInputStat.withLock { $0 = total }
    }

    /// Refuses the partial frame of `c` when it is over a budget: before admission its own
    /// (`maximumUnadmittedInput`), after it the server's (`maximumBufferedInput`). The peer gets
    /// RAIN_302 with request id 0 and the connection closes; the held bytes are freed at once.
    private func enforceInputLimits(_ c: Connection) {
        guard c.bufferedInput > 0, !c.closeAfterFlush else { return }
        let error: RainError
        let reason: String
        if !c.isAdmitted && c.bufferedInput > options.maximumUnadmittedInput {
            reason = "unadmitted_input"
            error = RainError(
                .refused,
                "the first request on a connection may be at most \(options.maximumUnadmittedInput) bytes; "
                    + "send a smaller request first (Daemon/GetInfo), then the larger one",
                details: .init(reason: reason))
        } else if bufferedInput > options.maximumBufferedInput {
            reason = "input_budget"
            error = RainError(
                .refused,
                "the server holds \(options.maximumBufferedInput >> 20) MiB of unfinished requests, its limit; "
                    + "retry shortly",
                details: .init(reason: reason, retryAfterMilliseconds: 1000))
        } else {
            return
        }
        logRefusal("input.refused", c, reason: reason)
        c.decoder = FrameDecoder(maximumLength: options.maximumFrameLength)
        countBufferedInput(c)
        fail(0, error, on: c)
        c.closeAfterFlush = true
    }

    /// A throttled warning about a refused connection.
    private func logRefusal(_ event: String, _ c: Connection, reason: String) {
        guard let suppressed = logThrottle.admit("\(event).\(reason)", now: now) else { return }
        var who = "own uid"
        switch c.peerKey {
        case .uid(let uid)?: who = "uid \(uid)"
        case .address(let bytes)?: who = Self.describe(address: bytes)
        case nil: break
        }
        logger.warning(
            event,
            [
                "connection": "\(c.id)", "peer": who, "reason": reason, "bufferedBytes": "\(bufferedInput)",
                "suppressed": "\(suppressed)",
            ])
    }

    /// Puts `c` in the set of connections with a deadline, or takes it out.
    private func updateDeadline(_ c: Connection) {
        let needs = c.needsDeadline
        guard needs != c.isTimed else { return }
        c.isTimed = needs
        if needs {
            timed.insert(c.id.rawValue)
            if nextSweep == nil { nextSweep = now + sweepInterval }
        } else {
            timed.remove(c.id.rawValue)
        }
    }

    /// When `c` must have made progress: admission (and the TLS handshake) counted from accept, a
    /// partial frame from its last byte. Nil when it has no deadline.
    private func deadline(of c: Connection) -> LoopInstant? {
        var deadline: LoopInstant?
        if !c.isAdmitted {
            deadline = c.acceptedAt + options.admissionTimeout
            if let tls = c.tls, !tls.isHandshakeComplete {
                deadline = min(c.acceptedAt + options.admissionTimeout, c.acceptedAt + options.tlsHandshakeTimeout)
            }
        }
        if c.bufferedInput > 0 || c.hasPartialRecord {
            let stalled = c.lastInputAt + options.frameProgressTimeout
            deadline = deadline.map { min($0, stalled) } ?? stalled
        }
        return deadline
    }

    /// Closes the connections past their deadline; runs every `sweepInterval` while any has one.
    private func sweepDeadlines() {
        var expired: [Connection] = []
        for id in timed {
            guard let c = connections[id], let deadline = deadline(of: c) else { continue }
            if deadline <= now { expired.append(c) }
        }
        for c in expired {
            let event: String
            if let tls = c.tls, !tls.isHandshakeComplete {
                event = "tls.handshake_timeout"
            } else if !c.isAdmitted {
                event = "connection.admission_timeout"
            } else {
                event = "connection.frame_stalled"
            }
            if let suppressed = logThrottle.admit(event, now: now) {
                logger.warning(event, ["connection": "\(c.id)", "suppressed": "\(suppressed)"])
            }
            if c.tls?.isHandshakeComplete ?? true {
                // Say why, if the peer reads; the connection closes either way.
                fail(
                    0,
                    RainError(
                        .refused,
                        c.isAdmitted
                            ? "a request stalled for \(options.frameProgressTimeout.milliseconds) ms; the connection is closed"
                            : "no complete request within \(options.admissionTimeout.milliseconds) ms; the connection is closed",
                        details: .init(reason: c.isAdmitted ? "frame_stalled" : "admission_timeout")),
                    on: c)
                if !c.isClosed { flush(c) }
            }
            closeConnection(c)
        }
        nextSweep = timed.isEmpty ? nil : now + sweepInterval
    }

    /// Advances the handshake and decrypts every complete record into `buffer`, consuming it.
    /// Returns false when reading must stop (the connection is ending or gone).
    private func decryptAvailable(_ c: Connection, _ tls: TLSSession, _ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        if !tls.isHandshakeComplete {
            do {
                let isComplete = try tls.handshake()
                tls.appendOutput(to: &c.output)
                guard isComplete else { return true }
                c.handshakeInput = 0
                // Taken once: every request on the connection carries it (the authority binds
                // device proofs to it). An export that fails closes the connection: without it a
                // TLS connection would look like one that has no binding to prove against.
                c.channelBinding = try tls.channelBinding()
                logger.debug("tls.handshake_complete", ["connection": "\(c.id)"])
            } catch {
                // The alert (protocol version, …) goes out, then the connection closes.
                tls.appendOutput(to: &c.output)
                logger.warning(
                    "tls.handshake_failed",
                    ["connection": "\(c.id)", "reason": error.details.reason ?? "", "error": error.message])
                c.closeAfterFlush = true
                return false
            }
        }
        while !c.isClosed && !c.closeAfterFlush {
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
            try epoll.modify(c.fd, events: events, token: c.epollToken)
            return true
        } catch {
            logger.error("epoll.modify_failed", ["connection": "\(c.id)", "errno": "\(error.errno ?? 0)"])
            closeConnection(c)
            return false
        }
    }

    private func process(_ decoded: Result<Envelope, RainError>, on c: Connection) {
        let envelope: Envelope
        do {
            envelope = try decoded.get()
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
            // A valid request: from now on the connection is somebody (issue 13).
            if !c.isAdmitted {
                c.isAdmitted = true
                admittedCount += 1
                compactUnadmittedOrder()
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
            let token = nextToken
            nextToken += 1
            let context = RequestContext(
                connection: c.id, requestID: id, peer: c.peer,
                responder: Responder(server: self, connection: c.id, requestID: id, token: token),
                channelBinding: c.channelBinding, peerProcess: c.process)
            // A call is registered only when it outlives `handle`: whatever its responder posts
            // meanwhile is taken by `drainOutbound`, on this thread, after this returns. An answer
            // given at once needs no entry (and no allocation) at all.
            let decision = handler.handle(request, context: context)
            if case .respond(let response) = decision {
                enqueue(Envelope(requestID: id, kind: .response(response)), on: c)
                return
            }
            let call = Call(token: token)
            if case .stream = decision { call.isStream = true }
            c.calls[id] = call
            stats.withLock { $0.calls += 1 }
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
        // Written in the loop's scratch buffer, then appended: no array per answer.
        if c.tls == nil, let n = try? envelope.writeFrame(into: scratch),
            n - Frame.headerLength <= options.maximumFrameLength
        {
            append(UnsafeBufferPointer(rebasing: scratch[0..<n]), to: c)
            return
        }
        do {
            append(try frame(requestID: envelope.requestID, kind: envelope.kind), to: c)
        } catch {
            logger.error("encode.failed", ["connection": "\(c.id)"])
        }
    }

    private func append(_ frame: [UInt8], to c: Connection) {
        frame.withUnsafeBufferPointer { append($0, to: c) }
    }

    private func append(_ frame: UnsafeBufferPointer<UInt8>, to c: Connection) {
        if c.pendingOutput == 0 {
            c.output.removeAll(keepingCapacity: c.output.capacity <= 256 * 1024)
            c.outputOffset = 0
        }
        if let tls = c.tls {
            do {
                try tls.write(UnsafeRawBufferPointer(frame))
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
        for c in touched.values where !c.isClosed { flush(c) }
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
        if c.pendingOutput == 0 && !c.isAdmitted && c.output.capacity > 0 {
            // A connection that is nobody yet keeps no buffer between its messages (its TLS
            // handshake flight would otherwise stay allocated for as long as it holds on).
            c.output = []
            c.outputOffset = 0
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
        if Int(c.fd) < byDescriptor.count, byDescriptor[Int(c.fd)] === c { byDescriptor[Int(c.fd)] = nil }
        c.isClosed = true
        if connectionHighWater >= 32 && connections.count * 2 <= connectionHighWater {
            connectionHighWater = connections.count
            releaseMemoryWhenIdle = true
        }
        if c.isTimed { timed.remove(c.id.rawValue) }
        if c.isAdmitted { admittedCount -= 1 } else { compactUnadmittedOrder() }
        if let key = c.peerKey {
            let left = (connectionsPerPeer[key] ?? 1) - 1
            connectionsPerPeer[key] = left > 0 ? left : nil
        }
        if c.bufferedInput > 0 {
            bufferedInput -= c.bufferedInput
            c.bufferedInput = 0
            let total = bufferedInput
            bufferedInputStat.withLock { $0 = total }
        }
        epoll.deleteBeforeClose(c.fd)
        Syscall.closeUnchecked(c.fd, because: .socket)
        c.process?.close()
        let inFlight = c.calls.count
        c.calls.removeAll()
        stats.withLock {
            $0.connections -= 1
            $0.calls -= inFlight
        }
        handler.connectionClosed(c.id)
    }
}
