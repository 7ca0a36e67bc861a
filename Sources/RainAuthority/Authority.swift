import Foundation
import RainCore
import RainCrypto

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
    /// session bound to the device (its id, and its Ed25519 public key when one is sent), and revokes
    /// the account's sessions on every other device.
    /// - Throws: RAIN_203 (details: `reason` wrong|expired|locked|retired, `attemptsRemaining`)
    ///   keeping the challenge on a wrong code; RAIN_102 for an unknown challenge, or (field
    ///   `devicePublicKey`) for a device key that is not a raw 32-byte Ed25519 public key.
    func confirmLoginCode(_ request: ConfirmCodeRequest) async throws(RainError) -> LoginResult

    /// Rotates a session's tokens: the device presents its refresh token, signed with the device key
    /// the session is bound to, and gets a new access token and a new single-use refresh token.
    ///
    /// Rules (DESIGN §4, §5):
    /// - The request must carry a valid Ed25519 signature over `RefreshRequest.signedMessage` by the
    ///   session's device key, from the session's device id, with a timestamp within
    ///   `AuthoritySettings.refreshSignatureSkew` of the authority's clock. Otherwise the session
    ///   family is revoked: a refresh token copied without the device key is useless and burns the
    ///   session.
    /// - Refresh tokens are single use. Presenting the token rotated out at the last refresh again
    ///   within `AuthoritySettings.refreshGraceWindow` (a retry after a lost reply, or a concurrent
    ///   duplicate) returns the same new pair and rotates nothing; any other reuse revokes the family.
    /// - A session lives `AuthoritySettings.refreshTokenLifetime` from its last rotation (from the
    ///   login when it was never rotated).
    /// - Throws: RAIN_201 with `details.reason`: `refresh_rejected` (unknown token, missing or bad
    ///   signature, wrong device id, stale timestamp), `refresh_token_reused`, `device_unbound` (a
    ///   session issued without a device key), `revoked_elsewhere` (the account logged in on another
    ///   device), `revoked` (logout, or a newer login on this device), `refresh_expired`. RAIN_502
    ///   when the store fails.
    func refreshSession(_ request: RefreshRequest) async throws(RainError) -> SessionTokens

    /// The account behind a live access token, with its wallet id and contacts.
    /// - Throws: RAIN_201 with `details.reason`: `invalid_token` (unknown, or rotated away by a
    ///   refresh), `access_expired`, `revoked_elsewhere`, `revoked`. RAIN_502 when the store fails.
    func accountInfo(appID: String, accessToken: String) async throws(RainError) -> AccountInfo

    /// The wallet of the account behind a live access token: its id, creation time and addresses.
    /// A wallet still missing a key is completed first.
    /// - Throws: RAIN_201 like `accountInfo` for a bad, expired or revoked token; RAIN_404 when the
    ///   account has no wallet; RAIN_502 when the store fails or the entropy does not decrypt.
    func wallet(appID: String, accessToken: String) async throws(RainError) -> WalletInfo

    /// The wallet's secrets: decrypts its entropy and derives the recovery phrase and both private
    /// keys. Never logged. The device decides whether the profile may export (DESIGN §3).
    /// - Throws: RAIN_201 like `accountInfo`; RAIN_404 when the account has no wallet; RAIN_502
    ///   when the store fails or the entropy does not decrypt (another master key).
    func exportWallet(appID: String, accessToken: String) async throws(RainError) -> WalletSecrets

    /// Revokes the session that holds `refreshToken` (logout). Unknown or already revoked tokens
    /// succeed silently.
    func revokeSession(appID: String, refreshToken: String) async throws(RainError)

    /// Starts a passkey registration: a sign-up (`accessToken` nil: a new account on finish) or
    /// an added passkey (the live session's account). The challenge (32 random bytes) is stored,
    /// single use, bound to the app, device, kind and rpId, and expires after
    /// `AuthoritySettings.passkeyCeremonyLifetime`.
    /// - Returns: the ceremony id and a W3C `PublicKeyCredentialCreationOptionsJSON`.
    /// - Throws: RAIN_102 for an empty rpId or no origin; RAIN_201 like `accountInfo` for a bad
    ///   access token; RAIN_502 when the store fails.
    func beginPasskeyRegistration(_ request: PasskeyBeginRequest) async throws(RainError) -> PasskeyCeremony

    /// Finishes a registration: verifies the `RegistrationResponseJSON` (WebAuthn §7.1) and
    /// stores the credential with its rpId. A sign-up creates a new account and wallet and a
    /// session bound to the device key (as a code login does); an added passkey returns nil.
    /// - Throws: RAIN_102 `challenge_expired` for an unknown, used, cancelled or expired ceremony
    ///   (or one of the other kind), `credential_already_registered` for a credential id any
    ///   account holds, or the failed check's reason; RAIN_502 when the store fails.
    func finishPasskeyRegistration(_ request: PasskeyFinishRequest) async throws(RainError) -> LoginResult?

    /// Starts a passkey login (discoverable: no allow list).
    /// - Returns: the ceremony id and a W3C `PublicKeyCredentialRequestOptionsJSON`.
    /// - Throws: RAIN_102 for an empty rpId or no origin; RAIN_502 when the store fails.
    func beginPasskeyAuthentication(_ request: PasskeyBeginRequest) async throws(RainError) -> PasskeyCeremony

    /// Finishes a login: finds the credential by id and rpId, verifies the
    /// `AuthenticationResponseJSON` (WebAuthn §7.2), moves its sign count forward (a regression is
    /// refused) and logs in like a code login: the device's session is bound to its key and the
    /// account's sessions on other devices are revoked.
    /// - Throws: RAIN_102 `challenge_expired`, `credential_unknown`, `sign_count_regression` or
    ///   the failed check's reason; RAIN_502 when the store fails.
    func finishPasskeyAuthentication(_ request: PasskeyFinishRequest) async throws(RainError) -> LoginResult

    /// Cancels a pending ceremony (the user dismissed the authenticator): it can no longer be
    /// finished. Unknown or already finished ceremonies succeed silently.
    func cancelPasskeyCeremony(appID: String, deviceID: String, ceremonyID: String) async throws(RainError)

    /// Sends a 6-digit code that verifies `contact` (already normalized) as a backup contact of the
    /// account behind a live access token. Same code rules as login codes (keyed hash, 5-minute
    /// expiry, 3 wrong attempts lock it, a resend from the device replaces it, at most
    /// `maxActiveCodesPerAccount` live codes per account). The challenge is a verification
    /// challenge bound to the account: `confirmLoginCode` refuses it, and
    /// `confirmContactVerification` refuses login challenges.
    /// - Throws: RAIN_102 for a contact that is not normalized; RAIN_201 like `accountInfo`;
    ///   RAIN_302 (`details.reason` `contact_owned_by_another_account`) when another account of the
    ///   app owns the contact; RAIN_501 when the code sender fails; RAIN_502 when the store fails.
    func sendContactVerificationCode(appID: String, deviceID: String, accessToken: String, contact: RainWalletContact)
        async throws(RainError) -> SendCodeResult

    /// Confirms a contact verification: on the right code, attaches the contact to the account,
    /// verified, in one transaction that checks again that no other account took it meanwhile. The
    /// contact then logs in to this account and wallet. A contact already on the account succeeds
    /// again (idempotent); a second contact of a kind is added, never replacing the first.
    /// - Returns: the account with the contact.
    /// - Throws: RAIN_203 like `confirmLoginCode` (wrong keeps the challenge, with
    ///   `attemptsRemaining`; expired, locked, used, retired); RAIN_102 `no_pending_code` for an
    ///   unknown challenge, a login challenge, or one of another device or account; RAIN_201 like
    ///   `accountInfo`; RAIN_302 `contact_owned_by_another_account`; RAIN_502 when the store fails.
    func confirmContactVerification(
        appID: String, deviceID: String, accessToken: String, challengeID: String, code: String
    ) async throws(RainError) -> AccountInfo

    /// The code deliveries of the development outbox, oldest first.
    /// - Throws: RAIN_202 when the development outbox is disabled.
    func listOutbox() async throws(RainError) -> [OutboxDelivery]

    /// `accountInfo` and `wallet` answered without the Swift concurrency pool, when this authority
    /// can (an embedded one on a store with a `DirectStoreReader`); nil by default.
    var directReads: (any DirectAuthorityReads)? { get }
}

