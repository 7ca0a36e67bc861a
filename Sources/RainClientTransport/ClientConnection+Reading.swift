import FoundationEssentials
import Glibc
import RainCore
import RainSystem
import RainWire
import Synchronization

// The reader thread: reading, decrypting and dispatching frames to their calls and streams, and
// running the jobs queued for the thread between reads.
extension ClientConnection {
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

    func readLoop() {
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
    enum ReadOutcome {
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
    func readOnce(_ r: ReaderState) -> ReadOutcome {
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
        // Frames lent from raw memory, in place when whole: cheaper than the generic append of a
        // slice and a copy into the decoder's buffer (docs/performance.md).
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
            // the connection (a limit it reached, or a uid it does not allow). Calls it ends fail
            // with it.
            r.refusal = refusal
            r.failure = refusedFailure(refusal)
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
    /// with the queue's: taking a copy and emptying the queue's array (then shared) would cost an
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
    func dispatch(_ body: UnsafeBufferPointer<UInt8>) throws(RainError) -> RainError? {
        // The usual answer (a call's success) read without an `Envelope`; anything else by it.
        guard let (id, payload) = ClientFrames.okResponseInPlace(body) else { return dispatch(try Envelope.decode(body)) }
        answer(id, payload: payload, error: nil)
        return nil
    }

    /// Hands an answer to its call, as `dispatch(_:)` for the envelope read from a frame.
    func dispatch(_ envelope: Envelope) -> RainError? {
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
    func answer(_ id: UInt64, payload: UnsafeBufferPointer<UInt8>, error: RainError?) {
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
