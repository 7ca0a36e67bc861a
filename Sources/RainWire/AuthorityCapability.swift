/// What an authority's `GetInfo` may list among its capabilities, beyond its methods.
public enum AuthorityCapability {
    /// Its `WatchRevocations` streams get a heartbeat as they open and then at the interval it
    /// announces: a device bounds the wait for the first one (`RevocationFeed`). An authority
    /// without it (older, or run with no heartbeat) is never timed out.
    public static let revocationHeartbeat = "revocation-heartbeat"

    /// It grants read leases (`Authority/RenewLease`) and holds every change to an account a
    /// leased device read until that device acknowledged it or the lease ran out: the device may
    /// answer Account/Get and Wallet/Get from what it read while its lease holds (`ReadLease`).
    /// An authority that cannot tell every change (several instances on one database) does not
    /// list it.
    public static let readLease = "read-lease"
}
