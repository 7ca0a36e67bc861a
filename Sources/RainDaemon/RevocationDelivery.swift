import RainAuthority
import RainAuthorityAPI
import RainCore
import RainDevice
import Synchronization

/// Brings the authority's pushed revocations to the device service, started and stopped
/// with the service (like its pruning): with a remote authority, a `RevocationFeed` keeps the
/// `WatchRevocations` stream open on a connection of its own; with the embedded authority, a
/// subscription to its `RevocationHub` for this device, in-process. Either way the service asks the
/// authority whether the sessions concerned are still live (`DeviceService.checkSessions`).
final class RevocationDelivery: Sendable {
    private enum Source {
        case remote(RevocationFeed)
        case embedded(RevocationHub, deviceID: String)
    }

    private let source: Source
    private let service: DeviceService
    private let subscription = Mutex<UInt64?>(nil)
    /// Told whether revocations arrive (`rainwallet_device_revocation_stream_up`), while started.
    private let metrics: DeviceMetrics?

    /// The delivery for `authority`: a feed for a `RemoteAuthority`, a hub subscription for an
    /// `EmbeddedAuthority`; nil for any other.
    init?(
        authority: any Authority, device: any DeviceKeyHolder, service: DeviceService, clock: any RainClock, logger: Logger,
        metrics: DeviceMetrics? = nil
    ) {
        if let remote = authority as? RemoteAuthority {
            source = .remote(
                RevocationFeed(
                    address: remote.address, tls: remote.tls, device: device, clock: clock, logger: logger,
                    lease: remote.readLease
                ) {
                    [weak service] event in service?.handle(event)
                })
        } else if let embedded = authority as? EmbeddedAuthority {
            source = .embedded(embedded.revocations, deviceID: device.deviceID)
        } else {
            return nil
        }
        self.service = service
        self.metrics = metrics
    }

    /// Whether revocations arrive now: the feed's stream is connected, or the hub subscription
    /// is in place.
    var isUp: Bool {
        switch source {
        case .remote(let feed): feed.isConnected
        case .embedded: subscription.withLock { $0 != nil }
        }
    }

    /// Starts delivering.
    func start() {
        metrics?.setRevocationProbe(owner: self) { [weak self] in self?.isUp ?? false }
        switch source {
        case .remote(let feed):
            feed.start()
        case .embedded(let hub, let deviceID):
            let service = service
            let id = hub.subscribe(deviceID: deviceID) { [weak service] revocation in
                service?.handle(revocation.isRecheck ? .recheck : .revoked(revocation))
            }
            let previous = subscription.withLock { current -> UInt64? in
                defer { current = id }
                return current
            }
            if let previous { hub.unsubscribe(previous) }
        }
    }

    /// Stops delivering (the daemon stops, or a live migration retires the service).
    func stop() {
        metrics?.clearRevocationProbe(owner: self)
        switch source {
        case .remote(let feed):
            feed.stop()
        case .embedded(let hub, _):
            let id = subscription.withLock { current -> UInt64? in
                defer { current = nil }
                return current
            }
            if let id { hub.unsubscribe(id) }
        }
    }
}
