/// Why there is no usable session: the `details.reason` of every RAIN_201, one typed value for
/// the authority (which refuses a dead token) and the device (which ends its session and tells
/// watchers). The raw values are the wire strings: clients match on them, so they never change.
public enum SessionEndReason: String, Sendable, Hashable, CaseIterable {
    // MARK: ended on the device (`ExpiryReason`)

    /// The session reached its expiry time.
    case expired = "expired"
    /// The user logged in on another device (the authority sends it too).
    case revokedElsewhere = "revoked_elsewhere"
    /// The session could not be refreshed before it expired, or the refresh was refused.
    case refreshFailed = "refresh_failed"
    /// The profile has no session and none ended: never logged in, or logged out.
    case noSession = "no_session"

    // MARK: refused by the authority

    /// The access token is unknown (or was rotated away).
    case invalidToken = "invalid_token"
    /// The access token is past its expiry.
    case accessExpired = "access_expired"
    /// Logout, or a newer login on the same device.
    case revoked = "revoked"
    /// Unknown refresh token, or no valid proof of possession of the device key.
    case refreshRejected = "refresh_rejected"
    /// A rotated refresh token presented again outside the grace window.
    case refreshTokenReused = "refresh_token_reused"
    /// The session has no device key, so it cannot be refreshed.
    case deviceUnbound = "device_unbound"
    /// Unrefreshed for longer than the refresh-token lifetime.
    case refreshExpired = "refresh_expired"

    /// The reason an error carries in its details, when it is one of these.
    /// - Parameter error: any error; its code is not checked.
    public init?(reasonOf error: RainError) {
        guard let reason = error.details.reason else { return nil }
        self.init(rawValue: reason)
    }

    /// The reason the device reports for a session that ended this way.
    public init(_ expiry: ExpiryReason) {
        switch expiry {
        case .expired: self = .expired
        case .revokedElsewhere: self = .revokedElsewhere
        case .refreshFailed: self = .refreshFailed
        }
    }

    /// True when the authority refused only the access token (rotated meanwhile, or expired before
    /// the refresh ran): the call did nothing, and a refresh may save the session.
    public var isStaleAccessToken: Bool { self == .invalidToken || self == .accessExpired }

    /// How the device ends its session after the authority refused it definitively:
    /// `revokedElsewhere` when the user logged in on another device, else `refreshFailed`.
    public var deviceExpiry: ExpiryReason { self == .revokedElsewhere ? .revokedElsewhere : .refreshFailed }
}
