/// `Authority/WatchRevocations` request (empty): the stream belongs to the device proven on the
/// connection, never to one named here.
public struct AuthorityWatchRevocationsRequest: WireMessage, Equatable {
    /// Creates the request.
    public init() {}
}

/// One message of the `Authority/WatchRevocations` stream: sessions of `deviceID` for `appID` were
/// revoked. It names no session and carries no token: the device asks the authority whether each
/// of its sessions for the app is still live.
public struct AuthorityRevocation: WireMessage, Equatable, Hashable {
    /// The app whose sessions were revoked.
    public var appID: String
    /// The device whose sessions were revoked.
    public var deviceID: String
    /// The stored revoke reason (`revoked_elsewhere`, `replaced`, `logout`, `reused`, …).
    public var reason: String

    /// Creates the message.
    public init(appID: String, deviceID: String, reason: String) {
        self.appID = appID
        self.deviceID = deviceID
        self.reason = reason
    }
}
