import RainCore
import RainSystem
import RainWire

// Reading a connection: bytes to frames, frames to the quick lane or the handler.
extension EventLoopServer {
    func readAvailable(_ c: Connection, _ buffer: UnsafeMutableRawBufferPointer) {
        while true {
            let n: Int
            do {
                if let expected = c.writer {
                    guard case .processed(let read) = try Syscall.readNonBlockingWithWriter(c.fd, into: buffer) else { break }
                    n = read.count
                    if n > 0 && read.writer != expected && !c.closeAfterFlush {
                        refuseSharedConnection(c, writer: read.writer)
                        return
                    }
                } else {
                    guard case .processed(let count) = try Syscall.readNonBlocking(c.fd, into: buffer) else { break }
                    n = count
                }
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

    /// Bytes written by another process than the one that connected (a child it forked, or one it
    /// passed the socket to): nothing more of the connection is read, its calls in flight are
    /// dropped, and one refusal with request id 0 says why before the close.
    func refuseSharedConnection(_ c: Connection, writer: Int32) {
        if let suppressed = logThrottle.admit("connection.shared", now: now) {
            logger.warning(
                "connection.shared",
                [
                    "pid": "\(c.peer.pid)", "writer": "\(writer)", "suppressed": "\(suppressed)",
                    "hint": "another process wrote on this connection; refused and closed",
                ])
        }
        for id in Array(c.calls.keys) {
            finishCall(id, on: c)
            handler.cancel(connection: c.id, requestID: id)
        }
        fail(
            0,
            RainError(
                .unauthorized,
                """
                pid \(writer) wrote on a connection opened by pid \(c.peer.pid): each process must open its own \
                connection to rainwalletd
                """, details: .init(reason: "connection_shared")),
            on: c)
        c.closeAfterFlush = true
    }

    /// The client finished sending: stop watching for input, answer the calls in flight, then close.
    func readClosed(_ c: Connection) {
        c.isReadClosed = true
        guard watch(c, for: c.wantsWrite ? .output : []) else { return }
        if c.calls.isEmpty { c.closeAfterFlush = true }
    }

    /// Feeds plaintext to the connection's frame decoder and processes the complete frames: in
    /// place while the decoder holds no partial frame (a whole request per read, the usual case),
    /// through the decoder otherwise.
    func consume(_ plaintext: UnsafeRawBufferPointer, on c: Connection) {
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
    func serveFrame(_ body: UnsafeBufferPointer<UInt8>, on c: Connection) {
        let offset = c.nextFrameOffset
        c.nextFrameOffset = offset &+ Frame.headerLength &+ body.count
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
        process(
            Result { () throws(RainError) in try Envelope.decode(body) }, on: c,
            wasQueuedBeforeIdentity: offset < c.inputQueuedAtAccept)
    }

    func process(_ decoded: Result<Envelope, RainError>, on c: Connection, wasQueuedBeforeIdentity: Bool = false) {
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
            // A valid request: from now on the connection is somebody.
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
                channelBinding: c.channelBinding, peerProcess: c.process,
                wasQueuedBeforeIdentity: wasQueuedBeforeIdentity)
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
}
