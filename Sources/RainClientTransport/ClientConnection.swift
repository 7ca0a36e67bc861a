import FoundationEssentials
import Glibc
import RainCore
import RainSystem
import RainWire
import Synchronization

/// A client connection to a framed-protobuf server over a Unix socket (the device daemon) or a
/// TCP socket, plain or TLS 1.3 (a remote authority): many calls in flight, answered by id in any
/// order, plus server streams. A reader thread owns the receive side; callers write frames under a
/// lock, which also guards the TLS session. TLS comes from `RainTransport` (`init(tcp:tls:…)`)
/// through `ConnectionCipher`, so this module, and a client of the daemon, does not link OpenSSL.
///
/// Errors the connection raises itself (lost, closed, undecodable input) carry
/// `ClientConnection.ConnectionFailure` as their underlying cause (`RainError.isConnectionFailure`),
/// so callers can tell them from errors the server sent.
public final class ClientConnection: TaskExecutor, Sendable {
    /// The underlying cause of every error the connection raises itself (never of a server's).
    public struct ConnectionFailure: Error, Sendable {}

    enum Pending {
        /// Resumed exactly once, by whoever removes it from `State.pending` (under the lock: only
        /// one can), or at once when it never got there (see `call`).
        case unary(UnsafeContinuation<Result<[UInt8], RainError>, Never>)
        case stream(StreamSink)
        /// A call that was being answered inline (`callInline`) and stopped waiting before its
        /// answer came: the answer, when it comes, is kept in the box until the call's task waits
        /// for it (`awaitAnswer`), which then takes the entry's place with its continuation.
        case parked(ParkedAnswer)
    }

    /// Where a parked call's answer waits for its task (`Pending.parked`); used under `state`'s lock.
    package final class ParkedAnswer: @unchecked Sendable {
        var answer: Result<[UInt8], RainError>?
    }

    /// What the reader thread keeps between reads. It is touched only on that thread: by its loop,
    /// or by a call answered inline in a job the loop runs (`callInline`), which the loop waits for.
    /// No lock, and no exclusivity checks (they cost instructions on every read).
    final class ReaderState: @unchecked Sendable {
        @exclusivity(unchecked) var decoder: FrameDecoder
        @exclusivity(unchecked) var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        @exclusivity(unchecked) var scratch: [UInt8]
        /// The socket and, when there is one, the eventfd that wakes the thread for a job (made
        /// once: an array per round would cost two allocations per call).
        @exclusivity(unchecked) var fds: [pollfd]
        /// Why the connection ended, or will be said to have ended (a refusal the server sent).
        @exclusivity(unchecked) var failure: RainError
        /// The refusal the server sent (an answer to no call), once read.
        @exclusivity(unchecked) var refusal: RainError?
        /// Set when the connection ended: the loop then fails what is in flight and stops.
        @exclusivity(unchecked) var hasEnded = false
        /// The call being answered inline (0: none), and its answer once read: kept in plain fields,
        /// since an optional `Result` holding a `RainError` goes through the runtime's generic value
        /// witnesses (docs/performance.md).
        @exclusivity(unchecked) var inlineID: UInt64 = 0
        @exclusivity(unchecked) var inlineIsAnswered = false
        @exclusivity(unchecked) var inlinePayload: [UInt8] = []
        @exclusivity(unchecked) var inlineError: RainError?
        /// Whether `inlineError` holds the answer's error: a plain flag read and cleared per call,
        /// cheaper than testing and clearing the optional through its value witnesses (docs/performance.md).
        @exclusivity(unchecked) var inlineFailed = false
        /// The last inline call's request after its id (`ClientFrames.RequestTail`).
        @exclusivity(unchecked) var requestTail: ClientFrames.RequestTail?

