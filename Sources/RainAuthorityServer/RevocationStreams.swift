import Dispatch
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

/// The `WatchRevocations` streams open on the authority's connections: each one a
/// subscription to the `RevocationHub` for the device its connection proved, ended when the client
/// cancels it or its connection closes. Opened on the loop thread; the `Mutex` keeps the table
/// safe from anywhere.
///
/// Each stream gets a heartbeat (`AuthorityRevocation.heartbeat`) when it opens and then every
/// `heartbeat` interval, from one timer shared by all streams (running only while a stream is
/// open): the device treats a stream silent for 2.5 intervals as dead (`RevocationFeed`).
///
/// Each stream is also its device's link for read leases (`ReadLeases`): renewed and acknowledged
/// on the stream's connection, and told of changes on the stream.
final class RevocationStreams: Sendable {
    private struct Key: Hashable {
        let connection: ConnectionID
        let requestID: UInt64
    }

    private struct State {
        var open: [Key: (subscription: UInt64, responder: Responder)] = [:]
        /// The next heartbeat, while a stream is open.
        var timer: (any RainTimer)?
    }

    let hub: RevocationHub
    /// The read leases granted on the streams' connections.
    let leases: ReadLeases
    /// The heartbeat interval; nil sends none (an authority from before heartbeats, in tests).
    let heartbeat: Duration?
    private let clock: any RainClock
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "rain.authority.revocation-heartbeat")
    /// Revocations pushed on the streams (heartbeats not counted).
    let pushed = MetricCounter(
        "rainwallet_authority_revocations_pushed_total",
        help: "Revocations pushed to devices on their WatchRevocations streams (heartbeats not counted).")

    init(hub: RevocationHub, heartbeat: Duration?, clock: any RainClock, leases: ReadLeases) {
        self.hub = hub
        self.leases = leases
        self.heartbeat = heartbeat
        self.clock = clock
    }

    /// Opens the stream of `server`'s call for the device `proof` names.
    /// - Throws: RAIN_501 `device_proof_required` when the connection proved no device key.
    func watch(proof: DeviceProof, server: RequestContext) throws(RainError) {
        guard !proof.isEmpty else { throw DeviceBinding.proofRequired() }
        let responder = server.responder
        let pushed = pushed
        let id = hub.subscribe(deviceID: proof.deviceID) { revocation in
            pushed.increment()
            // Encoding three short strings cannot fail; a push that could not be encoded is
            // caught by the device's check at its next reconnect.
            if let bytes = try? revocation.encode() { responder.send(streamPayload: bytes) }
        }
        // The first heartbeat announces the interval at once: the device bounds the silence from
        // the start.
        if let heartbeat, let bytes = try? AuthorityRevocation.heartbeat(interval: heartbeat).encode() {
            responder.send(streamPayload: bytes)
        }
        let (previous, startsTimer) = state.withLock { s -> (UInt64?, Bool) in
            let previous = s.open.updateValue(
                (id, responder), forKey: Key(connection: server.connection, requestID: server.requestID))
            return (previous?.subscription, s.timer == nil)
        }
        if let previous { hub.unsubscribe(previous) }
        leases.linkOpened(server.connection, deviceID: proof.deviceID, responder: responder)
        if startsTimer { scheduleHeartbeat() }
    }

    /// The client cancelled a call: ends its stream if it was one.
    func cancel(connection: ConnectionID, requestID: UInt64) {
        if let entry = state.withLock({ $0.open.removeValue(forKey: Key(connection: connection, requestID: requestID)) }) {
            hub.unsubscribe(entry.subscription)
            leases.linkClosed(connection)
        }
    }

    /// A connection closed: ends its streams.
    func connectionClosed(_ connection: ConnectionID) {
        let ids = state.withLock { s -> [UInt64] in
            let keys = s.open.keys.filter { $0.connection == connection }
            return keys.compactMap { s.open.removeValue(forKey: $0)?.subscription }
        }
        ids.forEach(hub.unsubscribe)
        leases.linkClosed(connection)
    }

    /// The stream metrics: pushes, and the streams open when scraped.
    var metricFamilies: [any MetricFamily] {
        [
            MetricGauge(
                "rainwallet_authority_revocation_streams_open",
                help: "WatchRevocations streams open now (one per connected device daemon)."
            ) { [weak self] in Double(self?.count ?? 0) },
            pushed,
        ] + leases.metricFamilies
    }

    /// How many streams are open (tests, metrics).
    var count: Int { state.withLock { $0.open.count } }

    // MARK: heartbeats

    /// Arms the next heartbeat (none without an interval, or when one is already armed).
    private func scheduleHeartbeat() {
        guard let heartbeat else { return }
        state.withLock { s in
            guard s.timer == nil else { return }
            s.timer = clock.schedule(after: heartbeat, on: queue) { [weak self] in self?.sendHeartbeats() }
        }
    }

    /// Sends a heartbeat on every open stream; the timer runs again while any is open.
    private func sendHeartbeats() {
        guard let heartbeat, let bytes = try? AuthorityRevocation.heartbeat(interval: heartbeat).encode() else { return }
        let responders = state.withLock { s -> [Responder] in
            s.timer = nil
            return s.open.values.map(\.responder)
        }
        for responder in responders { responder.send(streamPayload: bytes) }
        if !responders.isEmpty { scheduleHeartbeat() }
    }
}
