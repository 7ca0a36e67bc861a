import RainCore

/// Authority settings (docs/user-guide.md "Sessions"); the integration harness shortens them.
public struct AuthoritySettings: Sendable, Equatable {
    public var codeLifetime: Duration
    public var maxWrongAttempts: Int
    public var maxActiveCodesPerAccount: Int
    public var accessTokenLifetime: Duration
    /// Whether `listOutbox` is served.
    public var isDevOutboxEnabled: Bool
    /// The refresh grace window (10 s by default): for this long after a rotation, presenting the
    /// refresh token it replaced, from the session's device, returns the same new pair again instead of
    /// counting as reuse. It covers a device retrying after a lost reply and concurrent duplicates;
    /// it is the only reuse that does not revoke the session family. Measured on the authority's
    /// clock from the rotation; only the one generation just rotated out is covered.
    public var refreshGraceWindow: Duration
    /// How long a session can go unrefreshed (30 days by default), counted from its last rotation
    /// (from the login when it was never refreshed): a device that keeps refreshing keeps its
    /// session; one that stays away longer must log in again (RAIN_201 `refresh_expired`).
    public var refreshTokenLifetime: Duration
    /// How long a passkey ceremony's challenge is accepted (5 minutes by default).
    public var passkeyCeremonyLifetime: Duration
    /// The code send limits (docs/operations.md "Send limits": 30 s cooldown and 5 per 15 minutes per contact, 10 per
    /// hour per account, in one app; 10 per 15 minutes per contact across apps, 20 per
    /// minute per source); a send over one is refused with RAIN_302 and a retry-after.
    public var sendLimits: CodeSendLimits
    /// How often the daemons prune old rows (`PeriodicPruning`; 10 minutes by default).
    public var pruneInterval: Duration
    /// How long expired challenges and ceremonies, revoked sessions and outbox deliveries are kept
    /// before pruning deletes them (1 day by default).
    public var pruneRetention: Duration
    /// The app ids served (`rainwalletd authority --apps`); every other app id is refused with
    /// RAIN_102 (`app_not_served`). nil serves every app id (the embedded authority: a device
    /// daemon's profiles).
    public var servedAppIDs: Set<String>?

    public init(
        codeLifetime: Duration = .seconds(300), maxWrongAttempts: Int = 3, maxActiveCodesPerAccount: Int = 3,
        accessTokenLifetime: Duration = .seconds(900), isDevOutboxEnabled: Bool = true,
        refreshGraceWindow: Duration = .seconds(10), refreshTokenLifetime: Duration = .seconds(30 * 86_400),
        passkeyCeremonyLifetime: Duration = .seconds(300),
        sendLimits: CodeSendLimits = CodeSendLimits(), pruneInterval: Duration = .seconds(600),
        pruneRetention: Duration = .seconds(86_400), servedAppIDs: Set<String>? = nil
    ) {
        self.servedAppIDs = servedAppIDs
        self.sendLimits = sendLimits
        self.pruneInterval = pruneInterval
        self.pruneRetention = pruneRetention
        self.codeLifetime = codeLifetime
        self.maxWrongAttempts = maxWrongAttempts
        self.maxActiveCodesPerAccount = maxActiveCodesPerAccount
        self.accessTokenLifetime = accessTokenLifetime
        self.isDevOutboxEnabled = isDevOutboxEnabled
        self.refreshGraceWindow = refreshGraceWindow
        self.refreshTokenLifetime = refreshTokenLifetime
        self.passkeyCeremonyLifetime = passkeyCeremonyLifetime
    }

    /// How long pruning keeps an expired challenge: `pruneRetention`, but never less than the
    /// longest send-limit window, so every send the limits still count stays stored.
    public var challengeRetention: Duration { max(pruneRetention, sendLimits.longestWindow) }
}
