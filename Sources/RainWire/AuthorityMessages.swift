import Foundation
import RainCore

/// Full method names of the authority hop (`proto/authority.proto`): a device daemon calling a
/// remote authority (`rainwalletd authority --listen HOST:PORT`) with the same framing as the
/// device protocol. Requests carry no profile: the app id and device id are request fields.
public enum AuthorityMethod {
    /// `GetInfoRequest` → `GetInfoResponse`: version, protocol version, capabilities.
    public static let getInfo = "/rain.wallet.v1.Authority/GetInfo"
    /// `AuthoritySendLoginCodeRequest` → `AuthoritySendLoginCodeResponse`.
    public static let sendLoginCode = "/rain.wallet.v1.Authority/SendLoginCode"
    /// `AuthorityConfirmLoginCodeRequest` → `AuthorityConfirmLoginCodeResponse`.
    public static let confirmLoginCode = "/rain.wallet.v1.Authority/ConfirmLoginCode"
    /// `AuthorityRefreshSessionRequest` → `AuthorityRefreshSessionResponse`.
    public static let refreshSession = "/rain.wallet.v1.Authority/RefreshSession"
    /// `AuthorityAccountInfoRequest` → `AuthorityAccountInfoResponse`.
    public static let accountInfo = "/rain.wallet.v1.Authority/GetAccountInfo"
    /// `AuthorityRevokeSessionRequest` → `AuthorityRevokeSessionResponse`.
    public static let revokeSession = "/rain.wallet.v1.Authority/RevokeSession"
    /// `ListOutboxRequest` → `ListOutboxResponse` (development; only with `--dev-outbox`).
    public static let listOutbox = "/rain.wallet.v1.Authority/ListOutbox"
    /// `AuthorityWalletRequest` → `AuthorityWalletResponse`.
    public static let getWallet = "/rain.wallet.v1.Authority/GetWallet"
    /// `AuthorityWalletRequest` → `AuthorityExportWalletResponse` (secrets: never logged).
    public static let exportWallet = "/rain.wallet.v1.Authority/ExportWallet"

    /// `AuthorityPasskeyBeginRequest` → `AuthorityPasskeyBeginResponse`.
    public static let beginPasskeyRegistration = "/rain.wallet.v1.Authority/BeginPasskeyRegistration"
    /// `AuthorityPasskeyFinishRequest` → `AuthorityPasskeyFinishResponse`.
    public static let finishPasskeyRegistration = "/rain.wallet.v1.Authority/FinishPasskeyRegistration"
    /// `AuthorityPasskeyBeginRequest` → `AuthorityPasskeyBeginResponse`.
    public static let beginPasskeyAuthentication = "/rain.wallet.v1.Authority/BeginPasskeyAuthentication"
    /// `AuthorityPasskeyFinishRequest` → `AuthorityPasskeyFinishResponse`.
    public static let finishPasskeyAuthentication = "/rain.wallet.v1.Authority/FinishPasskeyAuthentication"
    /// `AuthorityPasskeyCancelRequest` → `AuthorityPasskeyCancelResponse`.
    public static let cancelPasskeyCeremony = "/rain.wallet.v1.Authority/CancelPasskeyCeremony"

    /// `AuthoritySendContactVerificationRequest` → `AuthoritySendLoginCodeResponse`.
    public static let sendContactVerificationCode = "/rain.wallet.v1.Authority/SendContactVerificationCode"
    /// `AuthorityConfirmContactVerificationRequest` → `AuthorityAccountInfoResponse`.
    public static let confirmContactVerification = "/rain.wallet.v1.Authority/ConfirmContactVerification"

    /// Every method, in the order above.
    public static let all = [
        getInfo, sendLoginCode, confirmLoginCode, refreshSession, accountInfo, revokeSession, listOutbox, getWallet,
        exportWallet, beginPasskeyRegistration, finishPasskeyRegistration, beginPasskeyAuthentication,
        finishPasskeyAuthentication, cancelPasskeyCeremony, sendContactVerificationCode, confirmContactVerification,
    ]
}

/// `Authority/SendLoginCode` request.
public struct AuthoritySendLoginCodeRequest: WireMessage, Equatable {
    public var appID: String
    public var deviceID: String
    /// A normalized contact; nil when the message named no contact kind.
    public var contact: RainWalletContact?

    /// Creates the request.
    public init(appID: String, deviceID: String, contact: RainWalletContact?) {
        self.appID = appID
        self.deviceID = deviceID
        self.contact = contact
    }
}

/// `Authority/SendLoginCode` response: the pending challenge.
public struct AuthoritySendLoginCodeResponse: WireMessage, Equatable {
    /// Opaque id of the challenge; the device presents it to confirm.
    public var challengeID: String
    public var contact: RainWalletContact?
    public var expiresAt: Date

