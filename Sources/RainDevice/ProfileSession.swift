import Dispatch
import Foundation
import RainAuthority
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

/// Shared dependencies of every profile.
public struct DeviceContext: Sendable {
    public var authority: any Authority
    public var storage: any SecureStorage
    public var clock: any RainClock
    public var device: DeviceIdentity
    public var logger: Logger
    /// Where profiles keep what they learn at run time (the passkey domain a client set).
    public var profileState: ProfileStateStore

    public init(
        authority: any Authority, storage: any SecureStorage, clock: any RainClock, device: DeviceIdentity, logger: Logger,
        profileState: ProfileStateStore = ProfileStateStore(directory: nil)
    ) {
        self.authority = authority
        self.storage = storage
        self.clock = clock
        self.device = device
        self.logger = logger
        self.profileState = profileState
    }

    /// The device id.
    public var deviceID: String { device.id }
}

/// The session manager of one profile: the single owner of its session, its pending login
/// challenge, its storage and its refresh (DESIGN §3). Every mutation goes through this actor; the
/// loop reads the published `ProfileRuntime` snapshot.
///
/// Refresh: a timer fires at `expiresAt − refreshBuffer` (clamped to half the lifetime). Timers
/// run on the monotonic clock and never wait more than `recheckInterval`, so a wall-clock jump or a
/// suspend is noticed within that interval. Refresh is single flight: the timer and any number of
/// `refreshSession()` calls share one request. Transient failures are retried (`transientRetries`,
/// backoff from `retryInitialDelay` doubling up to `retryMaxDelay`); once exhausted the session
/// stays usable and the scheduler tries again every `retryMaxDelay` until it expires, which ends it
/// with `refreshFailed`. A definitive refusal ends it at once (`revokedElsewhere` when the user
/// logged in on another device, else `refreshFailed`).
public actor ProfileSession {
    /// The longest a scheduler timer waits before re-checking the wall clock.
    static let recheckInterval: Duration = .seconds(30)

    public nonisolated let runtime: ProfileRuntime
    private let context: DeviceContext
    private var session: StoredSession?
    private var pending: SendCodeResult?
    /// The pending backup-contact verification (separate from the login code's challenge).
    private var pendingVerification: SendCodeResult?
    /// The passkey ceremony begun last on this profile, with its kind.
    private var pendingPasskey: (id: String, kind: PasskeyCeremonyKind)?
    /// The passkey domain: from the config, else the one a client set (persisted).
    private var passkeyDomain: String?
    private var restoreTask: Task<Void, Never>?
    private var refreshTask: Task<Result<Void, RainError>, Never>?
    private var timer: (any RainTimer)?
    /// After the retries are exhausted: when the scheduler may try again.
    private var nextRetryAt: Date?
    private let timerQueue: DispatchQueue
    private let logger: Logger

    init(runtime: ProfileRuntime, context: DeviceContext) {
        self.runtime = runtime
        self.context = context
        self.logger = context.logger.child("profile")
        self.timerQueue = DispatchQueue(label: "rainwallet.refresh.\(runtime.name)")
    }

    private var appID: String { runtime.settings.appID }
    private var policy: RainWalletSessionPolicy { runtime.settings.sessionPolicy }
    private var clock: any RainClock { context.clock }

    // MARK: restore

    /// Loads the stored session once; later calls wait for the first.
    public func restore() async {
        if let restoreTask {
            await restoreTask.value
            return
        }
        let task = Task { await self.loadStored() }
        restoreTask = task
        await task.value
    }

    private func loadStored() async {
        passkeyDomain = runtime.settings.passkeyDomain
        if passkeyDomain == nil {
            passkeyDomain = await context.profileState.passkeyDomain(profile: runtime.name, logger: logger)
        }
        let stored = await context.storage.load(profile: runtime.name)
        session = stored
        runtime.publish(session: stored)
        logger.info("session.restored", ["profile": runtime.name, "present": stored == nil ? "false" : "true"])
        if let stored, clock.now >= stored.expiresAt {
            // Expired while the daemon was down: one refresh attempt (with retries) may save it.
            if case .failure = await refreshNow(), session != nil { await end(.expired) }
        }
        schedule()
    }

    // MARK: configuration

    /// Applies a client's `RainWalletConfig`: sets the passkey domain when none is configured
    /// (validated, then persisted), accepts the same domain again, refuses a different one.
    /// - Throws: RAIN_102 for an invalid domain or one that differs from the profile's.
    public func configure(passkeyDomain requested: String) async throws(RainError) -> ConfigureProfileResponse {
        await restore()
        guard !requested.isEmpty else { return ConfigureProfileResponse(passkeyDomain: passkeyDomain ?? "") }
        let domain = try PasskeyDomain.validate(requested)
        if let current = passkeyDomain {
            guard current == domain else {
                throw RainError.invalid(
                    "profile \(runtime.name) is bound to passkey domain \(current), not \(domain): passkeys are bound to their domain, so it cannot change",
                    field: "passkeyDomain", reason: "passkey_domain_mismatch")
            }
            return ConfigureProfileResponse(passkeyDomain: current)
        }
        try await context.profileState.save(passkeyDomain: domain, profile: runtime.name)
        passkeyDomain = domain
        logger.info("profile.passkey_domain_set", ["profile": runtime.name, "domain": domain])
        return ConfigureProfileResponse(passkeyDomain: domain)
    }

    /// The profile's passkey domain, or RAIN_102 when there is none (every passkey call needs one).
    func requirePasskeyDomain() async throws(RainError) -> String {
        await restore()
        guard let passkeyDomain else {
            throw RainError.invalid(
                "profile \(runtime.name) has no passkey domain: set RainWalletConfig(passkeyDomain:) or \"passkeyDomain\" in the daemon's config",
                field: "passkeyDomain", reason: "no_passkey_domain")
        }
        return passkeyDomain
    }

    // MARK: login by code

    /// Sends a login code; replaces this profile's pending challenge.
    public func sendLoginCode(_ contact: RainWalletContact?) async throws(RainError) -> SendLoginCodeResponse {
        guard let contact else {
            throw RainError.invalid("the request names no contact: set an email or a phone number", field: "contact")
        }
        let normalized = try contact.normalized()
        await restore()
        let result = try await context.authority.sendLoginCode(
            SendCodeRequest(appID: appID, deviceID: context.deviceID, contact: normalized))
        pending = result
        return SendLoginCodeResponse(contact: result.contact, expiresAt: result.expiresAt)
    }

    /// Confirms the pending code; on success stores the session before answering.
    public func confirmLoginCode(_ code: String) async throws(RainError) -> ConfirmLoginCodeResponse {
        let trimmed = code.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.utf8.count == 6, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw RainError.invalid("a login code is 6 digits", field: "code", reason: "malformed_code")
        }
        await restore()
        guard let challenge = pending else {
            throw RainError.invalid(
                "no login code is pending on this profile; send one first", field: "code", reason: "no_pending_code")
        }
        let result = try await context.authority.confirmLoginCode(
            ConfirmCodeRequest(
                appID: appID, deviceID: context.deviceID, challengeID: challenge.challengeID, code: trimmed,
                devicePublicKey: context.device.signingKey.publicKey.rawRepresentation))
        if pending?.challengeID == challenge.challengeID { pending = nil }
        try await adopt(result, contact: challenge.contact, method: StoredSession.codeMethod)
        return ConfirmLoginCodeResponse(session: runtime.snapshot(), accountCreated: result.accountCreated)
    }

    /// Stores a login's session before anything answers, publishes it and schedules its refresh:
    /// the one path of code and passkey logins.
    private func adopt(_ result: LoginResult, contact: RainWalletContact?, method: String) async throws(RainError) {
        let stored = StoredSession(
            accountID: result.accountID, walletID: result.walletID, accessToken: result.tokens.accessToken,
            refreshToken: result.tokens.refreshToken, expiresAt: clock.now.adding(result.tokens.accessLifetime),
            lifetimeSeconds: result.tokens.accessLifetime.timeInterval, contact: contact, method: method)
        try await context.storage.save(stored, profile: runtime.name)
        session = stored
        // A verification sent for the previous session's account cannot complete on this one.
        pendingVerification = nil
        nextRetryAt = nil
        runtime.publish(session: stored)
        schedule()
        logger.info(
            "login",
            [
                "profile": runtime.name, "account": result.accountID, "created": result.accountCreated ? "true" : "false",
                "method": method,
            ])
    }

    // MARK: passkeys

    /// Begins a passkey sign-up: a new account and wallet when it finishes.
    /// - Throws: RAIN_102 without a passkey domain (`no_passkey_domain`) or while a session is live
    ///   (`session_live`: log out first).
    public func beginPasskeySignUp() async throws(RainError) -> BeginPasskeyResponse {
        let domain = try await requirePasskeyDomain()
        try requireNoSession()
        let ceremony = try await context.authority.beginPasskeyRegistration(
            PasskeyBeginRequest(
                appID: appID, deviceID: context.deviceID, rpID: domain,
                origins: runtime.settings.passkeyOrigins(domain: domain)))
        return remember(ceremony, kind: .signUp, domain: domain)
    }

    /// Begins a passkey login. Over a live code session the login replaces it when it finishes
    /// (so a user who logged in by code can switch to their passkey); over a live passkey session it
    /// is refused.
    /// - Throws: RAIN_102 without a passkey domain, or over a live passkey session
    ///   (`passkey_session_live`).
    public func beginPasskeyLogin() async throws(RainError) -> BeginPasskeyResponse {
        let domain = try await requirePasskeyDomain()
        try requireNoPasskeySession()
        let ceremony = try await context.authority.beginPasskeyAuthentication(
            PasskeyBeginRequest(
                appID: appID, deviceID: context.deviceID, rpID: domain,
                origins: runtime.settings.passkeyOrigins(domain: domain)))
        return remember(ceremony, kind: .login, domain: domain)
    }

    /// Begins adding a passkey to the live session's account.
    /// - Throws: RAIN_102 without a passkey domain; RAIN_201 without a live session.
    public func beginPasskeyAdd() async throws(RainError) -> BeginPasskeyResponse {
        let domain = try await requirePasskeyDomain()
        let request = PasskeyBeginRequest(
            appID: appID, deviceID: context.deviceID, rpID: domain,
            origins: runtime.settings.passkeyOrigins(domain: domain))
        let ceremony = try await withSession(what: "add a passkey", transientRetries: 0) {
            (authority, _, token) async throws(RainError) in
            var withToken = request
            withToken.accessToken = token
            return try await authority.beginPasskeyRegistration(withToken)
        }
        return remember(ceremony, kind: .add, domain: domain)
    }

    /// Finishes this profile's pending ceremony with the authenticator's response. A sign-up or
    /// login stores its session exactly like a code login; an add leaves the session as it is.
    /// - Throws: RAIN_102 `challenge_expired` when `ceremonyID` is not this profile's pending
    ///   ceremony (unknown, finished, cancelled or expired); the sign-up and login rules again
    ///   (a session may have started meanwhile); the authority's refusal of the response.
    public func finishPasskey(ceremonyID: String, responseJSON: String) async throws(RainError) -> FinishPasskeyResponse {
        await restore()
        guard let ceremony = pendingPasskey, ceremony.id == ceremonyID else {
            throw RainError.invalid(
                "no such passkey ceremony is pending on this profile; begin a new one", field: "ceremonyId",
                reason: "challenge_expired")
        }
        pendingPasskey = nil
        let request = PasskeyFinishRequest(
            appID: appID, deviceID: context.deviceID, ceremonyID: ceremonyID, responseJSON: responseJSON,
            devicePublicKey: context.device.signingKey.publicKey.rawRepresentation)
        switch ceremony.kind {
        case .signUp:
            try requireNoSession()
            guard let result = try await context.authority.finishPasskeyRegistration(request) else {
                throw RainError(.internalError, "the passkey sign-up returned no session")
            }
            try await adopt(result, contact: nil, method: StoredSession.passkeyMethod)
            return FinishPasskeyResponse(session: runtime.snapshot(), accountCreated: true)
        case .login:
            try requireNoPasskeySession()
            let replaced = session
            let result = try await context.authority.finishPasskeyAuthentication(request)
            try await adopt(result, contact: nil, method: StoredSession.passkeyMethod)
            if let replaced, replaced.refreshToken != result.tokens.refreshToken {
                // The code session this login replaced ends at the authority too (best effort;
                // the authority already replaced it when both belong to the same account).
                do {
                    try await context.authority.revokeSession(appID: appID, refreshToken: replaced.refreshToken)
                } catch {
                    logger.warning("passkey.replace_revoke_failed", ["profile": runtime.name, "error": error.code.description])
                }
            }
            return FinishPasskeyResponse(session: runtime.snapshot(), accountCreated: false)
        case .add:
            guard session != nil else { throw noSessionError() }
            _ = try await context.authority.finishPasskeyRegistration(request)
            logger.info("passkey.added", ["profile": runtime.name])
            return FinishPasskeyResponse(session: runtime.snapshot(), accountCreated: false)
        }
    }

    /// Cancels a ceremony (the client's authenticator was dismissed): it is consumed at the
    /// authority and the session is untouched. Unknown ceremonies succeed silently.
    public func cancelPasskey(ceremonyID: String) async throws(RainError) -> CancelPasskeyResponse {
        await restore()
        if pendingPasskey?.id == ceremonyID { pendingPasskey = nil }
        try await context.authority.cancelPasskeyCeremony(
            appID: appID, deviceID: context.deviceID, ceremonyID: ceremonyID)
        logger.info("passkey.cancelled", ["profile": runtime.name])
        return CancelPasskeyResponse()
    }

    /// Keeps the ceremony as this profile's pending one (a new begin replaces it).
    private func remember(_ ceremony: PasskeyCeremony, kind: PasskeyCeremonyKind, domain: String)
        -> BeginPasskeyResponse
    {
        pendingPasskey = (ceremony.ceremonyID, kind)
        logger.info("passkey.begin", ["profile": runtime.name, "kind": kind.rawValue])
        return BeginPasskeyResponse(
            ceremonyID: ceremony.ceremonyID, optionsJSON: ceremony.optionsJSON, origin: "https://" + domain,
            expiresAt: ceremony.expiresAt)
    }

    /// RAIN_102 `session_live` while a session is live (a sign-up needs a logged-out profile).
    private func requireNoSession() throws(RainError) {
        guard session == nil else {
            throw RainError.invalid(
                "a session is live on profile \(runtime.name); log out before signing up with a passkey",
                reason: "session_live")
        }
    }

    /// RAIN_102 `passkey_session_live` over a live passkey session.
    private func requireNoPasskeySession() throws(RainError) {
        guard session?.loginMethod != StoredSession.passkeyMethod else {
            throw RainError.invalid(
                "a passkey session is live on profile \(runtime.name); log out before logging in with a passkey again",
                reason: "passkey_session_live")
        }
    }

    // MARK: logout

    /// Ends the session: wipes it locally first, then revokes it at the authority (best effort).
    /// Never fires the expiry event.
    public func logout() async throws(RainError) -> LogoutResponse {
        await restore()
        pending = nil
        pendingVerification = nil
        cancelTimer()
        nextRetryAt = nil
        guard let ending = session else {
            runtime.publish(session: nil)
            return LogoutResponse(hadSession: false, revokedAtAuthority: false)
        }
        try await context.storage.delete(profile: runtime.name)
        session = nil
        runtime.publish(session: nil)
        var revoked = true
        do {
            try await context.authority.revokeSession(appID: appID, refreshToken: ending.refreshToken)
        } catch {
            revoked = false
            logger.warning("logout.revoke_failed", ["profile": runtime.name, "error": error.code.description])
        }
        logger.info("logout", ["profile": runtime.name, "revoked": revoked ? "true" : "false"])
        return LogoutResponse(hadSession: true, revokedAtAuthority: revoked)
    }

    // MARK: reads

    /// The account behind the session. A read: transient authority failures are retried with the
    /// policy (sends never are). A token the authority no longer accepts because it was rotated or
    /// expired gets one refresh and one more try; a session revoked at the authority (a login on
    /// another device) ends here with `revokedElsewhere`.
    /// - Throws: RAIN_201 without a live session; RAIN_301 when the authority stayed unreachable.
    public func account() async throws(RainError) -> AccountResponse {
        let info = try await withSession(what: "read the account", transientRetries: policy.transientRetries) {
            (authority, appID, token) async throws(RainError) in
            try await authority.accountInfo(appID: appID, accessToken: token)
        }
        return Self.accountResponse(info)
    }

    /// What Account/Get answers for an authority's `AccountInfo`.
    static func accountResponse(_ info: AccountInfo) -> AccountResponse {
        AccountResponse(
            accountID: info.accountID, walletID: info.walletID, createdAt: info.createdAt, contacts: info.contacts,
            needsBackupEmail: info.needsBackupEmail, passkeys: info.passkeys)
    }

    // MARK: backup contacts

    /// Sends a code that verifies `contact` as a backup contact of the session's account; replaces
    /// this profile's pending verification (not its pending login code). A send: never retried on
    /// a transient failure (a rotated or expired access token gets one refresh and one more try,
    /// since the refusal means nothing was sent).
    /// - Throws: RAIN_102 for a missing or malformed contact (before any request); RAIN_201
    ///   without a live session; RAIN_302 `contact_owned_by_another_account`; RAIN_301 when the
    ///   authority could not be reached.
    public func sendContactVerificationCode(_ contact: RainWalletContact?) async throws(RainError)
        -> SendLoginCodeResponse
    {
        guard let contact else {
            throw RainError.invalid("the request names no contact: set an email or a phone number", field: "contact")
        }
        let normalized = try contact.normalized()
        let deviceID = context.deviceID
        let result = try await withSession(what: "send a verification code", transientRetries: 0) {
            (authority, appID, token) async throws(RainError) in
            try await authority.sendContactVerificationCode(
                appID: appID, deviceID: deviceID, accessToken: token, contact: normalized)
        }
        pendingVerification = result
        return SendLoginCodeResponse(contact: result.contact, expiresAt: result.expiresAt)
    }

    /// Confirms the pending verification: on success the contact is on the account, verified, and
    /// logs in to it. Never retried on a transient failure.
    /// - Returns: the account with the contact.
    /// - Throws: RAIN_102 `malformed_code` or `no_pending_code` (before any request); RAIN_203 for
    ///   a wrong, expired or locked code; RAIN_201 without a live session; RAIN_302
    ///   `contact_owned_by_another_account`.
    public func confirmContactVerification(_ code: String) async throws(RainError) -> AccountResponse {
        let trimmed = code.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.utf8.count == 6, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw RainError.invalid("a verification code is 6 digits", field: "code", reason: "malformed_code")
        }
        await restore()
        guard let challenge = pendingVerification else {
            throw RainError.invalid(
                "no contact verification is pending on this profile; send a code first", field: "code",
                reason: "no_pending_code")
        }
        let deviceID = context.deviceID
        let info = try await withSession(what: "confirm the verification", transientRetries: 0) {
            (authority, appID, token) async throws(RainError) in
            try await authority.confirmContactVerification(
                appID: appID, deviceID: deviceID, accessToken: token, challengeID: challenge.challengeID, code: trimmed)
        }
        if pendingVerification?.challengeID == challenge.challengeID { pendingVerification = nil }
        logger.info("contact.verified", ["profile": runtime.name, "kind": challenge.contact.kindName])
        return Self.accountResponse(info)
    }

    /// The wallet behind the session: its id, creation time and addresses. A read, retried and
    /// refreshed exactly like `account()`.
    /// - Throws: RAIN_201 without a live session; RAIN_404 when the account has no wallet; RAIN_301
    ///   when the authority stayed unreachable.
    public func wallet() async throws(RainError) -> WalletResponse {
        let info = try await withSession(what: "read the wallet", transientRetries: policy.transientRetries) {
            (authority, appID, token) async throws(RainError) in
            try await authority.wallet(appID: appID, accessToken: token)
        }
        return Self.walletResponse(info)
    }

    /// What Wallet/Get answers for an authority's `WalletInfo`.
    static func walletResponse(_ info: WalletInfo) -> WalletResponse {
        WalletResponse(
            walletID: info.walletID, createdAt: info.createdAt, ethereumAddress: info.ethereumAddress,
            solanaAddress: info.solanaAddress)
    }

    /// The wallet's 12-word recovery phrase. Never logged, stored or retried on a transient failure.
    /// - Throws: RAIN_202 unless the profile's config allows export (checked before anything else);
    ///   RAIN_201 without a live session; RAIN_404 without a wallet; RAIN_301 when the authority
    ///   could not be reached.
    public func exportRecoveryPhrase() async throws(RainError) -> ExportRecoveryPhraseResponse {
        let secrets = try await export()
        return ExportRecoveryPhraseResponse(words: secrets.mnemonic)
    }

    /// One chain's private key: Ethereum as `0x` + 64 lowercase hex, Solana as the base58 64-byte
    /// keypair. Same rules as `exportRecoveryPhrase()`.
    /// - Throws: RAIN_102 when no chain is named (after the export permission); otherwise as
    ///   `exportRecoveryPhrase()`.
    public func exportPrivateKey(chain: RainChain?) async throws(RainError) -> ExportPrivateKeyResponse {
        try requireExportAllowed()
        guard let chain else {
            throw RainError.invalid("name a chain: ethereum or solana", field: "chain")
        }
        let secrets = try await export()
        let key = chain == .ethereum ? secrets.ethereumPrivateKeyHex : secrets.solanaKeypairBase58
        return ExportPrivateKeyResponse(chain: chain, privateKey: key)
    }

    /// RAIN_202 unless the daemon's config sets `allowExport` for this profile. No client can set it.
    private func requireExportAllowed() throws(RainError) {
        guard runtime.settings.isExportAllowed else {
            throw RainError(
                .unauthorized,
                "export is not allowed for profile \(runtime.name); set \"allowExport\": true for it in the daemon's config file",
                details: .init(reason: "export_not_allowed"))
        }
    }

    /// The wallet's secrets, after the permission check. Exports are treated like sends: a
    /// transient failure is reported, never retried automatically.
    private func export() async throws(RainError) -> WalletSecrets {
        try requireExportAllowed()
        let secrets = try await withSession(what: "export the wallet", transientRetries: 0) {
            (authority, appID, token) async throws(RainError) in
            try await authority.exportWallet(appID: appID, accessToken: token)
        }
        logger.info("wallet.exported", ["profile": runtime.name])
        return secrets
    }

    /// Runs one authority call with the session's access token: the shared path of reads and
    /// exports. Transient failures are retried `transientRetries` times with the policy's backoff.
    /// A token the authority refuses as rotated or expired gets one refresh and one more try (the
    /// refusal means the call did nothing); a session revoked at the authority ends here
    /// (`revokedElsewhere` when another device logged in, else `refreshFailed`).
    /// - Throws: RAIN_201 without a live session; RAIN_301 when the authority stayed unreachable;
    ///   any other refusal as the authority raised it.
    private func withSession<T: Sendable>(
        what: String, transientRetries: Int,
        _ call: @Sendable (any Authority, String, String) async throws(RainError) -> T
    ) async throws(RainError) -> T {
        await restore()
        var delay = policy.retryInitialDelay
        var attempt = 0
        var refreshedOnce = false
        while true {
            guard let current = session else { throw noSessionError() }
            let result: Result<T, RainError>
            do {
                result = .success(try await call(context.authority, appID, current.accessToken))
            } catch {
                result = .failure(error)
            }
            switch result {
            case .success(let value):
                return value
            case .failure(let error) where error.code == .sessionExpired:
                let reason = error.details.reason
                if reason == "invalid_token" || reason == "access_expired" {
                    // Rotated meanwhile, or expired before the scheduler ran: refresh once, then retry.
                    if session?.accessToken != current.accessToken { continue }
                    if !refreshedOnce, case .success = await refreshNow() {
                        refreshedOnce = true
                        continue
                    }
                }
                if session?.refreshToken == current.refreshToken {
                    await end(reason == "revoked_elsewhere" ? .revokedElsewhere : .refreshFailed)
                }
                throw noSessionError()
            case .failure(let error) where Self.isDefinitive(error) || error.code == .unavailable:
                throw error
            case .failure(let error):
                guard attempt < transientRetries else {
                    guard error.code == .network else { throw error }
                    throw RainError(
                        .network, "the authority could not be reached to \(what); try again",
                        underlying: SendableErrorDescription(error))
                }
                attempt += 1
                await clock.sleep(for: delay)
                delay = min(delay * 2, policy.retryMaxDelay)
            }
        }
    }

    // MARK: refresh

    /// Refreshes now, sharing a refresh already in flight.
    /// - Throws: RAIN_201 without a session (details reason: why it ended); RAIN_301 when the
    ///   authority stayed unreachable through the retries (the session stays usable).
    public func refreshSession() async throws(RainError) -> SessionSnapshot {
        await restore()
        guard session != nil else { throw noSessionError() }
        refreshCallCount += 1
        switch await refreshNow() {
        case .success: return runtime.snapshot()
        case .failure(let e): throw e
        }
    }

    /// RAIN_201 saying why there is no session.
    func noSessionError() -> RainError {
        if let reason = runtime.endedReason {
            return RainError(
                .sessionExpired, "the session ended (\(reason.rawValue)); log in again", details: .init(reason: reason.snakeCase))
        }
        return RainError(.sessionExpired, "no session; log in first", details: .init(reason: "no_session"))
    }

    /// Calls of `refreshSession()` so far (tests check they share one refresh).
    private(set) var refreshCallCount = 0

    private func refreshNow(isScheduledRetry: Bool = false) async -> Result<Void, RainError> {
        if let refreshTask { return await refreshTask.value }
        // After the retries are exhausted, each capped-interval attempt is a single call.
        let retries = isScheduledRetry ? 0 : policy.transientRetries
        let task = Task { await self.performRefresh(retries: retries) }
        refreshTask = task
        let result = await task.value
        refreshTask = nil
        return result
    }

    private func performRefresh(retries: Int) async -> Result<Void, RainError> {
        var delay = policy.retryInitialDelay
        var attempt = 0
        while true {
            guard let current = session else { return .failure(noSessionError()) }
            let outcome: Result<SessionTokens, RainError>
            do {
                let now = clock.now
                let message = RefreshRequest.signedMessage(
                    appID: appID, deviceID: context.deviceID, refreshToken: current.refreshToken, timestamp: now)
                let signature = try context.device.signingKey.signature(for: message)
                outcome = .success(
                    try await context.authority.refreshSession(
                        RefreshRequest(
                            appID: appID, deviceID: context.deviceID, refreshToken: current.refreshToken, timestamp: now,
                            signature: signature)))
            } catch {
                outcome = .failure(error)
            }
            // Re-check after the await: a logout or a new login may have replaced the session.
            guard let latest = session, latest.refreshToken == current.refreshToken else {
                return session == nil ? .failure(noSessionError()) : .success(())
            }
            switch outcome {
            case .success(let tokens):
                var renewed = latest
                renewed.accessToken = tokens.accessToken
                renewed.refreshToken = tokens.refreshToken
                renewed.expiresAt = clock.now.adding(tokens.accessLifetime)
                renewed.lifetimeSeconds = tokens.accessLifetime.timeInterval
                session = renewed
                nextRetryAt = nil
                do {
                    try await context.storage.save(renewed, profile: runtime.name)
                } catch {
                    logger.error("refresh.store_failed", ["profile": runtime.name, "error": error.message])
                }
                runtime.publish(session: renewed)
                logger.info("session.refreshed", ["profile": runtime.name])
                return .success(())
            case .failure(let error) where Self.isDefinitive(error):
                let reason: ExpiryReason = error.details.reason == "revoked_elsewhere" ? .revokedElsewhere : .refreshFailed
                logger.warning("refresh.refused", ["profile": runtime.name, "reason": error.details.reason ?? error.code.description])
                await end(reason)
                return .failure(
                    RainError(.sessionExpired, "the session ended (\(reason.rawValue)); log in again", details: .init(reason: reason.snakeCase)))
            case .failure(let error):
                logger.warning(
                    "refresh.transient_failure", ["profile": runtime.name, "attempt": "\(attempt + 1)", "error": error.code.description])
                if attempt >= retries {
                    nextRetryAt = clock.now.adding(policy.retryMaxDelay)
                    return .failure(
                        RainError(
                            .network, "the authority could not be reached to refresh the session; it stays usable until it expires",
                            details: .init(retryAfterMilliseconds: UInt64(policy.retryMaxDelay.milliseconds)),
                            underlying: SendableErrorDescription(error)))
                }
                attempt += 1
                await clock.sleep(for: delay)
                delay = min(delay * 2, policy.retryMaxDelay)
            }
        }
    }

    /// A refusal that retrying cannot fix.
    static func isDefinitive(_ error: RainError) -> Bool {
        error.code == .sessionExpired || error.code == .unauthorized || error.code == .invalidArgument
    }

    /// Ends the session without logout: wipes it and tells every watcher once.
    private func end(_ reason: ExpiryReason) async {
        guard session != nil else { return }
        cancelTimer()
        session = nil
        nextRetryAt = nil
        do {
            try await context.storage.delete(profile: runtime.name)
        } catch {
            logger.error("session.wipe_failed", ["profile": runtime.name, "error": error.message])
        }
        runtime.publish(session: nil, expiry: reason)
        logger.info("session.ended", ["profile": runtime.name, "reason": reason.rawValue])
    }

    // MARK: scheduler

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }

    /// When the next refresh is due for `s` (nil when auto refresh is off).
    private func refreshDue(_ s: StoredSession) -> Date? {
        guard policy.isAutoRefreshEnabled else { return nil }
        let lifetime = Duration.milliseconds(Int64(s.lifetimeSeconds * 1000))
        let due = s.expiresAt.adding(.zero - policy.effectiveRefreshBuffer(lifetime: lifetime))
        if let nextRetryAt { return max(due, nextRetryAt) }
        return due
    }

    /// Arms one timer for the next thing to do: refresh, retry, or expiry.
    private func schedule() {
        cancelTimer()
        guard let s = session else { return }
        let now = clock.now
        var wake = s.expiresAt
        if let due = refreshDue(s) { wake = min(wake, due) }
        let wait = max(.zero, min(Self.recheckInterval, Duration.milliseconds(Int64(wake.timeIntervalSince(now) * 1000))))
        timer = clock.schedule(after: wait, on: timerQueue) { [weak self] in
            guard let self else { return }
            Task { await self.tick() }
        }
    }

    /// The timer fired: re-check against the wall clock (it may have jumped) and act.
    func tick() async {
        timer = nil
        guard let s = session else { return }
        let now = clock.now
        if now >= s.expiresAt {
            await end(policy.isAutoRefreshEnabled ? .refreshFailed : .expired)
            return
        }
        if let due = refreshDue(s), now >= due {
            _ = await refreshNow(isScheduledRetry: nextRetryAt != nil)
        }
        schedule()
    }

    /// Whether a scheduler timer is armed (tests).
    var isScheduled: Bool { timer != nil }
}

extension ExpiryReason {
    /// `revoked_elsewhere` style, for error details.
    var snakeCase: String {
        switch self {
        case .expired: return "expired"
        case .revokedElsewhere: return "revoked_elsewhere"
        case .refreshFailed: return "refresh_failed"
        }
    }
}
