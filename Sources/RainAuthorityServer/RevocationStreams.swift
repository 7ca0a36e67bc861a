import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

/// The `WatchRevocations` streams open on the authority's connections (issue 19): each one a
/// subscription to the `RevocationHub` for the device its connection proved, ended when the client
/// cancels it or its connection closes. Opened on the loop thread; the `Mutex` keeps the table
/// safe from anywhere.
final class RevocationStreams: Sendable {
    private struct Key: Hashable {
        let connection: ConnectionID
        let requestID: UInt64
    }

    let hub: RevocationHub
    private let open = Mutex<[Key: UInt64]>([:])

    init(hub: RevocationHub) { self.hub = hub }

    /// Opens the stream of `server`'s call for the device `proof` names.
    /// - Throws: RAIN_501 `device_proof_required` when the connection proved no device key.
    func watch(proof: DeviceProof, server: RequestContext) throws(RainError) {
        guard !proof.isEmpty else { throw DeviceBinding.proofRequired() }
        let responder = server.responder
        let id = hub.subscribe(deviceID: proof.deviceID) { revocation in
            // Encoding three short strings cannot fail; a push that could not be encoded is
            // caught by the device's check at its next reconnect.
            if let bytes = try? revocation.encode() { responder.send(streamPayload: bytes) }
        }
        let previous = open.withLock {
            $0.updateValue(id, forKey: Key(connection: server.connection, requestID: server.requestID))
        }
        if let previous { hub.unsubscribe(previous) }
    }

    /// The client cancelled a call: ends its stream if it was one.
    func cancel(connection: ConnectionID, requestID: UInt64) {
        if let id = open.withLock({ $0.removeValue(forKey: Key(connection: connection, requestID: requestID)) }) {
            hub.unsubscribe(id)
        }
    }

    /// A connection closed: ends its streams.
    func connectionClosed(_ connection: ConnectionID) {
        let ids = open.withLock { all -> [UInt64] in
            let keys = all.keys.filter { $0.connection == connection }
            return keys.compactMap { all.removeValue(forKey: $0) }
        }
        ids.forEach(hub.unsubscribe)
    }

    /// How many streams are open (tests).
    var count: Int { open.withLock { $0.count } }
}
