import RainCore
import RainSystem

/// Everything a handler knows about one call.
public struct RequestContext: Sendable {
    public let connection: ConnectionID
    public let requestID: UInt64
    public let peer: PeerCredentials
    /// Answers this call from any thread.
    public let responder: Responder
    /// The connection's TLS channel binding (`TLSSession.channelBinding()`, RFC 9266); nil on a
    /// connection without TLS.
    public var channelBinding: [UInt8]? = nil
    /// The peer's pidfd, taken once when a Unix connection was accepted (`SO_PEERPIDFD`, else
    /// `pidfd_open` of its pid); RainAccess reads the caller's identity through it. Closed when the
    /// connection closes. Nil on TCP, or when the peer was gone before it could be taken.
    public var peerProcess: ProcessDescriptor? = nil
    /// The request's first byte was already queued when the peer's executable was read at accept:
    /// it may have been written by the program the peer ran before an exec (the pid stays), so it
    /// cannot stand for the identity read. A handler refuses a sensitive call in it
    /// (RAIN_202 `sent_before_identity`, retryable: the client sends it again).
    public var wasQueuedBeforeIdentity = false
}
