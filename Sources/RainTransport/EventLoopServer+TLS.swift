import RainCore
import RainCrypto

extension EventLoopServer {
    /// Advances the handshake and decrypts every complete record into `buffer`, consuming it.
    /// Returns false when reading must stop (the connection is ending or gone).
    func decryptAvailable(_ c: Connection, _ tls: TLSSession, _ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        if !tls.isHandshakeComplete {
            do {
                let isComplete = try tls.handshake()
                tls.appendOutput(to: &c.output)
                guard isComplete else { return true }
                c.handshakeInput = 0
                // Taken once: every request on the connection carries it (the authority binds
                // device proofs to it). An export that fails closes the connection: without it a
                // TLS connection would look like one that has no binding to prove against.
                c.channelBinding = try tls.channelBinding()
                logger.debug("tls.handshake_complete", ["connection": "\(c.id)"])
            } catch {
                // The alert (protocol version, …) goes out, then the connection closes.
                tls.appendOutput(to: &c.output)
                logger.warning(
                    "tls.handshake_failed",
                    ["connection": "\(c.id)", "reason": error.details.reason ?? "", "error": error.message])
                c.closeAfterFlush = true
                return false
            }
        }
        while !c.isClosed && !c.closeAfterFlush {
            let result: TLSSession.ReadResult
            do {
                result = try tls.readPlaintext(into: buffer)
            } catch {
                logger.warning("tls.record_failed", ["connection": "\(c.id)", "error": error.message])
                tls.appendOutput(to: &c.output)
                c.closeAfterFlush = true
                return false
            }
            switch result {
            case .bytes(let count):
                consume(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), on: c)
            case .needsMoreInput:
                // Replies the session owes without being asked to write (a TLS 1.3 KeyUpdate).
                tls.appendOutput(to: &c.output)
                return true
            case .closed:
                // close_notify: the client finished sending, as with end of file.
                readClosed(c)
                return false
            }
        }
        return false
    }
}
