/// What an authority's `GetInfo` may list among its capabilities, beyond its methods.
public enum AuthorityCapability {
    /// Its `WatchRevocations` streams get a heartbeat as they open and then at the interval it
    /// announces: a device bounds the wait for the first one (`RevocationFeed`). An authority
    /// without it (older, or run with no heartbeat) is never timed out.
    public static let revocationHeartbeat = "revocation-heartbeat"
}
