import RainCore
import RainCrypto

// Deadlines of connections not admitted yet or holding a partial frame, checked by a periodic
// sweep rather than a timer per connection.
extension EventLoopServer {
    /// Puts `c` in the set of connections with a deadline, or takes it out.
    func updateDeadline(_ c: Connection) {
        let needs = c.needsDeadline
        guard needs != c.isTimed else { return }
        c.isTimed = needs
        if needs {
            timed.insert(c.id.rawValue)
            if nextSweep == nil { nextSweep = now + sweepInterval }
        } else {
            timed.remove(c.id.rawValue)
        }
    }

    /// When `c` must have made progress: admission (and the TLS handshake) counted from accept, a
    /// partial frame from its last byte. Nil when it has no deadline.
    func deadline(of c: Connection) -> LoopInstant? {
        var deadline: LoopInstant?
        if !c.isAdmitted {
            deadline = c.acceptedAt + options.admissionTimeout
            if let tls = c.tls, !tls.isHandshakeComplete {
                deadline = min(c.acceptedAt + options.admissionTimeout, c.acceptedAt + options.tlsHandshakeTimeout)
            }
        }
        if c.bufferedInput > 0 || c.hasPartialRecord {
            let stalled = c.lastInputAt + options.frameProgressTimeout
            deadline = deadline.map { min($0, stalled) } ?? stalled
        }
        return deadline
    }

    /// Closes the connections past their deadline; runs every `sweepInterval` while any has one.
    func sweepDeadlines() {
        var expired: [Connection] = []
        for id in timed {
            guard let c = connections[id], let deadline = deadline(of: c) else { continue }
            if deadline <= now { expired.append(c) }
        }
        for c in expired {
            let event: String
            if let tls = c.tls, !tls.isHandshakeComplete {
                event = "tls.handshake_timeout"
            } else if !c.isAdmitted {
                event = "connection.admission_timeout"
            } else {
                event = "connection.frame_stalled"
            }
            if let suppressed = logThrottle.admit(event, now: now) {
                logger.warning(event, ["connection": "\(c.id)", "suppressed": "\(suppressed)"])
            }
            if c.tls?.isHandshakeComplete ?? true {
                // Say why, if the peer reads; the connection closes either way.
                fail(
                    0,
                    RainError(
                        .refused,
                        c.isAdmitted
                            ? "a request stalled for \(options.frameProgressTimeout.milliseconds) ms; the connection is closed"
                            : "no complete request within \(options.admissionTimeout.milliseconds) ms; the connection is closed",
                        details: .init(reason: c.isAdmitted ? "frame_stalled" : "admission_timeout")),
                    on: c)
                if !c.isClosed { flush(c) }
            }
            closeConnection(c)
        }
        nextSweep = timed.isEmpty ? nil : now + sweepInterval
    }
}
