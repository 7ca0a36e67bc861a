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
}