    /// Creates the response.
    public init(challengeID: String, contact: RainWalletContact?, expiresAt: Date) {
        self.challengeID = challengeID
        self.contact = contact
        self.expiresAt = expiresAt
    }
}

/// `Authority/ConfirmLoginCode` request. Its description hides the code.
public struct AuthorityConfirmLoginCodeRequest: WireMessage, Equatable, CustomStringConvertible {
    public var appID: String
    public var deviceID: String
    public var challengeID: String
    /// What the user typed (a secret: never logged).
    public var code: String
    /// The device's raw 32-byte Ed25519 public key; empty for an unbound session.
    public var devicePublicKey: [UInt8]

    /// Creates the request.
    public init(appID: String, deviceID: String, challengeID: String, code: String, devicePublicKey: [UInt8] = []) {
        self.appID = appID
        self.deviceID = deviceID
        self.challengeID = challengeID
        self.code = code
        self.devicePublicKey = devicePublicKey
    }

    /// The request with the code redacted.
    public var description: String {
        "AuthorityConfirmLoginCodeRequest(appID: \(appID), deviceID: \(deviceID), challengeID: \(challengeID), "
            + "code: <redacted>, devicePublicKey: \(devicePublicKey.count) bytes)"
    }
}

/// A session's tokens on the wire. Its description hides the tokens.
public struct AuthoritySessionTokens: Sendable, Equatable, CustomStringConvertible {
    public var accessToken: String
    public var refreshToken: String
    /// How long the access token lives from now (sent in whole milliseconds).
    public var accessLifetime: Duration

    /// Creates the tokens.
    public init(accessToken: String, refreshToken: String, accessLifetime: Duration) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.accessLifetime = accessLifetime
    }

    /// The tokens redacted.
    public var description: String {
        "AuthoritySessionTokens(accessToken: <redacted>, refreshToken: <redacted>, accessLifetime: \(accessLifetime))"
    }
}

/// `Authority/ConfirmLoginCode` response: a successful login.
public struct AuthorityConfirmLoginCodeResponse: WireMessage, Equatable {
    public var accountID: String
    public var walletID: String
    /// True when this login created the account and its wallet.
    public var accountCreated: Bool
    public var tokens: AuthoritySessionTokens

    /// Creates the response.
    public init(accountID: String, walletID: String, accountCreated: Bool, tokens: AuthoritySessionTokens) {
        self.accountID = accountID
        self.walletID = walletID
        self.accountCreated = accountCreated
        self.tokens = tokens
    }
}

/// `Authority/RefreshSession` request: a refresh token with the device's signature. Its description
/// hides the token.
public struct AuthorityRefreshSessionRequest: WireMessage, Equatable, CustomStringConvertible {
    public var appID: String
    public var deviceID: String
    /// The current refresh token (a secret: never logged).
    public var refreshToken: String
    /// When the device signed (sent in Unix milliseconds, the precision it signs).
    public var timestamp: Date
    /// Ed25519 signature by the device key.
    public var signature: [UInt8]

    /// Creates the request.
    public init(appID: String, deviceID: String, refreshToken: String, timestamp: Date, signature: [UInt8]) {
        self.appID = appID
        self.deviceID = deviceID
        self.refreshToken = refreshToken
        self.timestamp = timestamp
        self.signature = signature
    }

    /// The request with the token redacted.
    public var description: String {
        "AuthorityRefreshSessionRequest(appID: \(appID), deviceID: \(deviceID), refreshToken: <redacted>, "
            + "timestamp: \(timestamp.unixMilliseconds), signature: \(signature.count) bytes)"
    }
}

/// `Authority/RefreshSession` response: the new pair.
public struct AuthorityRefreshSessionResponse: WireMessage, Equatable {
    public var tokens: AuthoritySessionTokens

    /// Creates the response.
    public init(tokens: AuthoritySessionTokens) { self.tokens = tokens }
}

/// `Authority/GetAccountInfo` request. Its description hides the token.
public struct AuthorityAccountInfoRequest: WireMessage, Equatable, CustomStringConvertible {
    public var appID: String
    /// A live access token (a secret: never logged).
    public var accessToken: String

    /// Creates the request.
    public init(appID: String, accessToken: String) {
        self.appID = appID
        self.accessToken = accessToken
    }

    /// The request with the token redacted.
    public var description: String { "AuthorityAccountInfoRequest(appID: \(appID), accessToken: <redacted>)" }
}

/// `Authority/GetAccountInfo` response.
public struct AuthorityAccountInfoResponse: WireMessage, Equatable {
    public var accountID: String
    public var walletID: String
    public var createdAt: Date
    /// Emails first, each kind in the order attached. Entries of an unknown kind are skipped.
    public var contacts: [RainWalletContact]
    /// True when the account has no verified email.
    public var needsBackupEmail: Bool
    /// The account's passkeys, oldest first.
    public var passkeys: [PasskeyInfo]

