import Foundation
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
        /// once: an array per round cost two allocations per call).
        @exclusivity(unchecked) var fds: [pollfd]
        /// Why the connection ended, or will be said to have ended (a refusal the server sent).
        @exclusivity(unchecked) var failure: RainError
        /// Set when the connection ended: the loop then fails what is in flight and stops.
        @exclusivity(unchecked) var hasEnded = false
        /// The call being answered inline (0: none), and its answer once read: kept in plain fields,
        /// since an optional `Result` holding a `RainError` went through the runtime's generic value
        /// witnesses (about 2,500 instructions a call).
        @exclusivity(unchecked) var inlineID: UInt64 = 0
        @exclusivity(unchecked) var inlineIsAnswered = false
        @exclusivity(unchecked) var inlinePayload: [UInt8] = []
        @exclusivity(unchecked) var inlineError: RainError?
        /// Whether `inlineError` holds the answer's error: a plain flag read and cleared per call,
        /// where testing and clearing the optional cost ~100 instructions in its value witnesses.
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
    /// has no layout known at compile time, and held in `Pending` it sent every use of `State`
    /// through the runtime's generic value witnesses (about 800 instructions a call).
    final class StreamSink: Sendable {
        let continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation
        init(_ continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation) { self.continuation = continuation }
    }

    struct State {
        var pending = PendingCalls()
        var closedError: RainError?
    }

    /// The calls and streams in flight, by request id. The usual case, one call at a time (a
    /// caller making calls in a row), stays out of the dictionary: hashing the id, inserting and
    /// deleting cost about 900 instructions a call.
    struct PendingCalls {
        /// A struct, not a tuple: an optional tuple holding an enum went through the runtime's
        /// generic value witnesses (about 600 instructions an insert).
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

    private let fd: Int32
    /// Wakes the reader thread's poll when a job is enqueued from another thread (nil when no
    /// eventfd could be made: jobs then wait for the next read).
    private let wakeFD: EventFD?
    private let jobQueue = Mutex(JobQueue())
    /// The reader thread's state (`ReaderState`: that thread's alone).
    private let reader: ReaderState
    /// The reader thread (`pthread_self()` there; 0 before it starts and after it ends), for
    /// `callInline` and `enqueue`.
    private let readerThread = Atomic<UInt>(0)
    private let state = Mutex(State())
    /// The next request id: an atomic, not a field of `state`, so that a call takes that lock once.
    private let nextID = Atomic<UInt64>(1)
    /// Set (under `state`'s lock) with `State.closedError`: `isClosed`, read before every call
    /// by `RainProvider`, then takes no lock.
    private let isClosedFlag = Atomic<Bool>(false)
    /// Guards writes to the socket and, with TLS, every use of the session (reads included).
    private let writeSide: Mutex<WriteSide>

    /// What writing takes.
    struct WriteSide {
        /// The TLS session; nil for a plain socket.
        var tls: (any ConnectionCipher)?
        /// Where a plain socket's requests are written before they are sent (an array per call
        /// cost an allocation, a free and a metadata lookup: about 700 instructions). A request
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
    private let isTLS: Bool
    /// Socket path (or `HOST:PORT` for TCP), for messages.
    public let path: String
    /// The TLS channel binding of the connection (RFC 9266, from the cipher's session); nil
    /// without TLS.
    public let channelBinding: [UInt8]?
    /// Who is at the other end, for messages.
    private let peerName: String
    /// The code of a lost connection: RAIN_101 for the daemon, RAIN_301 for a TCP server.
    private let lostCode: RainError.Code

    /// Connects to the daemon at `path` and checks it is the one meant: its socket directory and
    /// its uid (`SO_PEERCRED`) must be `daemonUID` (issue 13, `UnixSocket.connect(path:daemonUID:)`).
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
        let thread = Thread { [self] in
            Syscall.setCurrentThreadName(Self.readerThreadName)
            // An optimisation only: where the policy cannot be set (a seccomp filter), the thread
            // keeps the normal one.
            if batchScheduledReader { try? Syscall.setCurrentThreadBatchScheduling(true) }
            self.readLoop()
        }
        thread.name = ClientConnection.readerThreadName  // Foundation's own name (Thread.current.name)
        thread.start()
    }

    /// The name of every connection's reader thread, as `top -H` and `ps -L` show it.
    public static let readerThreadName = "rainwallet.read"

    deinit { Syscall.closeUnchecked(fd, because: .socket) }

    // MARK: TaskExecutor

    /// Runs a job of a task that prefers this connection (`withTaskExecutorPreference`) on the
    /// connection's reader thread. A reply then resumes its task on the thread that read it, with
    /// no hand-off to another thread: the fastest way to make many small calls in a row. After the
    /// connection ends, jobs go to the global concurrent executor.
    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let (accepted, mustWake) = jobQueue.withLock { q -> (Bool, Bool) in
            guard q.isRunning else { return (false, false) }
            q.jobs.append(unowned)
            return (true, readerThread.load(ordering: .relaxed) != pthread_self())
        }
        if !accepted {
            globalConcurrentExecutor.enqueue(ExecutorJob(unowned))
            return
        }
        if mustWake { wakeFD?.signal() }
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor { UnownedTaskExecutor(ordinary: self) }

    /// True once the connection has failed or been closed.
    public var isClosed: Bool { isClosedFlag.load(ordering: .acquiring) }

    /// Closes the connection; calls in flight fail with RAIN_101.
    public func close() {
        Syscall.shutdown(fd)
    }

    /// Makes one unary call and returns the response payload.
    /// - Throws: the server's `RainError`, or RAIN_101 when the connection is lost.
    public func call(
        method: String, payload: [UInt8], metadata: [MetadataEntry] = [], timeoutMilliseconds: UInt32 = 0
    ) async throws(RainError) -> [UInt8] {
        try await call(
            method: method, payload: payload, metadata: EncodedMetadata(metadata), timeoutMilliseconds: timeoutMilliseconds)
    }

    /// `call(method:payload:metadata:timeoutMilliseconds:)` with metadata encoded once by the
    /// caller (`RainProvider`'s never changes). It runs on the caller's executor
    /// (`nonisolated(nonsending)`): a hop to the generic executor at each of the call path's async
    /// functions cost a task switch, each looking up the task's preferred executor under its status
    /// lock (about 2,000 instructions a call in all).
    nonisolated(nonsending) package func call(
        method: String, payload: [UInt8], metadata: EncodedMetadata, timeoutMilliseconds: UInt32 = 0
    ) async throws(RainError) -> [UInt8] {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        // Written into the request buffer when it fits (checked here, so that a NUL is refused
        // before the call starts); otherwise into an array of its own (which throws for a NUL).
        let layout = ClientFrames.requestLayout(
            id: id, method: method, payloadCount: payload.count, timeoutMilliseconds: timeoutMilliseconds, metadata: metadata)
        let outgoing: OutgoingRequest
        if !isTLS, let layout, layout.length <= Self.requestBufferSize {
            outgoing = .buffered(layout)
        } else {
            outgoing = .frame(
                try ClientFrames.request(
                    id: id, method: method, payload: payload, timeoutMilliseconds: timeoutMilliseconds, metadata: metadata))
        }
        let result: Result<[UInt8], RainError> = await withTaskCancellationHandler {
            // An unsafe continuation (no checking object to allocate): it is resumed exactly once.
            // Either here, when the connection is already closed (it is then never stored), or by
            // whoever removes it from `pending` under `state`'s lock, which only one can: a failed
            // write below, `dispatch` (its answer), or the reader's end (which sets `closedError`
            // under the same lock as it empties `pending`, so nothing is stored after it).
            await withUnsafeContinuation { (cont: UnsafeContinuation<Result<[UInt8], RainError>, Never>) in
                let closed = state.withLock { s -> RainError? in
                    if let e = s.closedError { return e }
                    s.pending.insert(.unary(cont), for: id)
                    return nil
                }
                if let closed {
                    cont.resume(returning: .failure(closed))
                    return
                }
                let error =
                    switch outgoing {
                    case .buffered(let layout):
                        writeRequest(
                            layout, id: id, method: method, payload: payload, timeoutMilliseconds: timeoutMilliseconds,
                            metadata: metadata)
                    case .frame(let frame): write(frame)
                    }
                if let error {
                    if case .unary(let c)? = state.withLock({ $0.pending.remove(id) }) {
                        c.resume(returning: .failure(error))
                    }
                }
            }
        } onCancel: {
            self.sendCancel(id)
        }
        return try result.get()
    }

    /// How `callInline` left a call.
    package enum InlineCall {
        /// The answer came while the caller waited on the reader thread.
        case answered([UInt8])
        /// It did not come in time: the request is out, and `awaitAnswer(id:box:)` waits for it.
        case waiting(id: UInt64, box: ParkedAnswer)
    }

    /// How long an inline call's read waits for data (`SO_RCVTIMEO`) before the call hands the wait
    /// to its task (`callInline`): a cheap call's answer comes within microseconds, and the
    /// thread's other jobs, or the task's cancellation, should not wait long.
    package static let inlineWaitMilliseconds: Int32 = 10
    /// Whether calls may be answered inline: a plain socket whose reads give up after the inline
    /// wait (`SO_RCVTIMEO`; the loop reads only what poll found, so its reads never wait).
    private let canAnswerInline: Bool
    /// How many reads an inline call makes (other calls' frames coming first) before it hands the
    /// wait to its task.
    static let inlineReadLimit = 8

    /// Makes a unary call without suspending when the caller already runs on this connection's
    /// reader thread (a task that prefers the connection as its executor, `enqueue`). It writes the
    /// request, then does the reader's work itself until the answer comes, handing other calls'
    /// frames to them as the loop would. A suspension and resumption per call cost about 3,000
    /// instructions in the concurrency runtime (the task's executor preference is looked up under
    /// its status lock at every step of the way back).
    ///
    /// When the answer does not come within `inlineWaitMilliseconds`, or after a read that brought
    /// another call's answer a job is queued for the thread, or the connection ends, the wait is
    /// handed on: `.waiting`, and the caller awaits `awaitAnswer(id:box:)`. The loop never waits
    /// on a call it is running.
    /// - Returns: nil when the call must go through `call` instead: the caller runs on another
    ///   thread, TLS (or a socket without a receive timeout), a request too large for the request
    ///   buffer (or with a NUL), a cancelled task, an inline call already in progress, or a
    ///   connection that ended.
    /// - Throws: the server's `RainError`, or RAIN_101 when the connection is lost while writing.
    package func callInline(
        method: String, payload: [UInt8], metadata: EncodedMetadata, timeoutMilliseconds: UInt32 = 0
    ) throws(RainError) -> InlineCall? {
        guard canAnswerInline, readerThread.load(ordering: .relaxed) == pthread_self() else { return nil }
        let r = reader
        guard !r.hasEnded, r.inlineID == 0, !Task.isCancelled else { return nil }
        // The request's bytes after its id: the last call's when it is the same request.
        let tail: ClientFrames.RequestTail
        if let known = r.requestTail,
            known.matches(method: method, payload: payload, timeoutMilliseconds: timeoutMilliseconds, metadata: metadata)
        {
            tail = known
        } else {
            guard
                let made = ClientFrames.RequestTail(
                    method: method, payload: payload, timeoutMilliseconds: timeoutMilliseconds, metadata: metadata),
                made.maximumFrameLength <= Self.requestBufferSize
            else { return nil }
            r.requestTail = made
            tail = made
        }
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        r.inlineID = id
        defer {
            r.inlineID = 0
            r.inlineIsAnswered = false
            if r.inlineFailed {
                r.inlineFailed = false
                r.inlineError = nil
            }
        }
        if let error = writeRequest(tail, id: id) { throw error }
        // The answer is waited for in the read itself: a blocking read that gives up after the
        // inline wait (`SO_RCVTIMEO`, set at the start), one system call where a poll and a read
        // were two. A job another thread queues meanwhile waits for the answer or the wait's end.
        var reads = 0
        reading: while !r.inlineIsAnswered && reads < Self.inlineReadLimit {
            reads += 1
            switch readOnce(r) {
            case .timedOut, .ended: break reading
            case .read:
                // An answer read for another task of this thread, or a job queued from another
                // thread: let the loop run it.
                if !r.inlineIsAnswered && jobQueue.withLock({ !$0.jobs.isEmpty }) { break reading }
            }
        }
        if r.inlineIsAnswered {
            if r.inlineFailed, let error = r.inlineError { throw error }
            return .answered(r.inlinePayload)
        }
        let box = ParkedAnswer()
        state.withLock { s in
            if let e = s.closedError { box.answer = .failure(e) } else { s.pending.insert(.parked(box), for: id) }
        }
        return .waiting(id: id, box: box)
    }

    /// Waits for the answer of a call `callInline` handed on (`InlineCall.waiting`); a cancelled
    /// task sends the call's cancel, as in `call`.
    /// - Throws: the server's `RainError`, or RAIN_101 when the connection is lost.
    nonisolated(nonsending) package func awaitAnswer(id: UInt64, box: ParkedAnswer) async throws(RainError) -> [UInt8] {
        let result: Result<[UInt8], RainError> = await withTaskCancellationHandler {
            // Resumed exactly once: here when the answer (or the connection's end) is already in the
            // box, otherwise by whoever removes the `.unary` entry that takes the parked one's place
            // (under `state`'s lock, as in `call`; the connection's end fills the boxes it finds
            // under the same lock).
            await withUnsafeContinuation { (cont: UnsafeContinuation<Result<[UInt8], RainError>, Never>) in
                let ready = state.withLock { s -> Result<[UInt8], RainError>? in
                    if let answer = box.answer { return answer }
                    _ = s.pending.remove(id)
                    s.pending.insert(.unary(cont), for: id)
                    return nil
                }
                if let ready { cont.resume(returning: ready) }
            }
        } onCancel: {
            self.sendCancel(id)
        }
        return try result.get()
    }

    /// Opens a server stream. Messages arrive in order; the sequence ends when the server ends the
    /// call, and throws its `RainError` if it failed. Cancel with `cancelStream(_:)`.
    public func openStream(
        method: String, payload: [UInt8], metadata: [MetadataEntry] = []
    ) throws(RainError) -> (id: UInt64, messages: AsyncThrowingStream<[UInt8], any Error>) {
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream(bufferingPolicy: .unbounded)
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        try state.withLock { s throws(RainError) in
            if let e = s.closedError { throw e }
            s.pending.insert(.stream(StreamSink(continuation)), for: id)
        }
        let frame = try Envelope(
            requestID: id, kind: .request(WireRequest(method: method, payload: payload, metadata: metadata))
        ).encodeFrame()
        if let error = write(frame) {
            _ = state.withLock { $0.pending.remove(id) }
            continuation.finish(throwing: error)
            throw error
        }
        continuation.onTermination = { [weak self] reason in
            if case .cancelled = reason { self?.sendCancel(id) }
        }
        return (id, stream)
    }

    /// Asks the server to end a stream or call.
    public func cancelStream(_ id: UInt64) { sendCancel(id) }

    private func sendCancel(_ id: UInt64) {
        let frame = ClientFrames.cancel(id: id)
        // A cancel that cannot be sent needs no report: the connection is lost, and the reader
        // thread then fails every call still in flight, this one included.
        _ = write(frame)
    }

    /// Writes a whole frame (encrypted with TLS); returns the error instead of throwing so callers
    /// can clean up.
    private func write(_ frame: [UInt8]) -> RainError? {
        writeSide.withLock { side -> RainError? in
            guard let tls = side.tls else { return sendAll(frame) }
            do throws(RainError) {
                try tls.write(frame)
            } catch {
                return RainError(
                    lostCode, "lost the TLS connection to \(peerName) at \(path): \(error.message)",
                    underlying: ConnectionFailure())
            }
            return sendAll(tls.takeOutput())
        }
    }

    /// Writes a request's frame into the request buffer and sends it (a plain socket, and a
    /// frame whose `layout` was found to fit); returns the error as `write`.
    private func writeRequest(
        _ layout: ClientFrames.RequestLayout, id: UInt64, method: String, payload: [UInt8], timeoutMilliseconds: UInt32,
        metadata: EncodedMetadata
    ) -> RainError? {
        let sent = writeSide.withLock { side -> RainError?? in
            let length = side.requestBuffer.withUnsafeMutableBufferPointer { buffer in
                ClientFrames.writeRequest(
                    layout, id: id, method: method, payload: payload, timeoutMilliseconds: timeoutMilliseconds, into: buffer)
            }
            guard let length else { return .none }
            return .some(side.requestBuffer.withUnsafeBytes { sendAll(UnsafeRawBufferPointer(rebasing: $0[0..<length])) })
        }
        if let sent { return sent }
        // Only a size computed wrong gets here (ClientFramesTests fail then): an array of its own.
        do throws(RainError) {
            return write(
                try ClientFrames.request(
                    id: id, method: method, payload: payload, timeoutMilliseconds: timeoutMilliseconds, metadata: metadata))
        } catch {
            return error
        }
    }

    /// Writes the request with `id` whose bytes after the id are `tail` (an inline call: no TLS,
    /// and the tail fits the request buffer).
    private func writeRequest(_ tail: ClientFrames.RequestTail, id: UInt64) -> RainError? {
        writeSide.withLock { side -> RainError? in
            guard let length = side.requestBuffer.withUnsafeMutableBufferPointer({ tail.write(id: id, into: $0) }) else {
                // Only a size computed wrong gets here (ClientFramesTests fail then).
                return RainError(.internalError, "a request did not fit its buffer; report this as a bug")
            }
            return side.requestBuffer.withUnsafeBytes { sendAll(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        }
    }

    /// Sends all of `bytes` on the blocking socket (call with `writeSide` held).
    private func sendAll(_ bytes: [UInt8]) -> RainError? {
        bytes.withUnsafeBytes { sendAll($0) }
    }

    /// Sends all of `bytes` on the blocking socket (call with `writeSide` held).
    private func sendAll(_ bytes: UnsafeRawBufferPointer) -> RainError? {
        let error: RainError
        do throws(RainError) {
            try Syscall.sendAll(fd, bytes)
            return nil
        } catch let e {
            error = e
        }
        return RainError(
            lostCode, "lost the connection to \(peerName) at \(path): \(ErrnoError(code: error.errno ?? 0))",
            underlying: ConnectionFailure())
    }

    /// Decrypts what TLS records `ciphertext` completes. Returns the plaintext, whether the server
    /// sent close_notify, and an error when the stream broke.
    private func decrypt(_ ciphertext: ArraySlice<UInt8>, into scratch: inout [UInt8]) -> (
        plaintext: [UInt8], isClosed: Bool, error: RainError?
    ) {
        writeSide.withLock { side -> ([UInt8], Bool, RainError?) in
            guard let tls = side.tls else { return (Array(ciphertext), false, nil) }
            ciphertext.withUnsafeBytes { tls.receive($0) }
            var plaintext: [UInt8] = []
            var isClosed = false
            var failure: RainError?
            reading: while true {
                let result: Result<ConnectionCipherRead, RainError> = scratch.withUnsafeMutableBytes { buf in
                    Result { () throws(RainError) in try tls.readPlaintext(into: buf) }
                }
                switch result {
                case .success(.bytes(let n)): plaintext.append(contentsOf: scratch[0..<n])
                case .success(.needsMoreInput): break reading
                case .success(.closed):
                    isClosed = true
                    break reading
                case .failure(let error):
                    failure = RainError(
                        lostCode, "the TLS connection to \(peerName) at \(path) broke: \(error.message)",
                        details: error.details, underlying: ConnectionFailure())
                    break reading
                }
            }
            // Alerts or post-handshake replies the session produced while reading.
            if tls.pendingOutputCount > 0, failure == nil { failure = sendAll(tls.takeOutput()) }
            return (plaintext, isClosed, failure)
        }
    }

    private func readLoop() {
        readerThread.store(pthread_self(), ordering: .releasing)
        let r = reader
        // The jobs being run (see runQueuedJobs).
        var running: [UnownedJob] = []
        while true {
            runQueuedJobs(&running)
            // A call answered inline in one of those jobs may have met the end.
            if r.hasEnded { break }
            for i in r.fds.indices { r.fds[i].revents = 0 }
            guard (try? Syscall.poll(&r.fds, timeoutMilliseconds: -1)) != nil else { break }
            if r.fds.count > 1 && r.fds[1].revents != 0 { wakeFD?.drain() }
            if r.fds[0].revents == 0 { continue }
            if readOnce(r) == .ended { break }
        }
        let failure = r.failure
        let pending = state.withLock { s -> [Pending] in
            s.closedError = failure
            isClosedFlag.store(true, ordering: .releasing)
            let all = s.pending.removeAll()
            // A parked call's task finds the end in its box (`awaitAnswer`).
            for case .parked(let box) in all where box.answer == nil { box.answer = .failure(failure) }
            return all
        }
        for p in pending {
            switch p {
            case .unary(let c): c.resume(returning: .failure(failure))
            case .stream(let c): c.continuation.finish(throwing: failure)
            case .parked: break
            }
        }
        // Let the tasks just resumed run, then hand any later job to the global executor.
        runQueuedJobs(&running)
        let leftover = jobQueue.withLock { q -> [UnownedJob] in
            q.isRunning = false
            defer { q.jobs.removeAll() }
            return q.jobs
        }
        for job in leftover { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
        // The thread ends: a later thread may be given its id, and must not take itself for it.
        readerThread.store(0, ordering: .releasing)
    }

    /// What `readOnce` found.
    private enum ReadOutcome {
        /// Bytes, whose whole frames went to their calls.
        case read
        /// Nothing within the receive timeout (a call answered inline).
        case timedOut
        /// The end of the connection: `ReaderState.hasEnded` is set, and `failure` says why.
        case ended
    }

    /// Reads once from the socket and hands every whole frame to its call, on the reader thread
    /// (its loop, after a poll found the socket readable, or a call answered inline, waiting up to
    /// the receive timeout).
    private func readOnce(_ r: ReaderState) -> ReadOutcome {
        // No `Result` on the per-call path: one holding a RainError is copied with a memcpy.
        // EAGAIN is the receive timeout (`canAnswerInline`): nothing came.
        let read = r.buffer.withUnsafeMutableBytes { buf in (try? Syscall.readNonBlocking(fd, into: buf)) ?? .processed(0) }
        guard case .processed(let n) = read else { return .timedOut }
        guard n > 0 else {
            r.hasEnded = true
            return .ended
        }
        var plaintext: [UInt8] = []
        var isClosed = false
        if isTLS {
            let (decrypted, closed, error) = decrypt(r.buffer[0..<n], into: &r.scratch)
            if let error {
                r.failure = error
                r.hasEnded = true
                return .ended
            }
            plaintext = decrypted
            isClosed = closed
        }
        // Frames lent from raw memory, in place when whole (the generic append of a slice cost
        // ~1,000 instructions a read, and a copy into the decoder's buffer a memcpy).
        var refusal: RainError?
        var undecodable: RainError?
        if isTLS {
            plaintext.withUnsafeBytes { raw in
                do throws(RainError) {
                    try r.decoder.forEachFrame(in: raw) { body throws(RainError) in
                        if let e = try dispatch(body) { refusal = e }
                    }
                } catch {
                    undecodable = error
                }
            }
        } else {
            r.buffer.withUnsafeBytes { raw in
                do throws(RainError) {
                    try r.decoder.forEachFrame(in: UnsafeRawBufferPointer(rebasing: raw[0..<n])) { body throws(RainError) in
                        if let e = try dispatch(body) { refusal = e }
                    }
                } catch {
                    undecodable = error
                }
            }
        }
        if let refusal {
            // An answer to no call (request id 0): the server says why it is about to close
            // the connection (a limit of issue 13). Calls it ends fail with it.
            r.failure = RainError(
                lostCode, "\(peerName) closed the connection at \(path): \(refusal.code): \(refusal.message)",
                details: refusal.details, underlying: ConnectionFailure())
        }
        if let undecodable {
            r.failure = RainError(
                .internalError, "\(peerName) sent an undecodable frame: \(undecodable.message)",
                underlying: ConnectionFailure())
            r.hasEnded = true
            return .ended
        }
        if isClosed {
            r.hasEnded = true
            return .ended
        }
        return .read
    }

    /// Runs the queued jobs until none is left. `running` is the reader thread's own array, swapped
    /// with the queue's: taking a copy and emptying the queue's array (then shared) cost an
    /// allocation per wake-up.
    private func runQueuedJobs(_ running: inout [UnownedJob]) {
        while true {
            jobQueue.withLock { q in swap(&q.jobs, &running) }
            if running.isEmpty { return }
            for job in running { job.runSynchronously(on: asUnownedTaskExecutor()) }
            running.removeAll(keepingCapacity: true)
        }
    }

    /// Hands the answer in frame `body` to its call. Returns the error of an answer to no call
    /// (request id 0: the server refusing the connection or a frame), for the connection's end to
    /// report.
    /// - Throws: RAIN_102 for an undecodable frame.
    private func dispatch(_ body: UnsafeBufferPointer<UInt8>) throws(RainError) -> RainError? {
        // The usual answer (a call's success) read without an `Envelope`; anything else by it.
        guard let (id, payload) = ClientFrames.okResponseInPlace(body) else { return dispatch(try Envelope.decode(body)) }
        answer(id, payload: payload, error: nil)
        return nil
    }

    /// Hands an answer to its call, as `dispatch(_:)` for the envelope read from a frame.
    private func dispatch(_ envelope: Envelope) -> RainError? {
        switch envelope.kind {
        case .response(let r):
            if envelope.requestID == 0 { return r.status.error }
            r.payload.withUnsafeBufferPointer { answer(envelope.requestID, payload: $0, error: r.status.error) }
        case .stream(let payload):
            guard case .stream(let c)? = state.withLock({ $0.pending[envelope.requestID] }) else { return nil }
            c.continuation.yield(payload)
        case .request, .cancel:
            break
        }
        return nil
    }

    /// Ends the call or stream `id` (on the reader thread) with `payload`, or with `error` when
    /// there is one: the call answered inline, a parked call's box, a waiting task, or a stream
    /// (which ends, or fails with the error).
    private func answer(_ id: UInt64, payload: UnsafeBufferPointer<UInt8>, error: RainError?) {
        let r = reader
        if id != 0 && id == r.inlineID {
            r.inlineIsAnswered = true
            if let error {
                r.inlineError = error
                r.inlineFailed = true
            } else {
                // Into the storage kept from the last answer when nobody holds it any more: no
                // array to make and free per call.
                r.inlinePayload.removeAll(keepingCapacity: true)
                r.inlinePayload.append(contentsOf: payload)
            }
            return
        }
        let payload = Array(payload)
        let p = state.withLock { s -> Pending? in
            guard let p = s.pending.remove(id) else { return nil }
            if case .parked(let box) = p {
                box.answer = error.map { .failure($0) } ?? .success(payload)
                return nil
            }
            return p
        }
        switch p {
        case .unary(let c)?: c.resume(returning: error.map { .failure($0) } ?? .success(payload))
        case .stream(let c)?:
            if let error { c.continuation.finish(throwing: error) } else { c.continuation.finish() }
        case .parked?, nil: break
        }
    }
}

extension RainError {
    /// True when a `ClientConnection` raised this error itself for a connection that was open (it
    /// was lost, closed, or the server sent garbage), false for errors the server sent. Failures to
    /// connect are thrown by the initializers instead.
    public var isConnectionFailure: Bool { underlying is ClientConnection.ConnectionFailure }
}

/// The TLS session of a `ClientConnection` (`RainTransport` adapts RainCrypto's `TLSSession`): the
/// connection uses it only under its write lock.
package protocol ConnectionCipher: AnyObject {
    /// Encrypts `plaintext` into the pending output.
    func write(_ plaintext: [UInt8]) throws(RainError)
    /// The encrypted bytes waiting to be sent, removed from the session.
    func takeOutput() -> [UInt8]
    /// Bytes waiting in `takeOutput()`.
    var pendingOutputCount: Int { get }
    /// Feeds bytes read from the socket.
    func receive(_ bytes: UnsafeRawBufferPointer)
    /// Decrypts what the received records complete into `buffer`.
    func readPlaintext(into buffer: UnsafeMutableRawBufferPointer) throws(RainError) -> ConnectionCipherRead
}

/// What `ConnectionCipher.readPlaintext(into:)` produced.
package enum ConnectionCipherRead: Equatable, Sendable {
    /// This many plaintext bytes were written to the buffer.
    case bytes(Int)
    /// No complete record is buffered: receive more bytes first.
    case needsMoreInput
    /// The peer sent close_notify: no more plaintext will come.
    case closed
}
