import Foundation
import RainCore
import RainCrypto
import RainWire

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
    ///
    /// Every code check first spends a slot of the wrong-guess budgets
    /// (`CodeSendLimits.deviceKeyMaxWrongGuesses` per device key, `sourceMaxWrongGuesses` per
    /// source, over `guessWindow`, across every account); a right code gives it back. Once a budget
    /// is spent no code is checked, right or wrong.
    /// - Throws: RAIN_203 (details: `reason` wrong|expired|locked|retired, `attemptsRemaining`)
    ///   keeping the challenge on a wrong code; RAIN_302 (`reason` and `limit`
    ///   `device_key_guess_window` or `source_guess_window`, `retryAfterMs`) when a wrong-guess budget
    ///   is spent; RAIN_102 for an unknown challenge, or (field `devicePublicKey`) for a device key
    ///   that is not a raw 32-byte Ed25519 public key.
    func confirmLoginCode(_ request: ConfirmCodeRequest) async throws(RainError) -> LoginResult

    /// Rotates a session's tokens: the device presents its refresh token, on a connection where it
    /// proved the device key the session is bound to (`proof`), and gets a new access token and a
    /// new single-use refresh token. No device clock is involved.
    ///
    /// Rules (docs/errors.md and docs/security.md):
    /// - The device binding of every call with a token (see `accountInfo`): no proof is RAIN_501
    ///   `device_proof_required` and changes nothing; a proof by another key than the session's
    ///   (or its pending one) revokes the session family: a refresh token copied without the device
    ///   key is useless and burns the session.
    /// - Refresh tokens are single use. Presenting the token rotated out at the last refresh again
    ///   within `AuthoritySettings.refreshGraceWindow` (a retry after a lost reply, or a concurrent
    ///   duplicate) returns the same new pair and rotates nothing; any other reuse revokes the family.
    /// - A session lives `AuthoritySettings.refreshTokenLifetime` from its last rotation (from the
    ///   login when it was never rotated).
    /// - Throws: RAIN_201 with `details.reason`: `refresh_rejected` (unknown token, another device
    ///   id, a proof by another key), `refresh_token_reused`, `device_unbound` (a session issued
    ///   without a device key), `revoked_elsewhere` (the account logged in on another device),
    ///   `revoked` (logout, or a newer login on this device), `refresh_expired`. RAIN_501
    ///   `device_proof_required` without a proof. RAIN_502 when the store fails.
    func refreshSession(_ request: RefreshRequest, proof: DeviceProof) async throws(RainError) -> SessionTokens

    /// The account behind a live access token, with its wallet id and contacts.
    ///
    /// Device binding, the same for every call that carries an access or refresh token:
    /// the token's session must be bound to a key in `proof` (its device key, or the pending key of
    /// a key move). An empty `proof` is RAIN_501 `device_proof_required` and never ends the session
    /// (the device failed to prove: a TPM, a keyring, a network fault). A proof by other keys only
    /// is theft: the session family is revoked (`stolen_token`) and the call is RAIN_201
    /// `refresh_rejected`. A session without a device key is RAIN_201 `device_unbound`.
    /// - Throws: RAIN_201 with `details.reason`: `invalid_token` (unknown, or rotated away by a
    ///   refresh), `access_expired`, `revoked_elsewhere`, `revoked`, `refresh_rejected`,
    ///   `device_unbound`; RAIN_501 `device_proof_required`. RAIN_502 when the store fails.
    func accountInfo(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError) -> AccountInfo

    /// The wallet of the account behind a live access token: its id, creation time and addresses.
    /// A wallet still missing a key is completed first.
    /// - Throws: RAIN_201 like `accountInfo` for a bad, expired or revoked token; RAIN_404 when the
    ///   account has no wallet; RAIN_502 when the store fails or the entropy does not decrypt.
    func wallet(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError) -> WalletInfo

    /// The wallet's secrets: decrypts its entropy and derives the recovery phrase and both private
    /// keys. Never logged. The device decides whether the profile may export (docs/user-guide.md "Wallets").
    /// - Throws: RAIN_201 like `accountInfo`; RAIN_404 when the account has no wallet; RAIN_502
    ///   when the store fails or the entropy does not decrypt (another master key).
    func exportWallet(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError) -> WalletSecrets

    /// Revokes the session that holds `refreshToken` (logout). Unknown or already revoked tokens
    /// succeed silently. The device binding is that of `accountInfo`: a proof by another key than
    /// the session's is theft, the family is revoked (`stolen_token`) and the call refused.
    /// - Throws: RAIN_501 `device_proof_required` without a proof; RAIN_201 `refresh_rejected`
    ///   for a proof by another key. RAIN_502 when the store fails.
    func revokeSession(appID: String, refreshToken: String, proof: DeviceProof) async throws(RainError)

    /// Starts a passkey registration: a sign-up (`accessToken` nil: a new account on finish) or
    /// an added passkey (the live session's account). The challenge (32 random bytes) is stored,
    /// single use, bound to the app, device, kind and rpId, and expires after
    /// `AuthoritySettings.passkeyCeremonyLifetime`.
    /// - Returns: the ceremony id and a W3C `PublicKeyCredentialCreationOptionsJSON`.
    /// - Throws: RAIN_102 for an empty rpId or no origin; RAIN_201 like `accountInfo` for a bad
    ///   access token, and the device binding of `accountInfo` with one; RAIN_502 when the store fails.
    func beginPasskeyRegistration(_ request: PasskeyBeginRequest, proof: DeviceProof) async throws(RainError)
        -> PasskeyCeremony

    /// Finishes a registration: verifies the `RegistrationResponseJSON` (WebAuthn §7.1) and
    /// stores the credential with its rpId. A sign-up creates a new account and wallet and a
    /// session bound to the device key (as a code login does); an added passkey returns nil.
    ///
    /// A request with an `idempotencyKey` repeated within the ceremony's lifetime gets
    /// the first finish's outcome (the same account, wallet and tokens; nil after an add) instead
    /// of a used ceremony, never a second account or session.
    /// - Throws: RAIN_102 `challenge_expired` for an unknown, used, cancelled or expired ceremony
    ///   (or one of the other kind), `credential_already_registered` for a credential id any
    ///   account holds, `idempotency_key_reused` for a key another call used, or the failed check's
    ///   reason; RAIN_501 `outcome_unknown` while the first finish with the key still runs;
    ///   RAIN_502 when the store fails.
    func finishPasskeyRegistration(_ request: PasskeyFinishRequest) async throws(RainError) -> LoginResult?

    /// Starts a passkey login (discoverable: no allow list).
    /// - Returns: the ceremony id and a W3C `PublicKeyCredentialRequestOptionsJSON`.
    /// - Throws: RAIN_102 for an empty rpId or no origin; RAIN_502 when the store fails.
    func beginPasskeyAuthentication(_ request: PasskeyBeginRequest) async throws(RainError) -> PasskeyCeremony

    /// Finishes a login: finds the credential by id and rpId, verifies the
    /// `AuthenticationResponseJSON` (WebAuthn §7.2), moves its sign count forward (a regression is
    /// refused) and logs in like a code login: the device's session is bound to its key and the
    /// account's sessions on other devices are revoked.
    /// A repeat with the first finish's `idempotencyKey` gets its outcome, as for a registration.
    /// - Throws: RAIN_102 `challenge_expired`, `credential_unknown`, `sign_count_regression`,
    ///   `idempotency_key_reused` or the failed check's reason; RAIN_501 `outcome_unknown` while the
    ///   first finish with the key still runs; RAIN_502 when the store fails.
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
    ///
    /// A contact another account owns is sent a code like any other, counted against the send
    /// limits: only the confirm, after the right code, says that another account owns it, so the
    /// send tells a caller nothing about which contacts have accounts.
    /// - Throws: RAIN_102 for a contact that is not normalized; RAIN_201 like `accountInfo`;
    ///   RAIN_302 when a send limit refuses it; RAIN_501 when the code sender fails; RAIN_502 when
    ///   the store fails.
    func sendContactVerificationCode(
        appID: String, deviceID: String, accessToken: String, contact: RainWalletContact, proof: DeviceProof
    ) async throws(RainError) -> SendCodeResult

    /// `sendLoginCode` for a caller the server identified: the send counts against `source`
    /// (`CodeSendLimits.sourceMaxSends`). `AuthorityService` passes the source address of the
    /// connection; an authority that forwards the call (`RemoteAuthority`) ignores it, since its
    /// server counts the connection it sees.
    /// - Throws: as `sendLoginCode`.
    func sendLoginCode(_ request: SendCodeRequest, source: SendSource) async throws(RainError) -> SendCodeResult

    /// `sendContactVerificationCode` for a caller the server identified (see
    /// `sendLoginCode(_:source:)`).
    /// - Throws: as `sendContactVerificationCode`.
    func sendContactVerificationCode(
        appID: String, deviceID: String, accessToken: String, contact: RainWalletContact, proof: DeviceProof,
        source: SendSource
    ) async throws(RainError) -> SendCodeResult

    /// `confirmLoginCode` for a caller the server identified: its wrong guesses count against
    /// `source` (`CodeSendLimits.sourceMaxWrongGuesses`), as `sendLoginCode(_:source:)` counts sends.
    /// - Throws: as `confirmLoginCode`.
    func confirmLoginCode(_ request: ConfirmCodeRequest, source: SendSource) async throws(RainError) -> LoginResult

    /// `confirmContactVerification` for a caller the server identified (see
    /// `confirmLoginCode(_:source:)`).
    /// - Throws: as `confirmContactVerification`.
    func confirmContactVerification(
        appID: String, deviceID: String, accessToken: String, challengeID: String, code: String, proof: DeviceProof,
        idempotencyKey: [UInt8], source: SendSource
    ) async throws(RainError) -> AccountInfo

    /// Confirms a contact verification: on the right code, attaches the contact to the account,
    /// verified, in one transaction that checks again that no other account took it meanwhile. The
    /// contact then logs in to this account and wallet. A contact already on the account succeeds
    /// again (idempotent); a second contact of a kind is added, never replacing the first.
    ///
    /// `idempotencyKey` (16 to 64 random bytes per logical confirm, kept across its
    /// repeats; empty for none): a repeat within the challenge's lifetime gets the first outcome
    /// (the account with the contact) instead of a used challenge, and nothing is applied twice.
    /// The code check spends the wrong-guess budgets as `confirmLoginCode`'s does, the device key
    /// being the session's.
    /// - Returns: the account with the contact.
    /// - Throws: RAIN_203 like `confirmLoginCode` (wrong keeps the challenge, with
    ///   `attemptsRemaining`; expired, locked, used, retired); RAIN_102 `no_pending_code` for an
    ///   unknown challenge, a login challenge, or one of another device or account, and
    ///   `idempotency_key_reused` for a key another call used; RAIN_201 like `accountInfo`;
    ///   RAIN_302 `contact_owned_by_another_account` (only after the right code), or a spent
    ///   wrong-guess budget as `confirmLoginCode`; RAIN_502 when the store fails.
    func confirmContactVerification(
        appID: String, deviceID: String, accessToken: String, challengeID: String, code: String, proof: DeviceProof,
        idempotencyKey: [UInt8]
    ) async throws(RainError) -> AccountInfo

    /// Step 1 of moving a device to a new key (`storage migrate`): every live session of `deviceID`
    /// bound to a key in `proof` also accepts `newKey` from now on, until `confirmDeviceKey`.
    /// `proof` must hold both the current key and `newKey`. Repeating it is harmless, so a
    /// migration killed at any point can run it again.
    /// - Throws: RAIN_501 `device_proof_required` when `proof` lacks either key; RAIN_502 when the
    ///   store fails.
    func rebindDevice(deviceID: String, newKey: DevicePublicKey, proof: DeviceProof) async throws(RainError)

    /// Step 2: the device confirms `key` (proven in `proof`): its sessions accept only `key` from
    /// now on. Repeating it is harmless.
    /// - Throws: RAIN_501 `device_proof_required` when `proof` lacks `key`; RAIN_502 when the store
    ///   fails.
    func confirmDeviceKey(deviceID: String, key: DevicePublicKey, proof: DeviceProof) async throws(RainError)

    /// The code deliveries of the development outbox, oldest first.
    /// - Throws: RAIN_202 when the development outbox is disabled.
    func listOutbox() async throws(RainError) -> [OutboxDelivery]

    /// `accountInfo` and `wallet` answered without the Swift concurrency pool, when this authority
    /// can (an embedded one on a store with a `DirectStoreReader`); nil by default.
    var directReads: (any DirectAuthorityReads)? { get }

    // The link to a remote authority

    /// The link to the authority (a remote one); nil in-process, where it is always connected.
    var linkState: AuthorityLinkState? { get }

    /// Calls `observer` with each change of `linkState` (never, in-process).
    func observeLink(_ observer: @escaping @Sendable (AuthorityLinkState) -> Void)

    /// How long each kind of call may wait (a remote authority); nil in-process: no network hop.
    var deadlines: AuthorityDeadlines? { get }
}

