import RainCore
import RainWire

/// Sends the answers of one call from any thread. The final `respond` ends the call; anything
/// sent after that, or after the client cancelled, is dropped.
public struct Responder: Sendable {
    let server: EventLoopServer
    let connection: ConnectionID
    let requestID: UInt64
    let token: UInt64

    /// Sends the final response.
    public func respond(_ response: WireResponse) {
        server.post(connection: connection, requestID: requestID, token: token, kind: .response(response), isFinal: true)
    }

    /// Sends one stream message.
    public func send(streamPayload: [UInt8]) {
        server.post(
            connection: connection, requestID: requestID, token: token, kind: .stream(payload: streamPayload), isFinal: false)
    }

    /// Fails the call with a Rain error.
    public func fail(_ error: RainError) { respond(.failure(error)) }
}
