import RainCore
import Synchronization

/// What a device daemon counts when `rainwalletd --metrics` is on: its calls, its session
/// refreshes at the authority, and whether its revocation stream is up. Served on its own Unix
/// socket (`metrics.sock`), never on TCP.
public final class DeviceMetrics: Sendable {
    /// Calls by method and outcome, and their latency.
    public let calls = CallMetrics(prefix: "rainwallet_device")

    /// The outcomes a refresh is counted under: `ok`, `refused` (the session ended), `failed`
    /// (transient: retried).
    public static let refreshOutcomes = ["ok", "refused", "failed"]

    /// `rainwallet_device_session_refreshes_total{outcome}`.
    public let refreshes = MetricCounter(
        "rainwallet_device_session_refreshes_total",
        help: "Session refreshes at the authority by outcome: ok, refused (the session ended), failed (retried).",
        labelNames: ["outcome"], initial: DeviceMetrics.refreshOutcomes.map { MetricLabels($0) })

    /// Whether the revocation stream is up now, and who said so; nil when nothing delivers
    /// revocations.
    private let revocationProbe = Mutex<(owner: ObjectIdentifier, isUp: @Sendable () -> Bool)?>(nil)

    public init() {}

    /// Says how to read whether the revocation stream is up; `owner` is what delivers them.
    public func setRevocationProbe(owner: AnyObject, _ isUp: @escaping @Sendable () -> Bool) {
        revocationProbe.withLock { $0 = (ObjectIdentifier(owner), isUp) }
    }

    /// Forgets the probe `owner` set; one set since by another (a live migration's new
    /// delivery) stays.
    public func clearRevocationProbe(owner: AnyObject) {
        revocationProbe.withLock { if $0?.owner == ObjectIdentifier(owner) { $0 = nil } }
    }

    /// Counts one refresh attempt's outcome (one of `refreshOutcomes`).
    func refreshed(_ outcome: String) {
        refreshes.increment(MetricLabels(outcome))
    }

    /// The families, for the daemon's registry.
    public var families: [any MetricFamily] {
        calls.families + [
            refreshes,
            MetricGauge(
                "rainwallet_device_revocation_stream_up",
                help: "1 while the authority's revocation stream (or the embedded authority's subscription) is up, else 0."
            ) { [weak self] in
                let probe = self?.revocationProbe.withLock { $0?.isUp }
                return probe?() == true ? 1 : 0
            },
        ]
    }
}
