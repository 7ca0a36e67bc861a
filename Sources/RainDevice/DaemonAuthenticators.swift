import RainCore

/// The authenticators the daemon runs itself for `Passkey/Run`: security keys always (libfido2),
/// the platform authenticator once one is configured.
public struct DaemonAuthenticators: Sendable {
    /// FIDO2 security keys; nil where the daemon was built without them (tests of other parts).
    public var securityKey: (any DaemonAuthenticator)?
    /// The platform authenticator (the TPM's); nil until one is configured.
    public var platform: (any DaemonAuthenticator)?

    /// Authenticators.
    public init(securityKey: (any DaemonAuthenticator)? = nil, platform: (any DaemonAuthenticator)? = nil) {
        self.securityKey = securityKey
        self.platform = platform
    }
}
