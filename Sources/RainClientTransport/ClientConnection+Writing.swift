import FoundationEssentials
import Glibc
import RainCore
import RainSystem
import RainWire
import Synchronization

// Writing frames under the write lock, through the TLS session when there is one.
extension ClientConnection {
    /// Writes a whole frame (encrypted with TLS); returns the error instead of throwing so callers
    /// can clean up.
    func write(_ frame: [UInt8]) -> RainError? {
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
    func writeRequest(
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
    func writeRequest(_ tail: ClientFrames.RequestTail, id: UInt64) -> RainError? {
        writeSide.withLock { side -> RainError? in
            guard let length = side.requestBuffer.withUnsafeMutableBufferPointer({ tail.write(id: id, into: $0) }) else {
                // Only a size computed wrong gets here (ClientFramesTests fail then).
                return RainError(.internalError, "a request did not fit its buffer; report this as a bug")
            }
            return side.requestBuffer.withUnsafeBytes { sendAll(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        }
    }

    /// Sends all of `bytes` on the blocking socket (call with `writeSide` held).
    func sendAll(_ bytes: [UInt8]) -> RainError? {
        bytes.withUnsafeBytes { sendAll($0) }
    }

    /// Sends all of `bytes` on the blocking socket (call with `writeSide` held).
    func sendAll(_ bytes: UnsafeRawBufferPointer) -> RainError? {
        let error: RainError
        do throws(RainError) {
            try Syscall.sendAll(fd, bytes)
            return nil
        } catch let e {
            error = e
        }
        // A server that refused the connection wrote why before it closed: that is the error to
        // report, not the broken pipe the refusal left. Still in the socket, or read already.
        if !isTLS, error.errno == EPIPE || error.errno == ECONNRESET {
            if let refusal = waitingRefusal() { return refusedFailure(refusal) }
            if let ended = endSeenByReader() { return ended }
        }
        return RainError(
            lostCode, "lost the connection to \(peerName) at \(path): \(ErrnoError(code: error.errno ?? 0))",
            underlying: ConnectionFailure())
    }

    /// Why the connection ended, as the reader saw it, once the peer has closed: on the reader
    /// thread, the refusal it read (if any); on another thread, the end the reader reports, waited
    /// for briefly (a closed peer is seen at its next read). Nil when the reader did not say.
    func endSeenByReader() -> RainError? {
        if readerThread.load(ordering: .acquiring) == pthread_self() {
            return reader.refusal.map { refusedFailure($0) }
        }
        for _ in 0..<1000 {
            if isClosedFlag.load(ordering: .acquiring) { return state.withLock { $0.closedError } }
            usleep(1000)
        }
        return nil
    }

    /// A refusal (an answer with request id 0) at the head of what the server sent, left in the
    /// socket's queue for the reader; nil when none is there.
    func waitingRefusal() -> RainError? {
        var head = [UInt8](repeating: 0, count: 1024)
        let peeked = head.withUnsafeMutableBytes { try? Syscall.peekNonBlocking(fd, into: $0) }
        guard case .processed(let n)? = peeked, n > 0 else { return nil }
        var decoder = FrameDecoder(maximumLength: head.count)
        guard (try? decoder.append(head[0..<n])) != nil, let body = try? decoder.nextFrame(),
            let envelope = try? Envelope.decode(body), envelope.requestID == 0,
            case .response(let response) = envelope.kind
        else { return nil }
        return response.status.error
    }

    /// The failure of a connection the server refused with `refusal`. A uid refused is refused on
    /// every connection: that is the error (RAIN_202), not a lost connection worth connecting
    /// again for.
    func refusedFailure(_ refusal: RainError) -> RainError {
        if refusal.code == .unauthorized {
            return RainError(
                refusal.code, "\(peerName) refused the connection at \(path): \(refusal.message)", details: refusal.details,
                underlying: ConnectionFailure())
        }
        return RainError(
            lostCode, "\(peerName) closed the connection at \(path): \(refusal.code): \(refusal.message)",
            details: refusal.details, underlying: ConnectionFailure())
    }
}
