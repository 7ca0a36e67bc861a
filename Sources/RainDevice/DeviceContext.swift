import RainAccess
import RainAuthorityAPI
import RainCore
import RainCrypto

/// Shared dependencies of every profile.
public struct DeviceContext: Sendable {
    public var authority: any Authority
    public var storage: any SecureStorage
    public var clock: any RainClock
    public var device: DeviceIdentity
    public var logger: Logger
    /// Where profiles keep what they learn at run time (the passkey domain a client set).
    public var profileState: ProfileStateStore
    /// The audit log of sensitive operations (the daemon's `AuditLog`; nil records nothing).
    public var audit: (any AuditRecorder)?
    /// The audit log's anchor at a remote authority (nil with the embedded one, or no log).
    public var auditAnchoring: AuditAnchoring?
    /// How the link, the revocation stream and the daemon's keys stand.
    public var health: DeviceHealth
    /// What is counted for `rainwalletd --metrics`; nil counts nothing.
    public var metrics: DeviceMetrics?
    /// The authenticators the daemon runs itself (`Passkey/Run`).
    public var authenticators = DaemonAuthenticators()

    public init(
        authority: any Authority, storage: any SecureStorage, clock: any RainClock, device: DeviceIdentity, logger: Logger,
        profileState: ProfileStateStore = ProfileStateStore(directory: nil), audit: (any AuditRecorder)? = nil,
        auditAnchoring: AuditAnchoring? = nil, metrics: DeviceMetrics? = nil
    ) {
        self.metrics = metrics
        // An embedded authority is always connected.
        self.health = DeviceHealth(
            now: clock.now, link: authority.linkState ?? AuthorityLinkState(phase: .connected, since: clock.now))
        self.authority = authority
        self.storage = storage
        self.clock = clock
        self.device = device
        self.logger = logger
        self.profileState = profileState
        self.audit = audit
        self.auditAnchoring = auditAnchoring
    }

    /// The device id.
    public var deviceID: String { device.id }
}
