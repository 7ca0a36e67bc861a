import Foundation
import RainCore

/// What an authority's `GetInfo` may list among its capabilities, beyond its methods.
public enum AuthorityCapability {
    /// Its `WatchRevocations` streams get a heartbeat as they open and then at the interval it
    /// announces: a device bounds the wait for the first one (`RevocationFeed`). An authority
    /// without it (older, or run with no heartbeat) is never timed out.
    public static let revocationHeartbeat = "revocation-heartbeat"
}

/// Full method names of the authority hop (`proto/authority.proto`): a device daemon calling a
/// remote authority (`rainwalletd authority --listen HOST:PORT`) with the same framing as the
/// device protocol. Requests carry no profile: the app id and device id are request fields.
///
/// Each line names the Swift request → response types (the proto message names are in the
/// `+ProtobufC` files). The authority's own value types are the messages: `Authority` takes and
/// returns exactly what travels.
public enum AuthorityMethod {
    /// `GetInfoRequest` → `GetInfoResponse`: version, protocol version, capabilities.
    public static let getInfo = "/rain.wallet.v1.Authority/GetInfo"
    /// `SendCodeRequest` → `SendCodeResult`.
    public static let sendLoginCode = "/rain.wallet.v1.Authority/SendLoginCode"
    /// `ConfirmCodeRequest` → `LoginResult`.
    public static let confirmLoginCode = "/rain.wallet.v1.Authority/ConfirmLoginCode"
    /// `RefreshRequest` → `AuthorityRefreshSessionResponse` (its `SessionTokens`).
    public static let refreshSession = "/rain.wallet.v1.Authority/RefreshSession"
    /// `AuthorityAccountInfoRequest` → `AccountInfo`.
    public static let accountInfo = "/rain.wallet.v1.Authority/GetAccountInfo"
    /// `AuthorityRevokeSessionRequest` → `AuthorityRevokeSessionResponse`.
    public static let revokeSession = "/rain.wallet.v1.Authority/RevokeSession"
    /// `ListOutboxRequest` → `ListOutboxResponse` (development; only with `--dev-outbox`).
    public static let listOutbox = "/rain.wallet.v1.Authority/ListOutbox"
    /// `AuthorityWalletRequest` → `WalletInfo`.
    public static let getWallet = "/rain.wallet.v1.Authority/GetWallet"
    /// `AuthorityWalletRequest` → `WalletSecrets` (secrets: never logged).
    public static let exportWallet = "/rain.wallet.v1.Authority/ExportWallet"

    /// `PasskeyBeginRequest` → `PasskeyCeremony`.
    public static let beginPasskeyRegistration = "/rain.wallet.v1.Authority/BeginPasskeyRegistration"
    /// `PasskeyFinishRequest` → `PasskeyFinishResult`.
    public static let finishPasskeyRegistration = "/rain.wallet.v1.Authority/FinishPasskeyRegistration"
    /// `PasskeyBeginRequest` → `PasskeyCeremony`.
    public static let beginPasskeyAuthentication = "/rain.wallet.v1.Authority/BeginPasskeyAuthentication"
    /// `PasskeyFinishRequest` → `PasskeyFinishResult`.
    public static let finishPasskeyAuthentication = "/rain.wallet.v1.Authority/FinishPasskeyAuthentication"
    /// `AuthorityPasskeyCancelRequest` → `AuthorityPasskeyCancelResponse`.
    public static let cancelPasskeyCeremony = "/rain.wallet.v1.Authority/CancelPasskeyCeremony"

    /// `AuthoritySendContactVerificationRequest` → `SendCodeResult`.
    public static let sendContactVerificationCode = "/rain.wallet.v1.Authority/SendContactVerificationCode"
    /// `AuthorityConfirmContactVerificationRequest` → `AccountInfo`.
    public static let confirmContactVerification = "/rain.wallet.v1.Authority/ConfirmContactVerification"

