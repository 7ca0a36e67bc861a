import FoundationEssentials

/// Where the device's link to its authority stands: what `rainwallet status --json`
/// shows as `authorityLink` (`state`, `lastError`, `since`), what `SessionSnapshot.authorityLink`
/// carries and what the `Watch` stream announces when it changes (event kind `authorityLink`). An
/// embedded authority is always `connected` and has no revocation stream.
public struct AuthorityLinkState: Sendable, Hashable {
    /// The three states, named as `status --json` spells them.
    public enum Phase: String, Sendable, Hashable, CaseIterable {
        /// The last call got an answer (or none was made yet).
        case connected
        /// The last call got no answer (a deadline passed, the connection dropped), or the authority
        /// answers but refreshes fail: the authority may be slow or briefly away, or something on the
        /// way (the device's own keys: see `StorageHealthState`) fails.
        case degraded
        /// The authority cannot be reached: a connection could not be made (refused, a TLS handshake
        /// that failed, a device proof the authority refused), or calls went unanswered twice in a row.
        case unreachable
    }

    /// The state.
    public var phase: Phase
    /// The message of the failure that led here (nil when connected); never a code or a token.
    public var lastError: String?
    /// When the link entered this state, on the injected clock.
    public var since: Date
    /// The revocation stream the authority pushes sign-outs on; nil with an embedded authority (or
    /// from a daemon that does not say).
    public var revocationStream: RevocationStreamState?

    /// A state.
    public init(phase: Phase, lastError: String? = nil, since: Date, revocationStream: RevocationStreamState? = nil) {
        self.phase = phase
        self.lastError = lastError
        self.since = since
        self.revocationStream = revocationStream
    }
}

/// Whether the revocation stream from a remote authority is open: while it is down, a login
/// elsewhere reaches this device only at its next call to the authority.
public struct RevocationStreamState: Sendable, Hashable {
    /// True while the stream is open.
    public var isUp: Bool
    /// Why it is down (nil when up); never a code or a token.
    public var lastError: String?
    /// When it went up or down, on the injected clock.
    public var since: Date

    /// A state.
    public init(isUp: Bool, lastError: String? = nil, since: Date) {
        self.isUp = isUp
        self.lastError = lastError
        self.since = since
    }

    /// `up` or `down`, as `status --json` and the wire spell it.
    public var word: String { isUp ? "up" : "down" }
}

/// Whether the daemon's own keys (its key provider: the TPM, the keyring, the key file) can be
/// used now. A failure here is the device's, never the authority's: the TPM cannot be reached, the
/// keyring is locked.
public struct StorageHealthState: Sendable, Hashable {
    /// True while the keys answer.
    public var isAvailable: Bool
    /// The provider's error while unavailable (nil when available).
    public var lastError: String?
    /// When they became available or unavailable, on the injected clock.
    public var since: Date

    /// A state.
    public init(isAvailable: Bool, lastError: String? = nil, since: Date) {
        self.isAvailable = isAvailable
        self.lastError = lastError
        self.since = since
    }

    /// `available` or `unavailable`, as `status --json` and the wire spell it.
    public var word: String { isAvailable ? "available" : "unavailable" }
}
