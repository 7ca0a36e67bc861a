import RainCore
import RainCrypto
import RainWire

/// Settings of the server.
public struct ServerOptions: Sendable {
    /// Largest frame accepted or sent.
    public var maximumFrameLength: Int = Frame.defaultMaximumLength
    /// Uids served besides the daemon's own.
    public var allowedUIDs: Set<UInt32> = []
    /// A connection whose unread output grows past this is closed (a client that never reads).
    public var maximumPendingOutput: Int = 16 << 20
    /// Calls in flight per connection.
    public var maximumCallsPerConnection: Int = 1024
    /// The listening socket is TCP (the authority hop, `TCPSocket.listen`), not a Unix socket.
    /// TCP peers have no SO_PEERCRED: every connection is admitted with
    /// `PeerCredentials.tcpPeer` and `allowedUIDs` does not apply (loopback-only addresses are the
    /// guard without TLS). Accepted sockets get `TCP_NODELAY`.
    public var isTCP: Bool = false
    /// Serve TLS 1.3 with this server context (TCP only): each connection first completes a
    /// handshake, driven by the loop through memory BIOs, so a slow peer never blocks it. A peer
    /// that fails the handshake gets the alert and is closed; the others are not affected.
    public var tls: TLSContext?
    /// A connection whose TLS handshake has not completed this long after it was accepted is closed.
    public var tlsHandshakeTimeout: Duration = .seconds(10)

    // Limits on what a peer can make the server hold. A connection is *admitted* once
    // its TLS handshake (if any) is done and its first valid request is decoded; before that it is
    // nobody yet, and may hold very little for very little time.

    /// Bytes a connection may send before it is admitted: the TLS handshake's input, then the
    /// plaintext of its first request. Beyond this it gets RAIN_302 (reason `unadmitted_input`)
    /// and is closed.
    public var maximumUnadmittedInput: Int = 4 << 10
    /// Time a connection has, from accept, to be admitted; then it is closed.
    public var admissionTimeout: Duration = .seconds(10)
    /// A partial frame that gets no new byte for this long is dropped with its connection. An
    /// admitted connection with no partial frame has no deadline at all: a long-lived stream or a
    /// connection that carries a session waits as long as it likes between requests.
    public var frameProgressTimeout: Duration = .seconds(10)
    /// Unfinished frames held across all connections. The connection whose input would go beyond
    /// gets RAIN_302 (reason `input_budget`) and is closed; complete frames are never held, so
    /// clients that send whole requests are not affected. 64 MiB in a device daemon, 256 MiB in
    /// an authority.
    public var maximumBufferedInput: Int = 64 << 20
    /// Connections at once from one uid (Unix socket) or one source address (TCP; an IPv4 address
    /// mapped into IPv6 counts as the IPv4 address). The daemon's own uid is bounded only by
    /// `maximumConnections`: it is the user the daemon serves (`scripts/load` runs 1,000 clients).
    public var maximumConnectionsPerPeer: Int = 256
    /// Connections at once in all. A connection beyond a limit is closed as soon as it is accepted.
    public var maximumConnections: Int = 4096
    /// Connections not admitted yet, at once; beyond, the oldest of them is closed to make room.
    /// A TLS connection holds OpenSSL's state and buffers before it is admitted, so an authority
    /// sets 1,024 here, which bounds its memory under a flood (docs/performance.md); a device
    /// daemon, whose unadmitted connections cost little, keeps the total.
    public var maximumUnadmittedConnections: Int = 4096
    /// When `accept` fails for want of descriptors (`EMFILE`, `ENFILE`), the listener is paused
    /// this long (the waiting connections are accepted and closed through a reserve descriptor, so
    /// they get an answer) instead of the loop spinning on a listener that stays readable.
    public var acceptBackoff: Duration = .milliseconds(250)
    /// Refusals (a peer uid not allowed, a limit reached, a descriptor shortage) are logged at
    /// most once per this interval for each kind, with the count of the ones left out.
    public var refusalLogInterval: Duration = .seconds(10)
    /// The uid taken as the server's own (tests set another to be a peer that is not the owner);
    /// nil: the process's uid.
    var ownUID: UInt32?
    /// Unix connections: refuse any bytes written by another process than the peer that connected
    /// (RAIN_202 `connection_shared`, then close), as the kernel stamps them (`SO_PASSCRED`). False
    /// only for a test of what the check stops.
    public var refusesSharedConnections = true
    /// False to take peers' pidfds with `pidfd_open` even where `SO_PEERPIDFD` exists (tests of
    /// the fallback of kernels before 6.5).
    var usesPeerPidfd = true
    public init() {}
}