    /// `AuthorityBeginDeviceProofRequest` → `AuthorityBeginDeviceProofResponse`: the connection's challenge.
    public static let beginDeviceProof = "/rain.wallet.v1.Authority/BeginDeviceProof"
    /// `AuthorityProveDeviceRequest` → `AuthorityProveDeviceResponse`: proves a device key on the connection.
    public static let proveDevice = "/rain.wallet.v1.Authority/ProveDevice"
    /// `AuthorityRebindDeviceRequest` → `AuthorityRebindDeviceResponse`: step 1 of a device key move.
    public static let rebindDevice = "/rain.wallet.v1.Authority/RebindDevice"
    /// `AuthorityConfirmDeviceKeyRequest` → `AuthorityConfirmDeviceKeyResponse`: step 2.
    public static let confirmDeviceKey = "/rain.wallet.v1.Authority/ConfirmDeviceKey"

    /// `AuthorityWatchRevocationsRequest` → a stream of `AuthorityRevocation`: the proven
    /// device's revocations, pushed.
    public static let watchRevocations = "/rain.wallet.v1.Authority/WatchRevocations"

    /// Every method, in the order above.
    public static let all = [
        getInfo, sendLoginCode, confirmLoginCode, refreshSession, accountInfo, revokeSession, listOutbox, getWallet,
        exportWallet, beginPasskeyRegistration, finishPasskeyRegistration, beginPasskeyAuthentication,
        finishPasskeyAuthentication, cancelPasskeyCeremony, sendContactVerificationCode, confirmContactVerification,
        beginDeviceProof, proveDevice, rebindDevice, confirmDeviceKey, watchRevocations,
    ]
}

/// `Authority.sendLoginCode` input (`Authority/SendLoginCode` request).
public struct SendCodeRequest: WireMessage, Equatable {
    public var appID: String
    public var deviceID: String
    /// A normalized contact. A message without one does not decode (RAIN_102, field `contact`).
    public var contact: RainWalletContact

    /// Creates the request.
    public init(appID: String, deviceID: String, contact: RainWalletContact) {
        self.appID = appID
        self.deviceID = deviceID
        self.contact = contact
    }
}

/// `Authority.sendLoginCode` and `Authority.sendContactVerificationCode` output: the pending
/// challenge (`Authority/SendLoginCode` response).
public struct SendCodeResult: WireMessage, Equatable {
    /// Opaque id of the pending challenge; the device keeps it to confirm.
    public var challengeID: String
    public var contact: RainWalletContact
    public var expiresAt: Date

    /// Creates the result.
    public init(challengeID: String, contact: RainWalletContact, expiresAt: Date) {
        self.challengeID = challengeID
        self.contact = contact
        self.expiresAt = expiresAt
    }
}

/// `Authority.confirmLoginCode` input (`Authority/ConfirmLoginCode` request). Its description hides
/// the code.
public struct ConfirmCodeRequest: WireMessage, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public var appID: String
    public var deviceID: String
    public var challengeID: String
    /// What the user typed (a secret: never logged).
    public var code: String
    /// The device's raw 32-byte Ed25519 public key, which the session is bound to: every refresh
    /// must be signed with the matching private key (docs/security.md).
    ///
    /// The device always sends it. Empty (the default, for callers that predate device binding)
    /// still logs in, but the session is unbound and can never be refreshed (RAIN_201
    /// `device_unbound`): it ends when its access token expires.
    public var devicePublicKey: [UInt8]
    /// Random bytes (16 to 64) the device chose for this logical confirm and keeps across
    /// its repeats; a repeat within the challenge's lifetime gets the first outcome (the same
    /// tokens) instead of a second login. Empty: no idempotency. A secret: never logged.
    public var idempotencyKey: [UInt8]

    /// Creates the request.
    public init(
        appID: String, deviceID: String, challengeID: String, code: String, devicePublicKey: [UInt8] = [],
        idempotencyKey: [UInt8] = []
    ) {
        self.appID = appID
        self.deviceID = deviceID
        self.challengeID = challengeID
        self.code = code
        self.devicePublicKey = devicePublicKey
        self.idempotencyKey = idempotencyKey
    }

    /// The request with the code and the idempotency key redacted.
    public var description: String {
        "ConfirmCodeRequest(appID: \(appID), deviceID: \(deviceID), challengeID: \(challengeID), "
            + "code: <redacted>, devicePublicKey: \(devicePublicKey.count) bytes, idempotencyKey: "
            + (idempotencyKey.isEmpty ? "none)" : "<redacted>)")
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
}