/// The device keys a caller has proven: on the authority hop, each key whose signature over the
/// connection's challenge (and TLS channel binding) the authority verified; in-process, the keys the
/// device's provider holds.
public struct DeviceProof: Sendable, Equatable {
    /// The device that proved them.
    public var deviceID: String
    /// The proven keys (at most two: the current key and, during a migration, the previous one).
    public var keys: [DevicePublicKey]

    /// A proof of `keys` by `deviceID`.
    public init(deviceID: String, keys: [DevicePublicKey]) {
        self.deviceID = deviceID
        self.keys = keys
    }

    /// The keys `holder` holds, as an in-process proof.
    public init(holder: any DeviceKeyHolder) {
        self.init(deviceID: holder.deviceID, keys: holder.signers.map(\.publicKey))
    }

    /// Whether `key` is among the proven keys.
    public func contains(_ key: DevicePublicKey) -> Bool { keys.contains(key) }

    /// Whether a key with these wire bytes (a session's `device_public_key`) is among the proven keys.
    public func contains(wireBytes: [UInt8]) -> Bool { keys.contains { $0.wireBytes == wireBytes } }

    /// No proof: what a connection that proved nothing carries.
    public static func none(deviceID: String = "") -> DeviceProof { DeviceProof(deviceID: deviceID, keys: []) }

