import RainCore

/// `Authority/WatchRevocations` request (empty): the stream belongs to the device proven on the
/// connection, never to one named here.
public struct AuthorityWatchRevocationsRequest: WireMessage, Equatable {
    /// Creates the request.
    public init() {}
}

/// One message of the `Authority/WatchRevocations` stream: sessions of `deviceID` for `appID` were
/// revoked. It names no session and carries no token: the device asks the authority whether each
/// of its sessions for the app is still live.
///
/// Two other kinds share the message (fields an older device ignores): a heartbeat
/// (`heartbeatInterval` set, the rest empty), sent when the stream opens and then every interval so
/// the device can tell a silent stream from a dead one; and a recheck (`isRecheck`), asking the
/// device to check every session once, as at a reconnect.
public struct AuthorityRevocation: WireMessage, Equatable, Hashable {
    /// The app whose sessions were revoked.
    public var appID: String
    /// The device whose sessions were revoked.
    public var deviceID: String
    /// The stored revoke reason (`revoked_elsewhere`, `replaced`, `logout`, `reused`, …).
    public var reason: String
    /// On a heartbeat: the authority's heartbeat interval in milliseconds; 0 otherwise.
    public var heartbeatIntervalMilliseconds: UInt32
    /// A recheck: check every session once (the authority may have missed revocations).
    public var isRecheck: Bool

    /// Creates the message.
    public init(
        appID: String, deviceID: String, reason: String, heartbeatIntervalMilliseconds: UInt32 = 0,
        isRecheck: Bool = false
    ) {
        self.appID = appID
        self.deviceID = deviceID
        self.reason = reason
        self.heartbeatIntervalMilliseconds = heartbeatIntervalMilliseconds
        self.isRecheck = isRecheck
    }

    /// A heartbeat announcing `interval` (to the millisecond, at least 1 ms).
    public static func heartbeat(interval: Duration) -> AuthorityRevocation {
        AuthorityRevocation(
            appID: "", deviceID: "", reason: "",
            heartbeatIntervalMilliseconds: UInt32(clamping: max(1, interval.milliseconds)))
    }

    /// A recheck.
    public static let recheck = AuthorityRevocation(appID: "", deviceID: "", reason: "", isRecheck: true)

    /// Whether this is a heartbeat.
    public var isHeartbeat: Bool { heartbeatIntervalMilliseconds > 0 }
}