/// `Authority.refreshSession` input (`Authority/RefreshSession` request): a refresh token. The
/// device key is proven on the connection (`Authority/ProveDevice`), not per request, so a refresh
/// needs no device clock. Its description hides the token.
public struct RefreshRequest: WireMessage, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public var appID: String
    /// The device the session was issued to.
    public var deviceID: String
    /// The current refresh token (never logged).
    public var refreshToken: String

    /// Creates the request.
    public init(appID: String, deviceID: String, refreshToken: String) {
        self.appID = appID
        self.deviceID = deviceID
        self.refreshToken = refreshToken
    }

    /// The request without its token.
    public var description: String {
        "RefreshRequest(appID: \(appID), deviceID: \(deviceID), refreshToken: <redacted>)"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
}

/// Tokens of a session. The device computes deadlines on its own clock from `accessLifetime`. Its
/// description hides the tokens.
public struct SessionTokens: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public var accessToken: String
    public var refreshToken: String
    /// How long the access token lives from now (900 s by default; what is left of it when a
    /// refresh repeated within the grace window returns the pair issued a moment earlier). Sent in
    /// whole milliseconds.
    public var accessLifetime: Duration

    /// Creates the tokens.
    public init(accessToken: String, refreshToken: String, accessLifetime: Duration) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.accessLifetime = accessLifetime
    }

    /// No tokens: what an absent tokens message reads as (the receiver refuses it where it matters).
    public static let empty = SessionTokens(accessToken: "", refreshToken: "", accessLifetime: .zero)

    /// Whether both tokens are there and the lifetime is not negative.
    public var isComplete: Bool { !accessToken.isEmpty && !refreshToken.isEmpty && accessLifetime >= .zero }

    /// The tokens redacted.
    public var description: String {
        "SessionTokens(accessToken: <redacted>, refreshToken: <redacted>, accessLifetime: \(accessLifetime))"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
}

/// A successful login (`Authority/ConfirmLoginCode` response).
public struct LoginResult: WireMessage, Equatable {
    public var accountID: String
    public var walletID: String
    /// True when this login created the account and its wallet.
    public var accountCreated: Bool
    public var tokens: SessionTokens

    /// Creates the result.
    public init(accountID: String, walletID: String, accountCreated: Bool, tokens: SessionTokens) {
        self.accountID = accountID
        self.walletID = walletID
        self.accountCreated = accountCreated
        self.tokens = tokens
    }
}

/// `Authority/RefreshSession` response: the new pair.
public struct AuthorityRefreshSessionResponse: WireMessage, Equatable {
    public var tokens: SessionTokens

    /// Creates the response.
    public init(tokens: SessionTokens) { self.tokens = tokens }
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
    /// Random bytes (16 to 64) the device chose for this logical confirm and keeps across
    /// its repeats; a repeat within the challenge's lifetime gets the first outcome (the contact
    /// verified) instead of a used challenge. Empty: no idempotency. A secret: never logged.
    public var idempotencyKey: [UInt8]

    /// Creates the request.
    public init(
        appID: String, deviceID: String, accessToken: String, challengeID: String, code: String,
        idempotencyKey: [UInt8] = []
    ) {
        self.appID = appID
        self.deviceID = deviceID
        self.accessToken = accessToken
        self.challengeID = challengeID
        self.code = code
        self.idempotencyKey = idempotencyKey
    }