    /// Whether nothing was proven.
    public var isEmpty: Bool { keys.isEmpty }
}

extension Authority {
    /// Not supported: only authorities that bind sessions to device keys implement it.
    public func rebindDevice(deviceID: String, newKey: DevicePublicKey, proof: DeviceProof) async throws(RainError) {
        throw RainError(.provider, "this authority cannot move a device to a new key")
    }

    /// Not supported: only authorities that bind sessions to device keys implement it.
    public func confirmDeviceKey(deviceID: String, key: DevicePublicKey, proof: DeviceProof) async throws(RainError) {
        throw RainError(.provider, "this authority cannot move a device to a new key")
    }
}

extension Authority {
    /// No direct reads: every call goes through the async API.
    public var directReads: (any DirectAuthorityReads)? { nil }

    /// In-process: no link to follow.
    public var linkState: AuthorityLinkState? { nil }

    /// In-process: the link never changes.
    public func observeLink(_ observer: @escaping @Sendable (AuthorityLinkState) -> Void) {}

    /// In-process: no network hop to bound.
    public var deadlines: AuthorityDeadlines? { nil }
}

/// `Authority.accountInfo` and `Authority.wallet` with a completion that runs on the store's reader
/// thread (see `DirectStoreReader`), for the daemon's hottest calls.
///
/// Only the common case is answered here: a failure may be one the async API would have handled
/// (a wallet whose keys still need completing), so a caller retries any failure through the async
/// API, which gives the definitive answer. `completion` must not block.
public protocol DirectAuthorityReads: Sendable {
    /// The account behind a live access token, as `Authority.accountInfo` returns it (a session
    /// bound to another key than the proven ones fails here: the async API revokes it).
    func accountInfo(
        appID: String, accessToken: String, proof: DeviceProof,
        completion: @escaping @Sendable (Result<AccountInfo, RainError>) -> Void)