extension Authority {
    /// No direct reads: every call goes through the async API.
    public var directReads: (any DirectAuthorityReads)? { nil }
}

/// `Authority.accountInfo` and `Authority.wallet` with a completion that runs on the store's reader
/// thread (see `DirectStoreReader`), for the daemon's hottest calls.
///
/// Only the common case is answered here: a failure may be one the async API would have handled
/// (a wallet whose keys still need completing), so a caller retries any failure through the async
/// API, which gives the definitive answer. `completion` must not block.
public protocol DirectAuthorityReads: Sendable {
    /// The account behind a live access token, as `Authority.accountInfo` returns it.
    func accountInfo(appID: String, accessToken: String, completion: @escaping @Sendable (Result<AccountInfo, RainError>) -> Void)

    /// The wallet behind a live access token, as `Authority.wallet` returns it.
    func wallet(appID: String, accessToken: String, completion: @escaping @Sendable (Result<WalletInfo, RainError>) -> Void)
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
    /// The device's raw 32-byte Ed25519 public key, which the session is bound to: every refresh
    /// must be signed with the matching private key (DESIGN §5).
    ///
    /// The device always sends it. Empty (the default, for callers that predate device binding)
    /// still logs in, but the session is unbound and can never be refreshed (RAIN_201
    /// `device_unbound`): it ends when its access token expires.
    public var devicePublicKey: [UInt8]