    /// The request with the token, the code and the idempotency key redacted.
    public var description: String {
        "AuthorityConfirmContactVerificationRequest(appID: \(appID), deviceID: \(deviceID), accessToken: <redacted>, "
            + "challengeID: \(challengeID), code: <redacted>, idempotencyKey: "
            + (idempotencyKey.isEmpty ? "none)" : "<redacted>)")
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

/// `Authority.accountInfo` output (`Authority/GetAccountInfo` response).
public struct AccountInfo: WireMessage, Equatable {
    /// `acct_…`
    public var accountID: String
    /// `wal_…`
    public var walletID: String
    /// When the account was created.
    public var createdAt: Date
    /// The account's contacts, emails first, each kind in the order they were attached. Every
    /// contact is verified: one is attached only by a confirmed code (login or verification).
    /// Entries of an unknown kind are skipped when decoding.
    public var contacts: [RainWalletContact]
    /// True when the account has no verified email (a passkey-only or phone-only account): apps
    /// should ask for a backup email before the wallet is funded.
    public var needsBackupEmail: Bool
    /// The account's passkeys, oldest first (every domain).
    public var passkeys: [PasskeyInfo]

    /// Creates the info; `needsBackupEmail` defaults to whether `contacts` holds no email.
    public init(
        accountID: String, walletID: String, createdAt: Date, contacts: [RainWalletContact],
        needsBackupEmail: Bool? = nil, passkeys: [PasskeyInfo] = []
    ) {
        self.accountID = accountID
        self.walletID = walletID
        self.createdAt = createdAt
        self.contacts = contacts
        self.needsBackupEmail = needsBackupEmail ?? !Self.hasEmail(contacts)
        self.passkeys = passkeys
    }

    /// Whether `contacts` holds an email address.
    public static func hasEmail(_ contacts: [RainWalletContact]) -> Bool {
        contacts.contains { if case .email = $0 { true } else { false } }
    }
}

/// `Authority.wallet` output: what may be shown of a wallet (`Authority/GetWallet` response).
public struct WalletInfo: WireMessage, Equatable {
    /// `wal_…`
    public var walletID: String
    /// When the wallet was created (with its account).
    public var createdAt: Date
    /// EIP-55 checksummed address of m/44'/60'/0'/0/0.
    public var ethereumAddress: String
    /// Base58 address of m/44'/501'/0'/0'.
    public var solanaAddress: String

    /// Creates the info.
    public init(walletID: String, createdAt: Date, ethereumAddress: String, solanaAddress: String) {
        self.walletID = walletID
        self.createdAt = createdAt
        self.ethereumAddress = ethereumAddress
        self.solanaAddress = solanaAddress
    }
}

/// `Authority.exportWallet` output: a wallet's secrets (`Authority/ExportWallet` response). Its
/// description hides them.
public struct WalletSecrets: WireMessage, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The 12-word BIP-39 English recovery phrase.
    public var mnemonic: [String]
    /// The Ethereum private key: `0x` + 64 lowercase hex digits.
    public var ethereumPrivateKeyHex: String
    /// The Solana keypair (32-byte seed, then 32-byte public key) in base58.
    public var solanaKeypairBase58: String

    /// Creates the secrets.
    public init(mnemonic: [String], ethereumPrivateKeyHex: String, solanaKeypairBase58: String) {
        self.mnemonic = mnemonic
        self.ethereumPrivateKeyHex = ethereumPrivateKeyHex
        self.solanaKeypairBase58 = solanaKeypairBase58
    }

    /// The secrets redacted.
    public var description: String {
        "WalletSecrets(mnemonic: <redacted \(mnemonic.count) words>, ethereumPrivateKeyHex: <redacted>, "
            + "solanaKeypairBase58: <redacted>)"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
}
