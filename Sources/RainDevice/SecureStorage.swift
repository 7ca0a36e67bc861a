import FoundationEssentials
import RainCore

/// A session as the device keeps it: tokens and what the snapshot shows.
public struct StoredSession: Sendable, Equatable, Codable {
    public var accountID: String
    public var walletID: String
    public var accessToken: String
    public var refreshToken: String
    /// When the access token expires, on this device's clock.
    public var expiresAt: Date
    /// The lifetime the authority granted, used to clamp the policy's thresholds.
    public var lifetimeSeconds: Double
    /// `email` or `phone`, and the normalized value, when the session came from a code login.
    public var contactKind: String?
    public var contactValue: String?
    /// How the session was opened: `code` or `passkey`. Absent in files written before passkeys
    /// (those sessions came from codes); read it through ``loginMethod``.
    public var method: String?

    public init(
        accountID: String, walletID: String, accessToken: String, refreshToken: String, expiresAt: Date,
        lifetimeSeconds: Double, contact: RainWalletContact?, method: String = StoredSession.codeMethod
    ) {
        self.method = method
        self.accountID = accountID
        self.walletID = walletID
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.lifetimeSeconds = lifetimeSeconds
        self.contactKind = contact?.kindName
        self.contactValue = contact?.value
    }

    /// `method` of a session opened with a login code.
    public static let codeMethod = "code"
    /// `method` of a session opened with a passkey.
    public static let passkeyMethod = "passkey"

    /// How the session was opened (`code` for files that predate the field).
    public var loginMethod: String { method ?? Self.codeMethod }

    /// The contact the session was opened with.
    public var contact: RainWalletContact? {
        switch (contactKind, contactValue) {
        case ("email", let v?): return .email(v)
        case ("phone", let v?): return .phone(v)
        default: return nil
        }
    }
}

/// Where sessions are kept between daemon runs. Implementations must be durable: after `save`
/// returns, a crash leaves either the old or the new session.
public protocol SecureStorage: Sendable {
    /// The stored session of `profile`, or nil (missing, or unreadable: moved aside and logged).
    func load(profile: String) async -> StoredSession?
    /// Replaces the stored session of `profile`.
    func save(_ session: StoredSession, profile: String) async throws(RainError)
    /// Removes the stored session of `profile` (no error when there is none).
    func delete(profile: String) async throws(RainError)
    /// Profiles that have a stored session.
    func storedProfiles() async -> [String]
}
