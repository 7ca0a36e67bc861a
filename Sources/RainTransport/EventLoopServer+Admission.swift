import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainSystem
import RainWire

/// Who a connection counts against for `ServerOptions.maximumConnectionsPerPeer`.
enum PeerKey: Hashable {
    case uid(UInt32)
    case address([UInt8])
}

// Who may connect and how much a peer can make the server hold: the peer's uid, the connection
// limits, the reserve descriptor, the input budgets (`ServerOptions`).
extension EventLoopServer {
    func acceptAll() {
        while listening && acceptPausedUntil == nil {
            let fd: Int32
            do {
                guard case .processed(let accepted) = try Syscall.accept(listenFD) else { return }
                fd = accepted
            } catch {
                let e = error.errno ?? 0
                if e == EMFILE || e == ENFILE {
                    outOfDescriptors(errno: e)
                    return
                }
                logger.warning("accept.failed", ["errno": "\(e)"])
                return
            }
            admit(fd)
        }
    }

    /// Takes an accepted socket in, or closes it at once when its peer is not allowed or a
    /// connection limit is reached: before any byte of it is read.
    func admit(_ fd: Int32) {
        let peer: PeerCredentials
        let peerKey: PeerKey?
        if options.isTCP {
            guard let address = try? Syscall.peerAddress(fd) else {
                Syscall.closeUnchecked(fd, because: .socket)  // the peer is gone already
                return
            }
            TCPSocket.setNoDelay(fd)
            peer = .tcpPeer(address: TCPSocket.addressText(address))
            peerKey = .address(address)
        } else {
            guard let credentials = try? Syscall.peerCredentials(fd) else {
                // The peer is gone already (or never was): nothing to serve.
                Syscall.closeUnchecked(fd, because: .socket)
                return
            }
            peer = PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
            guard peer.uid == ownUID || options.allowedUIDs.contains(peer.uid) else {
                // One short frame says why, written before the close and before any byte of the
                // peer's is read, so that user's client can tell them (PROTOCOL.md §1).
                Self.sendRefusal(fd, Self.uidRefusal(uid: peer.uid))
                // Logged before the close, so the line is there by the time the peer sees the end.
                defer { Syscall.closeUnchecked(fd, because: .socket) }
                if let suppressed = logThrottle.admit("peer.refused", now: now) {
                    logger.warning(
                        "peer.refused",
                        [
                            "uid": "\(peer.uid)", "pid": "\(peer.pid)", "suppressed": "\(suppressed)",
                            "hint": "closed at accept: this uid is not allowed in the daemon's config",
                        ])
                }
                return
            }
            peerKey = peer.uid == ownUID ? nil : .uid(peer.uid)
        }
        if let peerKey, connectionsPerPeer[peerKey, default: 0] >= options.maximumConnectionsPerPeer {
            refuseAtAccept(fd, event: "connection.peer_limit", limit: options.maximumConnectionsPerPeer, peer: peerKey)
            return
        }
        // At a limit, the oldest connection not admitted yet makes room: whoever holds idle
        // connections cannot lock a real client out; only admitted connections are kept.
        if connections.count - admittedCount >= options.maximumUnadmittedConnections {
            _ = evictOldestUnadmitted()
        }
        if connections.count >= options.maximumConnections && !evictOldestUnadmitted() {
            refuseAtAccept(fd, event: "connection.limit", limit: options.maximumConnections, peer: peerKey)
            return
        }
        let id = nextConnection
        nextConnection += 1
        let c = Connection(
            id: ConnectionID(rawValue: id), fd: fd, peer: peer, peerKey: peerKey,
            maximumFrame: options.maximumFrameLength, now: now)
        if !options.isTCP {
            // The executable (read inside peerProcess), then what was written before it was
            // read: in that order, so no byte written before the read is missed.
            if checksWriters { c.writer = peer.pid }
            c.process = peerProcess(of: fd, peer: peer)
            c.inputQueuedAtAccept = (try? Syscall.queuedInput(fd)) ?? Int.max
        }
        if let tls = options.tls {
            do {
                c.tls = try tls.makeServerSession()
            } catch {
                logger.error("tls.session_failed", ["error": error.message])
                Syscall.closeUnchecked(fd, because: .failurePath)
                c.process?.close()
                return
            }
        }
        do {
            try epoll.add(fd, events: [.input, .readHangUp], token: c.epollToken)
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            c.process?.close()
            return
        }
        connections[id] = c
        let slot = Int(fd)
        if slot >= byDescriptor.count {
            byDescriptor.append(contentsOf: repeatElement(nil, count: slot + 1 - byDescriptor.count))
        }
        byDescriptor[slot] = c
        unadmittedOrder.append(id)
        if let peerKey { connectionsPerPeer[peerKey, default: 0] += 1 }
        connectionHighWater = max(connectionHighWater, connections.count)
        stats.withLock { $0.connections += 1 }
        updateDeadline(c)
    }