    /// The wallet behind a live access token, as `Authority.wallet` returns it.
    func wallet(
        appID: String, accessToken: String, proof: DeviceProof,
        completion: @escaping @Sendable (Result<WalletInfo, RainError>) -> Void)
}

extension Authority {
    /// Forwards without the source: the authority that finally sends counts its own caller.
    public func sendLoginCode(_ request: SendCodeRequest, source: SendSource) async throws(RainError)
        -> SendCodeResult
    {
        try await sendLoginCode(request)
    }

    /// Forwards without the source: the authority that finally sends counts its own caller.
    public func sendContactVerificationCode(
        appID: String, deviceID: String, accessToken: String, contact: RainWalletContact, proof: DeviceProof,
        source: SendSource
    ) async throws(RainError) -> SendCodeResult {
        try await sendContactVerificationCode(
            appID: appID, deviceID: deviceID, accessToken: accessToken, contact: contact, proof: proof)
    }

    /// Forwards without the source: the authority that finally checks the code counts its own caller.
    public func confirmLoginCode(_ request: ConfirmCodeRequest, source: SendSource) async throws(RainError)
        -> LoginResult
    {
        try await confirmLoginCode(request)
    }

    /// Forwards without the source: the authority that finally checks the code counts its own caller.
    public func confirmContactVerification(
        appID: String, deviceID: String, accessToken: String, challengeID: String, code: String, proof: DeviceProof,
        idempotencyKey: [UInt8], source: SendSource
    ) async throws(RainError) -> AccountInfo {
        try await confirmContactVerification(
            appID: appID, deviceID: deviceID, accessToken: accessToken, challengeID: challengeID, code: code,
            proof: proof, idempotencyKey: idempotencyKey)
    }
}

// The value types the API takes and returns (`SendCodeRequest`, `LoginResult`, `AccountInfo`,
// `WalletInfo`, `WalletSecrets`, `PasskeyBeginRequest`, …) are RainWire's authority messages: what
// `Authority` returns is exactly what `AuthorityService` sends and `RemoteAuthority` decodes.

/// What proves a device to the authority: its id and the keys it holds. `RemoteAuthority` proves
/// possession of each key once per connection; the embedded authority takes them in-process.
public protocol DeviceKeyHolder: Sendable {
    /// The device id sessions are bound to.
    var deviceID: String { get }
    /// The current key first, then the previous one while a key migration is under way.
    var signers: [any DeviceSigner] { get }
}