    public init(appID: String, deviceID: String, challengeID: String, code: String, devicePublicKey: [UInt8] = []) {
        self.appID = appID
        self.deviceID = deviceID
        self.challengeID = challengeID
        self.code = code
        self.devicePublicKey = devicePublicKey
    }
}

/// `Authority.refreshSession` input: a refresh token with the device's proof of possession.
public struct RefreshRequest: Sendable {
    public var appID: String
    /// The device the session was issued to.
    public var deviceID: String
    /// The current refresh token (never logged).
    public var refreshToken: String
    /// When the device signed; must be within `AuthoritySettings.refreshSignatureSkew` of the
    /// authority's clock. Signed at millisecond precision.
    public var timestamp: Date
    /// Ed25519 signature by the device key over `signedMessage(appID:deviceID:refreshToken:timestamp:)`.
    public var signature: [UInt8]

    public init(appID: String, deviceID: String, refreshToken: String, timestamp: Date, signature: [UInt8]) {
        self.appID = appID
        self.deviceID = deviceID
        self.refreshToken = refreshToken
        self.timestamp = timestamp
        self.signature = signature
    }

    /// The bytes the device signs: the UTF-8 of
    /// `"rain.refresh.v1\n<appID>\n<deviceID>\n<base64url(SHA-256(refreshToken))>\n<timestamp in Unix ms>"`.
    ///
    /// The token's hash is signed rather than the token, so a signature never carries it.
    public static func signedMessage(appID: String, deviceID: String, refreshToken: String, timestamp: Date)
        -> [UInt8]
    {
        let tokenHash = Base64URL.encode(SHA256.hash(Array(refreshToken.utf8)))
        return Array("rain.refresh.v1\n\(appID)\n\(deviceID)\n\(tokenHash)\n\(timestamp.unixMilliseconds)".utf8)
    }

    /// A request signed with the device key.
    /// - Throws: RAIN_502 when signing fails.
    public static func signed(
        appID: String, deviceID: String, refreshToken: String, timestamp: Date, deviceKey: Ed25519PrivateKey
    ) throws(RainError) -> RefreshRequest {
        let message = signedMessage(appID: appID, deviceID: deviceID, refreshToken: refreshToken, timestamp: timestamp)
        return RefreshRequest(
            appID: appID, deviceID: deviceID, refreshToken: refreshToken, timestamp: timestamp,
            signature: try deviceKey.signature(for: message))
    }
}