    /// Creates the response.
    public init(
        accountID: String, walletID: String, createdAt: Date, contacts: [RainWalletContact],
        needsBackupEmail: Bool = false, passkeys: [PasskeyInfo] = []
    ) {
        self.accountID = accountID
        self.walletID = walletID
        self.createdAt = createdAt
        self.contacts = contacts
        self.needsBackupEmail = needsBackupEmail
        self.passkeys = passkeys
    }
}

/// `Authority/SendContactVerificationCode` request. Its description hides the token.
public struct AuthoritySendContactVerificationRequest: WireMessage, Equatable, CustomStringConvertible {
    public var appID: String
    public var deviceID: String
    public var accessToken: String
    /// Already normalized by the device; nil when the message carried none.
    public var contact: RainWalletContact?

    /// Creates the request.
    public init(appID: String, deviceID: String, accessToken: String, contact: RainWalletContact?) {
        self.appID = appID
        self.deviceID = deviceID
        self.accessToken = accessToken
        self.contact = contact
    }

    /// The request with the token redacted.
    public var description: String {
        "AuthoritySendContactVerificationRequest(appID: \(appID), deviceID: \(deviceID), accessToken: <redacted>, "
            + "contact: \(contact?.kindName ?? "none"))"
    }
}

/// `Authority/ConfirmContactVerification` request. Its description hides the token and the code.
public struct AuthorityConfirmContactVerificationRequest: WireMessage, Equatable, CustomStringConvertible {
    public var appID: String
    public var deviceID: String
    public var accessToken: String
    public var challengeID: String
    /// What the user typed (never logged).
    public var code: String

    /// Creates the request.
    public init(appID: String, deviceID: String, accessToken: String, challengeID: String, code: String) {
        self.appID = appID
        self.deviceID = deviceID
        self.accessToken = accessToken
        self.challengeID = challengeID
        self.code = code
    }

    /// The request with the token and code redacted.
    public var description: String {
        "AuthorityConfirmContactVerificationRequest(appID: \(appID), deviceID: \(deviceID), accessToken: <redacted>, "
            + "challengeID: \(challengeID), code: <redacted>)"
    }
}

/// `Authority/RevokeSession` request. Its description hides the token.
public struct AuthorityRevokeSessionRequest: WireMessage, Equatable, CustomStringConvertible {
    public var appID: String
    /// The session's refresh token (a secret: never logged).
    public var refreshToken: String

    /// Creates the request.
    public init(appID: String, refreshToken: String) {
        self.appID = appID
        self.refreshToken = refreshToken
    }

    /// The request with the token redacted.
    public var description: String { "AuthorityRevokeSessionRequest(appID: \(appID), refreshToken: <redacted>)" }
}

/// `Authority/RevokeSession` response (empty).
public struct AuthorityRevokeSessionResponse: WireMessage, Equatable {
    /// Creates the response.
    public init() {}
}

/// `Authority/GetWallet` and `Authority/ExportWallet` request. Its description hides the token.
public struct AuthorityWalletRequest: WireMessage, Equatable, CustomStringConvertible {
    public var appID: String
    /// A live access token (a secret: never logged).
    public var accessToken: String

    /// Creates the request.
    public init(appID: String, accessToken: String) {
        self.appID = appID
        self.accessToken = accessToken
    }

    /// The request with the token redacted.
    public var description: String { "AuthorityWalletRequest(appID: \(appID), accessToken: <redacted>)" }
}

/// `Authority/GetWallet` response.
public struct AuthorityWalletResponse: WireMessage, Equatable {
    public var walletID: String
    public var createdAt: Date
    /// EIP-55 checksummed.
    public var ethereumAddress: String
    /// Base58.
    public var solanaAddress: String

    /// Creates the response.
    public init(walletID: String, createdAt: Date, ethereumAddress: String, solanaAddress: String) {
        self.walletID = walletID
        self.createdAt = createdAt
        self.ethereumAddress = ethereumAddress
        self.solanaAddress = solanaAddress
    }
}

/// `Authority/ExportWallet` response: a wallet's secrets. Its description hides them.
public struct AuthorityExportWalletResponse: WireMessage, Equatable, CustomStringConvertible,
    CustomDebugStringConvertible
{
    /// The 12-word recovery phrase.
    public var mnemonic: [String]
    /// `0x` + 64 lowercase hex digits.
    public var ethereumPrivateKey: String
    /// Base58 of the 64-byte keypair.
    public var solanaKeypair: String

    /// Creates the response.
    public init(mnemonic: [String], ethereumPrivateKey: String, solanaKeypair: String) {
        self.mnemonic = mnemonic
        self.ethereumPrivateKey = ethereumPrivateKey
        self.solanaKeypair = solanaKeypair
    }

    /// The response redacted.
    public var description: String {
        "AuthorityExportWalletResponse(mnemonic: <redacted \(mnemonic.count) words>, ethereumPrivateKey: <redacted>, "
            + "solanaKeypair: <redacted>)"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
}
