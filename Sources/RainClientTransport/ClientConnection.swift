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
        var loopThread: pthread_t?
    }

    private let fd: Int32
    /// Wakes the reader thread's poll when a job is enqueued from another thread (nil when no
    /// eventfd could be made: jobs then wait for the next read).
    private let wakeFD: EventFD?
    private let jobQueue = Mutex(JobQueue())
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
    private let maximumFrameLength: Int
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
    public convenience init(
        path: String, daemonUID: UInt32? = nil, maximumFrameLength: Int = Frame.defaultMaximumLength
    ) throws(RainError) {
        let fd = try UnixSocket.connect(path: path, daemonUID: daemonUID ?? geteuid())
        self.init(fd: fd, path: path, peerName: "rainwalletd", lostCode: .notInitialized, maximumFrameLength: maximumFrameLength)
    }

    /// Wraps a connected socket `fd` (owned from now on) and starts its reader thread.
    /// - Parameters:
    ///   - path: the socket path or `HOST:PORT`, for messages.
    ///   - peerName: who is at the other end, for messages.
    ///   - lostCode: the code of a lost connection (RAIN_101 for the daemon, RAIN_301 for a server).
    ///   - tls: the session of a completed TLS handshake, nil for a plain socket.
    ///   - channelBinding: the TLS channel binding, with `tls`.
    package init(
        fd: Int32, path: String, peerName: String, lostCode: RainError.Code, maximumFrameLength: Int,
        tls: sending (any ConnectionCipher)? = nil, channelBinding: [UInt8]? = nil
    ) {
        self.channelBinding = channelBinding
        self.isTLS = tls != nil
        self.writeSide = Mutex(
            WriteSide(tls: tls, requestBuffer: tls == nil ? [UInt8](repeating: 0, count: Self.requestBufferSize) : []))
        self.fd = fd
        self.path = path
        self.peerName = peerName
        self.lostCode = lostCode
        self.maximumFrameLength = maximumFrameLength
        self.wakeFD = try? EventFD()
        let thread = Thread { [self] in self.readLoop() }
        thread.name = "rainwallet.client.reader"
        thread.start()
    }

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
            let onLoop = q.loopThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            return (true, !onLoop)
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
        jobQueue.withLock { $0.loopThread = pthread_self() }
        var decoder = FrameDecoder(maximumLength: maximumFrameLength)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var scratch = isTLS ? [UInt8](repeating: 0, count: 16 * 1024 + 256) : []
        var failure = RainError(lostCode, "\(peerName) closed the connection at \(path)", underlying: ConnectionFailure())
        // The jobs being run (see runQueuedJobs).
        var running: [UnownedJob] = []
        // Made once: an array per round cost two allocations per call.
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        if let wakeFD { fds.append(pollfd(fd: wakeFD.descriptor, events: Int16(POLLIN), revents: 0)) }
        loop: while true {
            runQueuedJobs(&running)
            for i in fds.indices { fds[i].revents = 0 }
            guard (try? Syscall.poll(&fds, timeoutMilliseconds: -1)) != nil else { break }
            if fds.count > 1 && fds[1].revents != 0 { wakeFD?.drain() }
            if fds[0].revents == 0 { continue }
            // No `Result` on the per-call path: one holding a RainError is copied with a memcpy.
            let n = buffer.withUnsafeMutableBytes { buf in (try? Syscall.read(fd, into: buf)) ?? 0 }
            guard n > 0 else { break }
            var plaintext: [UInt8] = []
            var isClosed = false
            if isTLS {
                let (decrypted, closed, error) = decrypt(buffer[0..<n], into: &scratch)
                if let error {
                    failure = error
                    break
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
                        try decoder.forEachFrame(in: raw) { body throws(RainError) in
                            if let r = try dispatch(body) { refusal = r }
                        }
                    } catch {
                        undecodable = error
                    }
                }
            } else {
                buffer.withUnsafeBytes { raw in
                    do throws(RainError) {
                        try decoder.forEachFrame(in: UnsafeRawBufferPointer(rebasing: raw[0..<n])) { body throws(RainError) in
                            if let r = try dispatch(body) { refusal = r }
                        }
                    } catch {
                        undecodable = error
                    }
                }
            }
            if let refusal {
                // An answer to no call (request id 0): the server says why it is about to close
                // the connection (a limit of issue 13). Calls it ends fail with it.
                failure = RainError(
                    lostCode, "\(peerName) closed the connection at \(path): \(refusal.code): \(refusal.message)",
                    details: refusal.details, underlying: ConnectionFailure())
            }
            if let undecodable {
                failure = RainError(
                    .internalError, "\(peerName) sent an undecodable frame: \(undecodable.message)",
                    underlying: ConnectionFailure())
                break loop
            }
            if isClosed { break }
        }
        let pending = state.withLock { s -> [Pending] in
            s.closedError = failure
            isClosedFlag.store(true, ordering: .releasing)
            return s.pending.removeAll()
        }
        for p in pending {
            switch p {
            case .unary(let c): c.resume(returning: .failure(failure))
            case .stream(let c): c.continuation.finish(throwing: failure)
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
        guard let (id, payload) = ClientFrames.okResponse(body) else { return dispatch(try Envelope.decode(body)) }
        guard let p = state.withLock({ $0.pending.remove(id) }) else { return nil }
        switch p {
        case .unary(let c): c.resume(returning: .success(payload))
        case .stream(let c): c.continuation.finish()
        }
        return nil
    }

    /// Hands an answer to its call, as `dispatch(_:)` for the envelope read from a frame.
    private func dispatch(_ envelope: Envelope) -> RainError? {
        switch envelope.kind {
        case .response(let r):
            if envelope.requestID == 0 { return r.status.error }
            guard let p = state.withLock({ $0.pending.remove(envelope.requestID) }) else { return nil }
            switch p {
            case .unary(let c): c.resume(returning: r.status.error.map { .failure($0) } ?? .success(r.payload))
            case .stream(let c):
                if let e = r.status.error { c.continuation.finish(throwing: e) } else { c.continuation.finish() }
            }
        case .stream(let payload):
            guard case .stream(let c)? = state.withLock({ $0.pending[envelope.requestID] }) else { return nil }
            c.continuation.yield(payload)
        case .request, .cancel:
            break
        }
        return nil
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
