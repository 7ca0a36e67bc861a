import FoundationEssentials
import Glibc
import RainCore
import RainSystem
import RainWire
import Synchronization

// Calls and streams through the reader thread: a continuation per call, answered by id.
extension ClientConnection {
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
    /// functions would cost a task switch, each looking up the task's preferred executor under its
    /// status lock (docs/performance.md).
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

    func sendCancel(_ id: UInt64) {
        let frame = ClientFrames.cancel(id: id)
        // A cancel that cannot be sent needs no report: the connection is lost, and the reader
        // thread then fails every call still in flight, this one included.
        _ = write(frame)
    }
}
