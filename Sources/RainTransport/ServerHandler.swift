import RainCore
import RainWire

/// The application side of the server.
public protocol ServerHandler: AnyObject, Sendable {
    /// Called on the loop thread for each request: must not block.
    func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision
    /// The client cancelled a call that is still in flight (loop thread).
    func cancel(connection: ConnectionID, requestID: UInt64)
    /// A connection closed; drop its streams (loop thread).
    func connectionClosed(_ connection: ConnectionID)
    /// The quick lane: the OK payload answering `request` at once, from bytes the
    /// handler keeps encoded, or nil to take the ordinary path (`handle`), which must answer the
    /// same. Called on the loop thread, must not block; only for a request in the canonical shape
    /// of a cheap read (`QuickRequest`) on an admitted connection with no call of its id in
    /// flight. `memo` is the connection's to keep what the handler found for the next call (nil
    /// at first; dropped with the connection). The default answers nothing quickly.
    func quickAnswer(
        _ request: QuickRequest, connection: ConnectionID, peer: PeerCredentials, memo: inout AnyObject?
    ) -> [UInt8]?
}

extension ServerHandler {
    /// Nothing is answered quickly: every request takes `handle`.
    public func quickAnswer(
        _ request: QuickRequest, connection: ConnectionID, peer: PeerCredentials, memo: inout AnyObject?
    ) -> [UInt8]? { nil }
}

/// How a handler answers a request it was given on the loop thread.
public enum HandlerDecision: Sendable {
    /// Answer now (cheap calls: snapshot reads, GetInfo, refusals).
    case respond(WireResponse)
    /// The handler will answer later through `RequestContext.responder`.
    case deferred
    /// A server stream: messages and the final response come through the responder.
    case stream
}
