import RainCore

// One message carries three kinds (authority_device.proto): a revocation, a heartbeat and a recheck.
extension AuthorityRevocation {
    /// A heartbeat announcing `interval` (to the millisecond, at least 1 ms).
    public static func heartbeat(interval: Duration) -> AuthorityRevocation {
        AuthorityRevocation(heartbeatIntervalMilliseconds: UInt32(clamping: max(1, interval.milliseconds)))
    }

    /// A recheck: check every session once (the authority may have missed revocations).
    public static let recheck = AuthorityRevocation(isRecheck: true)

    /// Whether this is a heartbeat.
    public var isHeartbeat: Bool { heartbeatIntervalMilliseconds > 0 }
}