extension RefreshRequest: CustomStringConvertible, CustomDebugStringConvertible {
    /// The request without its token or signature.
    public var description: String {
        "RefreshRequest(appID: \(appID), deviceID: \(deviceID), refreshToken: <redacted>, "
            + "timestamp: \(timestamp.unixMilliseconds), signature: \(signature.count) bytes)"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
}

/// `Authority.accountInfo` output.
public struct AccountInfo: Sendable, Equatable {
    /// `acct_…`
    public var accountID: String
    /// `wal_…`
    public var walletID: String
    /// When the account was created.
    public var createdAt: Date
    /// The account's contacts, emails first, each kind in the order they were attached. Every
    /// contact is verified: one is attached only by a confirmed code (login or verification).
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

/// `Authority.wallet` output: what may be shown of a wallet.
public struct WalletInfo: Sendable, Equatable {
    /// `wal_…`
    public var walletID: String
    /// When the wallet was created (with its account).
    public var createdAt: Date
    /// EIP-55 checksummed address of m/44'/60'/0'/0/0.
    public var ethereumAddress: String
    /// Base58 address of m/44'/501'/0'/0'.
    public var solanaAddress: String

    public init(walletID: String, createdAt: Date, ethereumAddress: String, solanaAddress: String) {
        self.walletID = walletID
        self.createdAt = createdAt
        self.ethereumAddress = ethereumAddress
        self.solanaAddress = solanaAddress
    }
}

/// `Authority.exportWallet` output: a wallet's secrets. Its description hides them.
public struct WalletSecrets: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The 12-word BIP-39 English recovery phrase.
    public var mnemonic: [String]
    /// The Ethereum private key: `0x` + 64 lowercase hex digits.
    public var ethereumPrivateKeyHex: String
    /// The Solana keypair (32-byte seed, then 32-byte public key) in base58.
    public var solanaKeypairBase58: String

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

/// Tokens of a session. The device computes deadlines on its own clock from `accessLifetime`.
public struct SessionTokens: Sendable, Equatable {
    public var accessToken: String
    public var refreshToken: String
    /// How long the access token lives from now (900 s by default; what is left of it when a
    /// refresh repeated within the grace window returns the pair issued a moment earlier).
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
    /// The refresh grace window (10 s by default): for this long after a rotation, presenting the
    /// refresh token it replaced, correctly signed, returns the same new pair again instead of
    /// counting as reuse. It covers a device retrying after a lost reply and concurrent duplicates;
    /// it is the only reuse that does not revoke the session family. Measured on the authority's
    /// clock from the rotation; only the one generation just rotated out is covered.
    public var refreshGraceWindow: Duration
    /// How long a session can go unrefreshed (30 days by default), counted from its last rotation
    /// (from the login when it was never refreshed): a device that keeps refreshing keeps its
    /// session; one that stays away longer must log in again (RAIN_201 `refresh_expired`).
    public var refreshTokenLifetime: Duration
    /// How far a refresh signature's timestamp may be from the authority's clock, either way
    /// (120 s by default). A signature outside it is refused like a bad one.
    public var refreshSignatureSkew: Duration
    /// How long a passkey ceremony's challenge is accepted (5 minutes by default).
    public var passkeyCeremonyLifetime: Duration
    /// The code send limits (DESIGN §6: 30 s cooldown and 5 per 15 minutes per contact, 10 per
    /// hour per account); a send over one is refused with RAIN_302 and a retry-after.
    public var sendLimits: CodeSendLimits
    /// How often the daemons prune old rows (`PeriodicPruning`; 10 minutes by default).
    public var pruneInterval: Duration
    /// How long expired challenges and ceremonies, revoked sessions and outbox deliveries are kept
    /// before pruning deletes them (1 day by default).
    public var pruneRetention: Duration

    public init(
        codeLifetime: Duration = .seconds(300), maxWrongAttempts: Int = 3, maxActiveCodesPerAccount: Int = 3,
        accessTokenLifetime: Duration = .seconds(900), isDevOutboxEnabled: Bool = true,
        refreshGraceWindow: Duration = .seconds(10), refreshTokenLifetime: Duration = .seconds(30 * 86_400),
        refreshSignatureSkew: Duration = .seconds(120), passkeyCeremonyLifetime: Duration = .seconds(300),
        sendLimits: CodeSendLimits = CodeSendLimits(), pruneInterval: Duration = .seconds(600),
        pruneRetention: Duration = .seconds(86_400)
    ) {
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
        self.refreshSignatureSkew = refreshSignatureSkew
        self.passkeyCeremonyLifetime = passkeyCeremonyLifetime
    }

    /// How long pruning keeps an expired challenge: `pruneRetention`, but never less than the
    /// longest send-limit window, so every send the limits still count stays stored.
    public var challengeRetention: Duration { max(pruneRetention, sendLimits.longestWindow) }
}
