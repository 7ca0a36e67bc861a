import RainCore
import RainSystem
import RainWire

// Writing a connection: answers given on the loop, answers posted from other threads, flushing.
extension EventLoopServer {
    func finishCall(_ id: UInt64, on c: Connection) {
        if c.calls.removeValue(forKey: id) != nil {
            stats.withLock { $0.calls -= 1 }
        }
    }

    /// Answers request `id` on `c` with `error`.
    func fail(_ id: UInt64, _ error: RainError, on c: Connection) {
        enqueue(Envelope(requestID: id, kind: .response(.failure(error))), on: c)
    }

    func enqueue(_ envelope: Envelope, on c: Connection) {
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

    func append(_ frame: [UInt8], to c: Connection) {
        frame.withUnsafeBufferPointer { append($0, to: c) }
    }

    func append(_ frame: UnsafeBufferPointer<UInt8>, to c: Connection) {
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

    func drainOutbound() {
        // The eventfd first, then the queue (see `enqueue`): an answer queued in between is taken now.
        wakeFD.drain()
        handledWakes.add(1, ordering: .releasing)
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

    func flush(_ c: Connection) {
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
}
