import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainSystem
import RainWire
import Synchronization

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

    let listenFD: Int32
    let epoll: Epoll
    let wakeFD: EventFD
    let options: ServerOptions
    let handler: any ServerHandler
    let logger: Logger
    let ownUID: UInt32

    @exclusivity(unchecked) var connections: [UInt64: Connection] = [:]
    /// The same connections by descriptor, for the loop to find the one an event is for without
    /// hashing its id, which is cheaper (docs/performance.md): `token(fd:id:)` carries both.
    @exclusivity(unchecked) var byDescriptor: [Connection?] = []
    /// Connections with a deadline (`Connection.needsDeadline`), checked every `sweepInterval`.
    @exclusivity(unchecked) var timed: Set<UInt64> = []
    @exclusivity(unchecked) var nextSweep: LoopInstant?
    let sweepInterval: Duration
    /// Open connections per uid or source address (`ServerOptions.maximumConnectionsPerPeer`).
    var connectionsPerPeer: [PeerKey: Int] = [:]
    /// Connection ids in the order they were accepted, from `unadmittedHead` on; admitted or closed
    /// ones are skipped (and dropped by `compactUnadmittedOrder`). The oldest not admitted is the
    /// one evicted at the total limit.
    var unadmittedOrder: [UInt64] = []
    var unadmittedHead = 0
    /// Open connections that are admitted.
    @exclusivity(unchecked) var admittedCount = 0
    /// The plaintext of unfinished frames held across all connections.
    @exclusivity(unchecked) var bufferedInput = 0
    /// The time of the loop's current turn (read once after each wait).
    @exclusivity(unchecked) var now = LoopInstant.now
    /// A descriptor kept open on /dev/null to be given up when descriptors run out: it lets the
    /// loop accept and close the waiting connections (-1 when it could not be reopened).
    var reserveFD: Int32 = -1
    /// Where answers are written before they join a connection's output (loop thread only).
    let scratch = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 64 * 1024)
    /// Set while the listener is out of the epoll set after `EMFILE` / `ENFILE`.
    @exclusivity(unchecked) var acceptPausedUntil: LoopInstant?
    var logThrottle: LogThrottle
    var nextConnection: UInt64 = 2
    @exclusivity(unchecked) var nextToken: UInt64 = 1
    @exclusivity(unchecked) var listening = true
    /// The most connections held since memory was last given back.
    var connectionHighWater = 0
    /// Set when many connections left: once the loop is idle, free heap memory goes back to the
    /// kernel, so the daemon returns to its idle size after a crowd of clients.
    @exclusivity(unchecked) private var releaseMemoryWhenIdle = false
    let outbound = Mutex<[Outbound]>([])
    private let stopRequest = Mutex<Duration?>(nil)
    /// Wake-ups the loop has handled: `isResponsive(within:)` waits for this to move.
    let handledWakes = Atomic<UInt64>(0)
    let stats = Mutex<(connections: Int, calls: Int)>((0, 0))
    let bufferedInputStat = Mutex(0)

    /// Unix connections must be written only by the process that connected (`SO_PASSCRED`).
    let checksWriters: Bool

    static let listenToken: UInt64 = 0
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
        // Set on the listener, so every socket it accepts has it from the start (a write between
        // an accept and a setsockopt on the accepted socket would carry no writer).
        checksWriters = !options.isTCP && options.refusesSharedConnections
        if checksWriters { try Syscall.setPassCredentials(fd) }
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

    /// Whether the loop thread handles a wake-up within `timeout`: false when it is wedged in a
    /// handler, or not running (before `run()`, after it returned). Blocks the calling thread (never
    /// call it on the loop's) for up to `timeout`, looking every millisecond.
    public func isResponsive(within timeout: Duration) -> Bool {
        let before = handledWakes.load(ordering: .acquiring)
        wake()
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if handledWakes.load(ordering: .acquiring) != before { return true }
            usleep(1000)
        }
        return false
    }

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

    /// Changes what the loop waits for on `c`. Returns false when epoll refused (the connection
    /// could no longer be served, so it is closed).
    @discardableResult
    func watch(_ c: Connection, for events: EpollEvents) -> Bool {
        do {
            try epoll.modify(c.fd, events: events, token: c.epollToken)
            return true
        } catch {
            logger.error("epoll.modify_failed", ["connection": "\(c.id)", "errno": "\(error.errno ?? 0)"])
            closeConnection(c)
            return false
        }
    }

    func closeConnection(_ c: Connection) {
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