    /// The peer's pidfd, taken once per connection; nil (logged, throttled) when the peer is gone
    /// already. Not taken when it cannot be: the connection is still served, and whoever needs the
    /// caller's identity refuses a call without one.
    func peerProcess(of fd: Int32, peer: PeerCredentials) -> ProcessDescriptor? {
        do {
            return try ProcessDescriptor.peer(ofSocket: fd, pid: peer.pid, usesPeerPidfd: options.usesPeerPidfd)
        } catch {
            if let suppressed = logThrottle.admit("peer.pidfd_failed", now: now) {
                logger.warning(
                    "peer.pidfd_failed",
                    ["pid": "\(peer.pid)", "errno": "\(error.errno ?? 0)", "suppressed": "\(suppressed)"])
            }
            return nil
        }
    }

    /// Closes the oldest connection that is not admitted yet, to make room for a new one.
    /// - Returns: false when every connection is admitted.
    func evictOldestUnadmitted() -> Bool {
        while unadmittedHead < unadmittedOrder.count {
            let id = unadmittedOrder[unadmittedHead]
            unadmittedHead += 1
            guard let c = connections[id], !c.isAdmitted else { continue }
            if let suppressed = logThrottle.admit("connection.evicted", now: now) {
                logger.warning(
                    "connection.evicted",
                    [
                        "connection": "\(c.id)", "connections": "\(connections.count)",
                        "unadmitted": "\(connections.count - admittedCount)", "suppressed": "\(suppressed)",
                        "hint": "the oldest connection without a request made room for a new one",
                    ])
            }
            closeConnection(c)
            compactUnadmittedOrder()
            return true
        }
        compactUnadmittedOrder()
        return false
    }

    /// Drops the ids of `unadmittedOrder` that no longer stand for a connection waiting for
    /// admission, once they are the larger part of it (so it stays in proportion to the
    /// connections, whatever the churn).
    func compactUnadmittedOrder() {
        guard unadmittedOrder.count > 64 && unadmittedOrder.count > 2 * (connections.count - admittedCount) else { return }
        unadmittedOrder = unadmittedOrder[unadmittedHead...].filter { connections[$0].map { !$0.isAdmitted } ?? false }
        unadmittedHead = 0
    }

    /// Closes a connection a limit refuses; on a Unix socket it first gets one RAIN_302 frame
    /// (request id 0) saying which limit, written only if the socket takes it at once.
    func refuseAtAccept(_ fd: Int32, event: String, limit: Int, peer: PeerKey?) {
        if !options.isTCP {
            let who = if case .uid(let uid)? = peer { "uid \(uid)" } else { "this daemon" }
            let error = RainError(
                .refused,
                "too many connections (\(limit) for \(who)); close some, or retry later",
                details: .init(reason: "connection_limit", retryAfterMilliseconds: 1000))
            Self.sendRefusal(fd, error)
        }
        defer { Syscall.closeUnchecked(fd, because: .socket) }
        if let suppressed = logThrottle.admit(event, now: now) {
            var who = ""
            switch peer {
            case .uid(let uid)?: who = "uid \(uid)"
            case .address(let bytes)?: who = Self.describe(address: bytes)
            case nil: who = "own uid"
            }
            logger.warning(
                event,
                ["peer": who, "limit": "\(limit)", "connections": "\(connections.count)", "suppressed": "\(suppressed)"])
        }
    }

    /// The refusal of a peer uid the daemon's config does not allow.
    package static func uidRefusal(uid: UInt32) -> RainError {
        RainError(
            .unauthorized, "uid \(uid) may not use this daemon; ask its owner to allow it in the config",
            details: .init(reason: "uid_not_allowed"))
    }

    /// Writes one frame with request id 0 answering `error` to a socket just accepted, without
    /// waiting: its send buffer is empty, and a peer that is gone gets nothing.
    static func sendRefusal(_ fd: Int32, _ error: RainError) {
        guard let frame = try? Envelope(requestID: 0, kind: .response(.failure(error))).encodeFrame() else { return }
        _ = frame.withUnsafeBytes { try? Syscall.sendNonBlocking(fd, $0) }
    }

    /// An IP address for a log line, written as the connection's own log lines write its peer
    /// (`TCPSocket.addressText`).
    static func describe(address bytes: [UInt8]) -> String {
        TCPSocket.addressText(bytes) ?? "\(bytes.count)-byte address"
    }

