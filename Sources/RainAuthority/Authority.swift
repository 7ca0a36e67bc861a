import Foundation
import RainCore

/// The authority API: accounts, contacts, login codes, wallets and session tokens.
///
/// One async protocol, the same whether the authority runs in-process (`EmbeddedAuthority`) or
/// remotely over framed protobuf. Every method throws `RainError` only.
public protocol Authority: Sendable {
    /// Sends a 6-digit login code to `contact` (already normalized) and returns the pending challenge.
    ///
    /// Retires this device's pending challenges in the app (resend replaces; switching contact
    /// retires), then, if the account (or the contact, before an account exists) already has
    /// `maxActiveCodesPerAccount` active challenges, retires the oldest.
    /// - Throws: RAIN_102 for a contact that is not normalized, RAIN_302 when rate limited,
    ///   RAIN_501 when the code sender fails.
    func sendLoginCode(_ request: SendCodeRequest) async throws(RainError) -> SendCodeResult

    /// Confirms a code. On success creates the account and its wallet on a first login, issues a
    /// session bound to the device, and revokes the account's sessions on every other device.
    /// - Throws: RAIN_203 (details: `reason` wrong|expired|locked|retired, `attemptsRemaining`)
    ///   keeping the challenge on a wrong code; RAIN_102 for an unknown challenge.
    func confirmLoginCode(_ request: ConfirmCodeRequest) async throws(RainError) -> LoginResult

    /// Revokes the session that holds `refreshToken` (logout). Unknown or already revoked tokens
    /// succeed silently.
    func revokeSession(appID: String, refreshToken: String) async throws(RainError)

    /// The code deliveries of the development outbox, oldest first.
    /// - Throws: RAIN_202 when the development outbox is disabled.
    func listOutbox() async throws(RainError) -> [OutboxDelivery]
}

/// `Authority.sendLoginCode` input.
public struct SendCodeRequest: Sendable {
    public var appID: String
    public var deviceID: String
    /// A normalized contact.
    public var contact: RainWalletContact

    public init(appID: String, deviceID: String, contact: RainWalletContact) {
        self.appID = appID
        self.deviceID = deviceID
        self.contact = contact
    }
}

/// `Authority.sendLoginCode` output.
public struct SendCodeResult: Sendable, Equatable {
    /// Opaque id of the pending challenge; the device keeps it to confirm.
    public var challengeID: String
    public var contact: RainWalletContact
    public var expiresAt: Date

    public init(challengeID: String, contact: RainWalletContact, expiresAt: Date) {
        self.challengeID = challengeID
        self.contact = contact
        self.expiresAt = expiresAt
    }
}

/// `Authority.confirmLoginCode` input.
public struct ConfirmCodeRequest: Sendable {
    public var appID: String
    public var deviceID: String
    public var challengeID: String
    /// What the user typed (never logged).
    public var code: String

    public init(appID: String, deviceID: String, challengeID: String, code: String) {
        self.appID = appID
        self.deviceID = deviceID
        self.challengeID = challengeID
        self.code = code
    }
}

/// Tokens of a session. The device computes deadlines on its own clock from `accessLifetime`.
public struct SessionTokens: Sendable, Equatable {
    public var accessToken: String
    public var refreshToken: String
    /// How long the access token lives from issue (900 s by default).
    public var accessLifetime: Duration

    public init(accessToken: String, refreshToken: String, accessLifetime: Duration) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.accessLifetime = accessLifetime
    }
}

/// A successful login.
public struct LoginResult: Sendable, Equatable {
    public var accountID: String
    public var walletID: String
    /// True when this login created the account and its wallet.
    public var accountCreated: Bool
    public var tokens: SessionTokens

    public init(accountID: String, walletID: String, accountCreated: Bool, tokens: SessionTokens) {
        self.accountID = accountID
        self.walletID = walletID
        self.accountCreated = accountCreated
        self.tokens = tokens
    }
}

/// One delivery in the development outbox.
public struct OutboxDelivery: Sendable, Equatable, Codable {
    public var appID: String
    /// `email` or `phone`.
    public var kind: String
    public var contact: String
    public var code: String
    public var sentAt: Date

    public init(appID: String, kind: String, contact: String, code: String, sentAt: Date) {
        self.appID = appID
        self.kind = kind
        self.contact = contact
        self.code = code
        self.sentAt = sentAt
    }
}

/// Authority settings (DESIGN §6); the integration harness shortens them.
public struct AuthoritySettings: Sendable, Equatable {
    public var codeLifetime: Duration
    public var maxWrongAttempts: Int
    public var maxActiveCodesPerAccount: Int
    public var accessTokenLifetime: Duration
    /// Whether `listOutbox` is served.
    public var isDevOutboxEnabled: Bool

    public init(
        codeLifetime: Duration = .seconds(300), maxWrongAttempts: Int = 3, maxActiveCodesPerAccount: Int = 3,
        accessTokenLifetime: Duration = .seconds(900), isDevOutboxEnabled: Bool = true
    ) {
        self.codeLifetime = codeLifetime
        self.maxWrongAttempts = maxWrongAttempts
        self.maxActiveCodesPerAccount = maxActiveCodesPerAccount
        self.accessTokenLifetime = accessTokenLifetime
        self.isDevOutboxEnabled = isDevOutboxEnabled
    }
}
