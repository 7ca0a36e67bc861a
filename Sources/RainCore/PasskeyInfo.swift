import FoundationEssentials

/// One passkey of an account, as the account is shown: which domain it belongs to and when it was
/// created and last used. Carries no key material.
public struct PasskeyInfo: Sendable, Equatable, Hashable {
    /// The credential id, base64url without padding.
    public var credentialID: String
    /// The domain (WebAuthn rpId) the passkey was registered for.
    public var rpID: String
    /// When it was registered.
    public var createdAt: Date
    /// When it last logged in; nil when it never did.
    public var lastUsedAt: Date?

    /// Creates a summary.
    public init(credentialID: String, rpID: String, createdAt: Date, lastUsedAt: Date?) {
        self.credentialID = credentialID
        self.rpID = rpID
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }
}
