import FoundationEssentials
import Glibc
import RainCore
import RainSystem
import RainWire
import Synchronization

// Calls answered inline: a call made on the reader thread does the reader's work itself until its
// answer comes (ARCHITECTURE.md, "Calls answered inline").
extension ClientConnection {
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

    /// How many reads an inline call makes (other calls' frames coming first) before it hands the
    /// wait to its task.
    static let inlineReadLimit = 8

    /// Makes a unary call without suspending when the caller already runs on this connection's
    /// reader thread (a task that prefers the connection as its executor, `enqueue`). It writes the
    /// request, then does the reader's work itself until the answer comes, handing other calls'
    /// frames to them as the loop would. A suspension and resumption per call are costly in the
    /// concurrency runtime: the task's executor preference is looked up under its status lock at
    /// every step of the way back (docs/performance.md).
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
}