        init(maximumFrameLength: Int, isTLS: Bool, fd: Int32, wakeFD: Int32?, failure: RainError) {
            decoder = FrameDecoder(maximumLength: maximumFrameLength)
            scratch = isTLS ? [UInt8](repeating: 0, count: 16 * 1024 + 256) : []
            fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
            if let wakeFD { fds.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)) }
            self.failure = failure
        }
    }

    /// A stream's continuation, boxed: the standard library's `AsyncThrowingStream.Continuation`
    /// has no layout known at compile time, and held in `Pending` it would send every use of `State`
    /// through the runtime's generic value witnesses (docs/performance.md).
    final class StreamSink: Sendable {
        let continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation
        init(_ continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation) { self.continuation = continuation }
    }

    struct State {
        var pending = PendingCalls()
        var closedError: RainError?
    }

    /// The calls and streams in flight, by request id. The usual case, one call at a time (a
    /// caller making calls in a row), stays out of the dictionary, whose hashing, inserting and
    /// deleting cost more (docs/performance.md).
    struct PendingCalls {
        /// A struct, not a tuple: an optional tuple holding an enum goes through the runtime's
        /// generic value witnesses (docs/performance.md).
        private struct Entry {
            var id: UInt64
            var call: Pending
        }

        private var solo: Entry?
        private var others: [UInt64: Pending] = [:]

        /// Adds the call or stream of `id` (ids are unique: never one already here).
        mutating func insert(_ call: Pending, for id: UInt64) {
            if solo == nil && others.isEmpty { solo = Entry(id: id, call: call) } else { others[id] = call }
        }

        /// Removes and returns the call or stream of `id`; nil when it is not in flight.
        mutating func remove(_ id: UInt64) -> Pending? {
            if let solo, solo.id == id {
                self.solo = nil
                return solo.call
            }
            return others.isEmpty ? nil : others.removeValue(forKey: id)
        }

        /// The call or stream of `id`, left in place.
        subscript(id: UInt64) -> Pending? {
            if let solo, solo.id == id { return solo.call }
            return others.isEmpty ? nil : others[id]
        }

        /// Removes and returns all of them.
        mutating func removeAll() -> [Pending] {
            var all = Array(others.values)
            if let solo { all.append(solo.call) }
            solo = nil
            others.removeAll()
            return all
        }
    }

    /// Jobs of tasks that prefer this connection as their executor, run by the reader thread.
    struct JobQueue {
        var jobs: [UnownedJob] = []
        var isRunning = true
    }

    let fd: Int32
    /// Wakes the reader thread's poll when a job is enqueued from another thread (nil when no
    /// eventfd could be made: jobs then wait for the next read).
    let wakeFD: EventFD?
    let jobQueue = Mutex(JobQueue())
    /// The reader thread's state (`ReaderState`: that thread's alone).
    let reader: ReaderState
    /// The reader thread (`pthread_self()` there; 0 before it starts and after it ends), for
    /// `callInline` and `enqueue`.
    let readerThread = Atomic<UInt>(0)
    let state = Mutex(State())
    /// The next request id: an atomic, not a field of `state`, so that a call takes that lock once.
    let nextID = Atomic<UInt64>(1)
    /// Set (under `state`'s lock) with `State.closedError`: `isClosed`, read before every call
    /// by `RainProvider`, then takes no lock.
    let isClosedFlag = Atomic<Bool>(false)
    /// Guards writes to the socket and, with TLS, every use of the session (reads included).
    let writeSide: Mutex<WriteSide>

    /// What writing takes.
    struct WriteSide {
        /// The TLS session; nil for a plain socket.
        var tls: (any ConnectionCipher)?
        /// Where a plain socket's requests are written before they are sent (an array per call
        /// would cost an allocation, a free and a metadata lookup: docs/performance.md). A request
        /// that does not fit gets an array of its own.
        var requestBuffer: [UInt8]
    }

    /// How a call's request goes out.
    enum OutgoingRequest {
        /// Written into `WriteSide.requestBuffer` (a plain socket, a frame that fits).
        case buffered(ClientFrames.RequestLayout)
        /// Made into an array of its own.
        case frame([UInt8])
    }

    /// The size of `WriteSide.requestBuffer`: a cheap call's request is well under it.
    static let requestBufferSize = 1024
    let isTLS: Bool
    /// Socket path (or `HOST:PORT` for TCP), for messages.
    public let path: String
    /// The TLS channel binding of the connection (RFC 9266, from the cipher's session); nil
    /// without TLS.
    public let channelBinding: [UInt8]?
    /// Who is at the other end, for messages.
    let peerName: String
    /// The code of a lost connection: RAIN_101 for the daemon, RAIN_301 for a TCP server.
    let lostCode: RainError.Code

    /// Connects to the daemon at `path` and checks it is the one meant: its socket directory and
    /// its uid (`SO_PEERCRED`) must be `daemonUID` (`UnixSocket.connect(path:daemonUID:)`).
    /// - Parameter daemonUID: the uid the daemon must run as; nil for the caller's own.
    /// - Throws: RAIN_101 when no daemon answers there, or when another uid's daemon or directory
    ///   is found (the message names that uid and `--daemon-uid`).
    /// - Parameter batchScheduledReader: give the reader thread the batch scheduling policy
    ///   (`SCHED_BATCH`, see `RainWalletConfig.readerScheduling`).
    public convenience init(
        path: String, daemonUID: UInt32? = nil, maximumFrameLength: Int = Frame.defaultMaximumLength,
        batchScheduledReader: Bool = false
    ) throws(RainError) {
        let fd = try UnixSocket.connect(path: path, daemonUID: daemonUID ?? geteuid())
        self.init(
            fd: fd, path: path, peerName: "rainwalletd", lostCode: .notInitialized, maximumFrameLength: maximumFrameLength,
            batchScheduledReader: batchScheduledReader)
    }

    /// Wraps a connected socket `fd` (owned from now on) and starts its reader thread.
    /// - Parameters:
    ///   - path: the socket path or `HOST:PORT`, for messages.
    ///   - peerName: who is at the other end, for messages.
    ///   - lostCode: the code of a lost connection (RAIN_101 for the daemon, RAIN_301 for a server).
    ///   - tls: the session of a completed TLS handshake, nil for a plain socket.
    ///   - channelBinding: the TLS channel binding, with `tls`.
    ///   - inlineWaitMilliseconds: how long a call answered inline waits (`callInline`; tests).
    ///   - batchScheduledReader: give the reader thread the batch scheduling policy (`SCHED_BATCH`):
    ///     woken by a reply, it does not preempt the task running on its CPU (the daemon's loop
    ///     while it sends other replies) but runs when that task blocks or at the next tick.
    package init(
        fd: Int32, path: String, peerName: String, lostCode: RainError.Code, maximumFrameLength: Int,
        tls: sending (any ConnectionCipher)? = nil, channelBinding: [UInt8]? = nil,
        inlineWaitMilliseconds: Int32 = ClientConnection.inlineWaitMilliseconds, batchScheduledReader: Bool = false
    ) {
        self.canAnswerInline = tls == nil && (try? Syscall.setReceiveTimeout(fd, milliseconds: inlineWaitMilliseconds)) != nil
        self.channelBinding = channelBinding
        self.isTLS = tls != nil
        self.writeSide = Mutex(
            WriteSide(tls: tls, requestBuffer: tls == nil ? [UInt8](repeating: 0, count: Self.requestBufferSize) : []))
        self.fd = fd
        self.path = path
        self.peerName = peerName
        self.lostCode = lostCode
        let wakeFD = try? EventFD()
        self.wakeFD = wakeFD
        self.reader = ReaderState(
            maximumFrameLength: maximumFrameLength, isTLS: isTLS, fd: fd, wakeFD: wakeFD?.descriptor,
            failure: RainError(lostCode, "\(peerName) closed the connection at \(path)", underlying: ConnectionFailure()))
        Syscall.startThread { [self] in
            Syscall.setCurrentThreadName(Self.readerThreadName)
            // An optimisation only: where the policy cannot be set (a seccomp filter), the thread
            // keeps the normal one.
            if batchScheduledReader { try? Syscall.setCurrentThreadBatchScheduling(true) }
            self.readLoop()
        }
    }

    /// The name of every connection's reader thread, as `top -H` and `ps -L` show it.
    public static let readerThreadName = "rainwallet.read"

    deinit { Syscall.closeUnchecked(fd, because: .socket) }

    // MARK: closing

    /// True once the connection has failed or been closed.
    public var isClosed: Bool { isClosedFlag.load(ordering: .acquiring) }

    /// Closes the connection; calls in flight fail with RAIN_101.
    public func close() {
        Syscall.shutdown(fd)
    }

    /// Whether calls may be answered inline: a plain socket whose reads give up after the inline
    /// wait (`SO_RCVTIMEO`; the loop reads only what poll found, so its reads never wait).
    let canAnswerInline: Bool
}

extension RainError {
    /// True when a `ClientConnection` raised this error itself for a connection that was open (it
    /// was lost, closed, or the server sent garbage), false for errors the server sent. Failures to
    /// connect are thrown by the initializers instead.
    public var isConnectionFailure: Bool { underlying is ClientConnection.ConnectionFailure }
}
