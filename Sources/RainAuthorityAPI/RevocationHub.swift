import RainCore
import RainWire
import Synchronization

/// Where an authority announces revoked sessions, in-process: the authority publishes
/// each revocation once its transaction committed; the authority's server pushes it to the
/// device's `WatchRevocations` streams, and an embedded authority's own device daemon ends its
/// sessions through it. With several instances on one PostgreSQL database, a relay
/// (`PostgresRevocationChannel`) carries what this instance published to the others (NOTIFY) and
/// hands what they published to `deliver` (LISTEN).
///
/// Handlers run on the thread that published (a store queue, a task, the LISTEN thread): they must
/// not block (the server's handler posts to its loop through a `Responder`; the device's starts a
/// task). Publishing never fails and never waits for a subscriber.
///
/// ```swift
/// let id = hub.subscribe(deviceID: "device-a") { revocation in … }   // nil: every device
/// hub.publish([AuthorityRevocation(appID: "app", deviceID: "device-a", reason: "revoked_elsewhere")])
/// hub.unsubscribe(id)
/// ```
public final class RevocationHub: Sendable {
    /// A subscription's handler.
    public typealias Handler = @Sendable (AuthorityRevocation) -> Void

    private struct State {
        var nextID: UInt64 = 1
        /// Each subscription: the device it listens to (nil: every device) and its handler.
        var subscribers: [UInt64: (deviceID: String?, handler: Handler)] = [:]
        /// Carries published revocations to the other instances (nil: this instance is alone).
        var relay: Handler?
    }

    private let state = Mutex(State())

    /// An empty hub.
    public init() {}

    /// Calls `handler` for every revocation of `deviceID` (every device when nil) from now on.
    /// - Returns: the subscription's id, for `unsubscribe`.
    public func subscribe(deviceID: String?, _ handler: @escaping Handler) -> UInt64 {
        state.withLock { s in
            let id = s.nextID
            s.nextID += 1
            s.subscribers[id] = (deviceID, handler)
            return id
        }
    }

    /// Ends a subscription (an unknown id is ignored).
    public func unsubscribe(_ id: UInt64) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: id) }
    }

    /// How many subscriptions are open (tests: none leak once streams close).
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Sets what carries this instance's revocations to the other instances.
    public func setRelay(_ relay: Handler?) {
        state.withLock { $0.relay = relay }
    }

    /// Announces revocations made by this instance: delivered here, and relayed to the others.
    public func publish(_ revocations: [AuthorityRevocation]) {
        guard !revocations.isEmpty else { return }
        let relay = state.withLock { $0.relay }
        deliver(revocations)
        if let relay { revocations.forEach(relay) }
    }

    /// Asks every subscriber, whatever its device, to check all its sessions once
    /// (`AuthorityRevocation.recheck`): this instance may have missed revocations the others made
    /// (the relay's LISTEN connection was lost and is back). Never relayed.
    public func recheckAll() {
        let handlers = state.withLock { $0.subscribers.values.map(\.handler) }
        for handler in handlers { handler(.recheck) }
    }

    /// Hands revocations to this instance's subscribers only (what another instance published).
    public func deliver(_ revocations: [AuthorityRevocation]) {
        for revocation in revocations {
            let handlers = state.withLock { s in
                s.subscribers.values.filter { $0.deviceID == nil || $0.deviceID == revocation.deviceID }.map(\.handler)
            }
            for handler in handlers { handler(revocation) }
        }
    }
}