    /// `accept` failed for want of descriptors. The listener stays readable while connections
    /// wait, so calling `accept` again at once would spin: give up the reserve descriptor to
    /// accept and close what waits (those clients get an answer instead of hanging), take the
    /// reserve back, and leave the listener out of the epoll set for `acceptBackoff`. One log line
    /// per episode (per `refusalLogInterval` at most).
    func outOfDescriptors(errno e: Int32) {
        var shed = 0
        if reserveFD >= 0 {
            Syscall.closeUnchecked(reserveFD, because: .readOnly)
            reserveFD = -1
            while shed < 1024, case .processed(let fd)? = try? Syscall.accept(listenFD) {
                Syscall.closeUnchecked(fd, because: .socket)
                shed += 1
            }
            reserveFD = (try? Syscall.open("/dev/null", .readOnly)) ?? -1
        }
        if let suppressed = logThrottle.admit("accept.no_descriptors", now: now) {
            logger.warning(
                "accept.no_descriptors",
                [
                    "errno": "\(e)", "connections": "\(connections.count)", "closedWaiting": "\(shed)",
                    "pauseMs": "\(options.acceptBackoff.milliseconds)", "suppressed": "\(suppressed)",
                    "hint": "raise the descriptor limit (LimitNOFILE=, ulimit -n) or lower maximumConnections",
                ])
        }
        do {
            try epoll.modify(listenFD, events: [], token: Self.listenToken)
            acceptPausedUntil = now + options.acceptBackoff
        } catch {
            // The listener still wakes the loop; the next turns keep shedding through the reserve.
            logger.error("epoll.modify_failed", ["listener": "true", "errno": "\(error.errno ?? 0)"])
        }
    }

    /// Puts the listener back after an `acceptBackoff` pause and accepts what waits.
    func resumeAccepting() {
        acceptPausedUntil = nil
        guard listening else { return }
        do {
            try epoll.modify(listenFD, events: .input, token: Self.listenToken)
        } catch {
            logger.error("epoll.modify_failed", ["listener": "true", "errno": "\(error.errno ?? 0)"])
        }
        acceptAll()
    }

    /// Refuses the partial frame of `c` when it is over a budget: before admission its own
    /// (`maximumUnadmittedInput`), after it the server's (`maximumBufferedInput`). The peer gets
    /// RAIN_302 with request id 0 and the connection closes; the held bytes are freed at once.
    func enforceInputLimits(_ c: Connection) {
        guard c.bufferedInput > 0, !c.closeAfterFlush else { return }
        let error: RainError
        let reason: String
        if !c.isAdmitted && c.bufferedInput > options.maximumUnadmittedInput {
            reason = "unadmitted_input"
            error = RainError(
                .refused,
                "the first request on a connection may be at most \(options.maximumUnadmittedInput) bytes; "
                    + "send a smaller request first (Daemon/GetInfo), then the larger one",
                details: .init(reason: reason))
        } else if bufferedInput > options.maximumBufferedInput {
            reason = "input_budget"
            error = RainError(
                .refused,
                "the server holds \(options.maximumBufferedInput >> 20) MiB of unfinished requests, its limit; "
                    + "retry shortly",
                details: .init(reason: reason, retryAfterMilliseconds: 1000))
        } else {
            return
        }
        logRefusal("input.refused", c, reason: reason)
        c.decoder = FrameDecoder(maximumLength: options.maximumFrameLength)
        countBufferedInput(c)
        fail(0, error, on: c)
        c.closeAfterFlush = true
    }

    /// Brings the server's total of held input up to date with what `c`'s decoder holds.
    func countBufferedInput(_ c: Connection) {
        let held = c.decoder.bufferedByteCount
        guard held != c.bufferedInput else { return }
        bufferedInput += held - c.bufferedInput
        c.bufferedInput = held
        let total = bufferedInput
        bufferedInputStat.withLock { $0 = total }
    }

    /// A throttled warning about a refused connection.
    func logRefusal(_ event: String, _ c: Connection, reason: String) {
        guard let suppressed = logThrottle.admit("\(event).\(reason)", now: now) else { return }
        var who = "own uid"
        switch c.peerKey {
        case .uid(let uid)?: who = "uid \(uid)"
        case .address(let bytes)?: who = Self.describe(address: bytes)
        case nil: break
        }
        logger.warning(
            event,
            [
                "connection": "\(c.id)", "peer": who, "reason": reason, "bufferedBytes": "\(bufferedInput)",
                "suppressed": "\(suppressed)",
            ])
    }
}
