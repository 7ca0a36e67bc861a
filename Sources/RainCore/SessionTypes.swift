import FoundationEssentials

/// Whether a profile has a usable login: the value apps bind their login gate to.
public enum AuthState: String, Sendable, Hashable, CaseIterable {
    /// The stored session is still being restored.
    case loading
    /// A session exists.
    case authenticated
    /// No session: show the login screen.
    case unauthenticated
}

/// Why a session ended without `logout()`.
public enum ExpiryReason: String, Sendable, Hashable, CaseIterable {
    /// It reached its expiry time.
    case expired
    /// The user logged in on another device.
    case revokedElsewhere
    /// It could not be refreshed before it expired.
    case refreshFailed
}

/// A finer view of the session than `AuthState`.
public enum SessionState: Sendable, Hashable {
    /// The stored session is still being restored.
    case loading
    /// No session.
    case none
    /// A live session that expires at the given time.
    case active(expiresAt: Date)
    /// The session ended (see `ExpiryReason`); calls throw RAIN_201 until the next login.
    case expired
}

/// A snapshot of one profile's session as the daemon reports it.
public struct SessionSnapshot: Sendable, Hashable {
    public var authState: AuthState
    public var sessionState: SessionState
    /// The account the session belongs to.
    public var accountID: String?
    /// The account's wallet.
    public var walletID: String?
    /// The contact the session was opened with.
    public var contact: RainWalletContact?
    /// True only with more than the policy's threshold left (30 s by default).
    public var hasActiveSession: Bool
    /// Set while the session's newest tokens could not be saved (a full disk): the `details.reason`
    /// calls are refused with (`session_not_persisted`, RAIN_502) until the daemon saves them. Nil
    /// when the session is saved.
    public var storageWarning: String?
    /// The daemon's link to its authority; nil from a daemon that does not say.
    public var authorityLink: AuthorityLinkState?
    /// Whether the daemon's keys can be used now; nil from a daemon that does not say.
    public var storage: StorageHealthState?

    public init(
        authState: AuthState, sessionState: SessionState, accountID: String? = nil, walletID: String? = nil,
        contact: RainWalletContact? = nil, hasActiveSession: Bool = false, storageWarning: String? = nil,
        authorityLink: AuthorityLinkState? = nil, storage: StorageHealthState? = nil
    ) {
        self.authorityLink = authorityLink
        self.storage = storage
        self.authState = authState
        self.sessionState = sessionState
        self.accountID = accountID
        self.walletID = walletID
        self.contact = contact
        self.hasActiveSession = hasActiveSession
        self.storageWarning = storageWarning
    }

    /// `storageWarning` of a session whose refreshed tokens are not saved yet.
    public static let sessionNotPersisted = "session_not_persisted"

    /// The expiry time of an active session.
    public var expiresAt: Date? {
        if case .active(let at) = sessionState { return at }
        return nil
    }

    /// The state before the stored session has loaded.
    public static let loading = SessionSnapshot(authState: .loading, sessionState: .loading)
    /// No session.
    public static let unauthenticated = SessionSnapshot(authState: .unauthenticated, sessionState: .none)
}

/// The session policy of a profile (`RainWalletSessionPolicy` in the mobile SDK) (docs/user-guide.md "Sessions").
public struct RainWalletSessionPolicy: Sendable, Hashable {
    /// Refresh this long before expiry; clamped to half the lifetime.
    public var refreshBuffer: Duration
    /// Refresh automatically ahead of expiry.
    public var isAutoRefreshEnabled: Bool
    /// Transient retries of a refresh (and of reads).
    public var transientRetries: Int
    /// First retry delay; doubles each time.
    public var retryInitialDelay: Duration
    /// Cap of the retry delay.
    public var retryMaxDelay: Duration
    /// `hasActiveSession()` is true only with more than this left; clamped like the buffer.
    public var activeThreshold: Duration
    /// How long `awaitSessionRestore()` waits.
    public var restoreTimeout: Duration

    public init(
        refreshBuffer: Duration = .seconds(60), isAutoRefreshEnabled: Bool = true, transientRetries: Int = 2,
        retryInitialDelay: Duration = .milliseconds(500), retryMaxDelay: Duration = .seconds(4),
        activeThreshold: Duration = .seconds(30), restoreTimeout: Duration = .seconds(5)
    ) {
        self.refreshBuffer = refreshBuffer
        self.isAutoRefreshEnabled = isAutoRefreshEnabled
        self.transientRetries = transientRetries
        self.retryInitialDelay = retryInitialDelay
        self.retryMaxDelay = retryMaxDelay
        self.activeThreshold = activeThreshold
        self.restoreTimeout = restoreTimeout
    }

    /// The default policy.
    public static let `default` = RainWalletSessionPolicy()

    /// The refresh buffer for a session of the given lifetime (at most half of it).
    public func effectiveRefreshBuffer(lifetime: Duration) -> Duration { min(refreshBuffer, lifetime / 2) }

    /// The active threshold for a session of the given lifetime (at most half of it).
    public func effectiveActiveThreshold(lifetime: Duration) -> Duration { min(activeThreshold, lifetime / 2) }
}

extension Duration {
    /// Whole milliseconds (truncated).
    public var milliseconds: Int64 {
        let c = components
        return c.seconds * 1000 + c.attoseconds / 1_000_000_000_000_000
    }

    /// Whole nanoseconds (truncated), clamped to `Int64`.
    public var clampedNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        let (sum, overflowAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        guard !overflowAgain else { return seconds < 0 ? .min : .max }
        return sum
    }

    /// Seconds as a `TimeInterval`.
    public var timeInterval: TimeInterval {
        let c = components
        return TimeInterval(c.seconds) + TimeInterval(c.attoseconds) / 1e18
    }
}

extension Date {
    /// Unix milliseconds, saturated to the `Int64` range: a date decoded from a peer's
    /// `Int64.max` milliseconds rounds up past it as a `Double`, and must not trap when sent on
    /// (found by FuzzRequests).
    public var unixMilliseconds: Int64 {
        let milliseconds = (timeIntervalSince1970 * 1000).rounded()
        if let exact = Int64(exactly: milliseconds) { return exact }
        return milliseconds > 0 ? .max : .min
    }
    /// A date from Unix milliseconds.
    public init(unixMilliseconds: Int64) { self.init(timeIntervalSince1970: TimeInterval(unixMilliseconds) / 1000) }
    /// This date plus a duration.
    public func adding(_ d: Duration) -> Date { addingTimeInterval(d.timeInterval) }
}
