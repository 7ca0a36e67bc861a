import Dispatch
import Foundation
import RainAccess
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainPasskeyDomain
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
    /// The audit log of sensitive operations (the daemon's `AuditLog`; nil records nothing).
    public var audit: (any AuditRecorder)?

    public init(
        authority: any Authority, storage: any SecureStorage, clock: any RainClock, device: DeviceIdentity, logger: Logger,
        profileState: ProfileStateStore = ProfileStateStore(directory: nil), audit: (any AuditRecorder)? = nil
    ) {
        self.authority = authority
        self.storage = storage
        self.clock = clock
        self.device = device
        self.logger = logger
        self.profileState = profileState
        self.audit = audit
    }

    /// The device id.
    public var deviceID: String { device.id }
}
/// The session manager of one profile: the single owner of its session, its pending challenges,
/// its storage and its refresh (README "Files and paths"). Every mutation goes through this actor; the loop reads
/// the published `ProfileRuntime` snapshot.
///
/// Where the session stands is one `State`, read afresh after every `await` (another call may
/// have logged out, logged in or ended the session meanwhile). Refresh timing, single flight and
/// backoff belong to the profile's `RefreshScheduler`; reads and refresh retry with the one
/// `RetrySchedule`. A definitive refusal ends the session at once (`revokedElsewhere` when the
/// user logged in on another device, else `refreshFailed`); an expiry the refresh could not
/// prevent ends it with `refreshFailed` (`expired` when auto refresh is off). Passkey ceremonies
/// are in `ProfileSession+Passkeys.swift`, backup contacts in `ProfileSession+Contacts.swift`.
public actor ProfileSession {
    /// Where the profile's session stands.
    enum State {
        /// `restore()` has not been called yet.
        case unrestored
        /// Loading the stored session, and refreshing it when it expired while the daemon was
        /// down. `session` is what was loaded (nil once that refresh ended it). Every other call
        /// waits for `task` first.
        case restoring(Task<Void, Never>, session: StoredSession?)
        /// Restored, without a session.
        case signedOut
        /// A session: persisted, published, its refresh scheduled.
        case authenticated(StoredSession)
    }

    /// The name of a `State` case (tests, logs).
    enum Phase: String, Sendable, Equatable {
        case unrestored, restoring, signedOut, authenticated
    }

    /// A passkey ceremony begun on this profile.
    struct PendingPasskey {
        var id: String
        var kind: PasskeyCeremonyKind
    }

    /// Challenges begun on this profile and not finished yet. They are not part of `State` because
    /// each outlives a change of session: a login code may be sent and confirmed over a live session
    /// (to switch accounts), a passkey login may replace a code session, and a backup-contact
    /// verification stays pending (and answers RAIN_201) after its session ended.
    struct Challenges {
        /// The pending login code's challenge.
        var login: SendCodeResult?
        /// The pending backup-contact verification (separate from the login code's challenge);
        /// cleared by a login or a logout.
        var verification: SendCodeResult?
        /// The passkey ceremony begun last, with its kind.
        var passkey: PendingPasskey?

        /// When the last pending challenge expires (a passkey ceremony counts the authority's
        /// default ceremony lifetime, 5 minutes, from `now`); nil when none is pending.
        func pendingUntil(now: Date) -> Date? {
            [login?.expiresAt, verification?.expiresAt, passkey.map { _ in now.adding(.seconds(300)) }].compactMap { $0 }.max()
        }
    }

    public nonisolated let runtime: ProfileRuntime
    let context: DeviceContext
    private(set) var state: State = .unrestored
    var challenges = Challenges() {
        // The profile may be evicted only once nothing is pending (ProfileEntries).
        didSet { runtime.setPendingChallenges(until: challenges.pendingUntil(now: context.clock.now)) }
    }
    /// The passkey domain: from the config, else the one a client set (persisted). Loaded by the
    /// restore.
    var passkeyDomain: String?
    let scheduler: RefreshScheduler
    let logger: Logger
    /// The session's newest tokens while they could not be saved (a full disk when a refresh
    /// rotated them): the live session in memory, never used for a call until saved, so the
    /// authority still sees the pair unused and hands it back if the daemon restarts with the
    /// previous tokens. Saved again before each call that needs the session and on `saveRetry`'s
    /// timer; nil once saved.
    private var unsaved: StoredSession?
    /// Logins (code confirmations, passkey finishes) waiting for the authority or adopting their
    /// session: a pushed revocation does not check the session meanwhile (issue 19), since the
    /// session the login replaces is about to go anyway and ending it would report an expiry.
    var loginsInFlight = 0
    /// Issue 20: the calls whose outcome is not known yet (their answer was lost), one per kind:
    /// what the call was (challenge and code, ceremony and response) and the idempotency key a
    /// repeat of it sends again. Held in memory only.
    private var pendingCalls: [PendingCallKind: (call: String, key: [UInt8])] = [:]

    /// Issue 20: the calls a device repeats safely with an idempotency key.
    enum PendingCallKind: Hashable {
        case loginCode, passkeyFinish, contactVerification
    }
    /// The timer of the next save retry (held until it fires) and how many retries ran.
    private var saveRetry: (timer: (any RainTimer)?, count: Int) = (nil, 0)

    init(runtime: ProfileRuntime, context: DeviceContext) {
        self.runtime = runtime
        self.context = context
        self.logger = context.logger.child("profile")
        self.scheduler = RefreshScheduler(
            profile: runtime.name, clock: context.clock, policy: runtime.sessionPolicy)
    }

    var appID: String { runtime.settings.appID }
    private var policy: RainWalletSessionPolicy { runtime.sessionPolicy }
    private var clock: any RainClock { context.clock }

    /// The current session: the one loaded while restoring, the live one once restored.
    var session: StoredSession? {
        switch state {
        case .unrestored, .signedOut: return nil
        case .restoring(_, let session): return session
        case .authenticated(let session): return session
        }
    }

    /// Replaces the session, keeping the restore phase.
    private func setSession(_ session: StoredSession?) {
        switch state {
        case .restoring(let task, _): state = .restoring(task, session: session)
        case .unrestored, .signedOut, .authenticated: state = session.map(State.authenticated) ?? .signedOut
        }
    }

    /// The case of `state` (tests).
    var phase: Phase {
        switch state {
        case .unrestored: .unrestored
        case .restoring: .restoring
        case .signedOut: .signedOut
        case .authenticated: .authenticated
        }
    }

    // MARK: restore

    /// Loads the stored session once; later calls wait for the first.
    public func restore() async {
        switch state {
        case .unrestored:
            let task = Task { await self.loadStored() }
            state = .restoring(task, session: nil)
            await task.value
        case .restoring(let task, _):
            await task.value
        case .signedOut, .authenticated:
            return
        }
    }

    private func loadStored() async {
        passkeyDomain = runtime.settings.passkeyDomain
        if passkeyDomain == nil {
            passkeyDomain = await context.profileState.passkeyDomain(profile: runtime.name, logger: logger)
        }
        let stored = await context.storage.load(profile: runtime.name)
        setSession(stored)
        runtime.publish(session: stored)
        logger.info("session.restored", ["profile": runtime.name, "present": stored == nil ? "false" : "true"])
        if let stored, clock.now >= stored.expiresAt {
            // Expired while the daemon was down: one refresh attempt (with retries) may save it.
            if case .failure(let error) = await refreshNow(), !Self.isNotPersisted(error), session != nil {
                await end(.expired)
            }
        }
        // The restore is over: what is left of the loaded session is the profile's state.
        state = session.map(State.authenticated) ?? .signedOut
        schedule()
    }

    // MARK: configuration

    /// Applies a client's `RainWalletConfig`: first its session policy (`applySessionPolicy`), then
    /// its passkey domain, so a refused domain leaves the policy applied. The response carries the
    /// domain, the policy in effect and the policy keys the config file sets.
    /// - Throws: RAIN_102 for a policy value out of range, an invalid domain or one that differs
    ///   from the profile's.
    public func configure(
        passkeyDomain requested: String, sessionPolicy fields: SessionPolicyFields? = nil
    ) async throws(RainError) -> ConfigureProfileResponse {
        await restore()
        if let fields { try applySessionPolicy(fields) }
        var response = try await configureDomain(requested)
        response.sessionPolicy = SessionPolicyFields(runtime.sessionPolicy)
        response.configKeys = runtime.settings.sessionPolicyKeys.sorted()
        return response
    }

    /// Applies a client's session policy over the profile's current one, the config file's keys
    /// winning, and re-arms the refresh timer of the current session under it. Held in memory while
    /// the daemon runs (each provider sends it again).
    /// - Throws: RAIN_102 naming `sessionPolicy.<key>` for a value out of its range.
    func applySessionPolicy(_ fields: SessionPolicyFields) throws(RainError) {
        let current = runtime.sessionPolicy
        let policy = try runtime.settings.sessionPolicy(applying: fields.configValues, over: current)
        runtime.setSessionPolicy(policy)
        scheduler.update(policy: policy)
        if policy != current { schedule() }
        // refreshDueMs: when the current session's refresh is due under the new policy ("off"
        // without auto refresh, "none" without a session).
        let due = session.map { scheduler.due(for: $0).map { String($0.unixMilliseconds) } ?? "off" } ?? "none"
        logger.info(
            "profile.session_policy_set",
            [
                "profile": runtime.name, "refreshBufferMs": String(policy.refreshBuffer.milliseconds),
                "autoRefresh": policy.isAutoRefreshEnabled ? "true" : "false",
                "transientRetries": String(policy.transientRetries),
                "retryInitialDelayMs": String(policy.retryInitialDelay.milliseconds),
                "retryMaxDelayMs": String(policy.retryMaxDelay.milliseconds),
                "activeThresholdMs": String(policy.activeThreshold.milliseconds),
                "restoreTimeoutMs": String(policy.restoreTimeout.milliseconds),
                "configKeys": runtime.settings.sessionPolicyKeys.sorted().joined(separator: ","), "refreshDueMs": due,
            ])
    }

    /// The passkey domain step of `configure`: sets the domain when none is configured (validated,
    /// then persisted), accepts the same domain again, refuses a different one.
    /// - Throws: RAIN_102 for an invalid domain or one that differs from the profile's.
    private func configureDomain(_ requested: String) async throws(RainError) -> ConfigureProfileResponse {
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

    // MARK: login by code

    /// Sends a login code; replaces this profile's pending challenge.
    public func sendLoginCode(_ contact: RainWalletContact?) async throws(RainError) -> SendLoginCodeResponse {
        let normalized = try Self.normalized(contact)
        await restore()
        let result = try await context.authority.sendLoginCode(
            SendCodeRequest(appID: appID, deviceID: context.deviceID, contact: normalized))
        challenges.login = result
        return Self.codeSent(result)
    }

    /// The request's contact, normalized; RAIN_102 when it names none or it is malformed.
    static func normalized(_ contact: RainWalletContact?) throws(RainError) -> RainWalletContact {
        guard let contact else {
            throw RainError.invalid("the request names no contact: set an email or a phone number", field: "contact")
        }
        return try contact.normalized()
    }

    /// What a code send answers: where the code went and until when it is valid.
    static func codeSent(_ result: SendCodeResult) -> SendLoginCodeResponse {
        SendLoginCodeResponse(contact: result.contact, expiresAt: result.expiresAt)
    }

    /// Confirms the pending code; on success stores the session before answering.
    public func confirmLoginCode(_ code: String) async throws(RainError) -> ConfirmLoginCodeResponse {
        let trimmed = try Self.sixDigits(code, what: "a login code")
        await restore()
        guard let challenge = challenges.login else {
            throw RainError.invalid(
                "no login code is pending on this profile; send one first", field: "code", reason: "no_pending_code")
        }
        // One idempotency key per logical confirm (this challenge, this code), kept while its outcome
        // is unknown: a repeat after a lost answer gets the first login back, never a second one.
        let key = try idempotencyKey(.loginCode, for: [challenge.challengeID, trimmed])
        loginsInFlight += 1
        defer { loginsInFlight -= 1 }
        let result: LoginResult
        do {
            result = try await context.authority.confirmLoginCode(
                ConfirmCodeRequest(
                    appID: appID, deviceID: context.deviceID, challengeID: challenge.challengeID, code: trimmed,
                    devicePublicKey: context.device.signer.publicKey.wireBytes, idempotencyKey: key))
        } catch {
            settle(.loginCode, key: key, after: error)
            throw error
        }
        settle(.loginCode, key: key)
        if challenges.login?.challengeID == challenge.challengeID { challenges.login = nil }
        try await adopt(result, contact: challenge.contact, method: StoredSession.codeMethod)
        return ConfirmLoginCodeResponse(session: runtime.snapshot(), accountCreated: result.accountCreated)
    }

    /// Issue 20: the idempotency key of a logical call of `kind` (`parts` say which: the challenge
    /// and the code, the ceremony and the response): the key of the pending call of that kind when
    /// this one repeats it, else a fresh random one (which replaces it).
    func idempotencyKey(_ kind: PendingCallKind, for parts: [String]) throws(RainError) -> [UInt8] {
        let call = parts.joined(separator: "\u{0}")
        if let pending = pendingCalls[kind], pending.call == call { return pending.key }
        let key = try SecureRandom.bytes(count: 32)
        pendingCalls[kind] = (call, key)
        return key
    }

    /// Issue 20: forgets the key of a call of `kind` once its outcome is known (an answer, or an
    /// error that says what happened); keeps it while the outcome is unknown, for the repeat.
    func settle(_ kind: PendingCallKind, key: [UInt8], after error: RainError? = nil) {
        if let error, Self.isOutcomeUnknown(error) { return }
        if pendingCalls[kind]?.key == key { pendingCalls[kind] = nil }
    }

    /// Whether a call may have taken effect without its answer reaching the device: RAIN_501
    /// `outcome_unknown`, or the authority unreachable or past its deadline.
    static func isOutcomeUnknown(_ error: RainError) -> Bool {
        error.code == .network || error.details.reason == AuthorityOutcome.unknownReason
    }

    /// A code as typed, trimmed; RAIN_102 `malformed_code` unless it is 6 digits.
    static func sixDigits(_ code: String, what: String) throws(RainError) -> String {
        let trimmed = code.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.utf8.count == 6, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw RainError.invalid("\(what) is 6 digits", field: "code", reason: "malformed_code")
        }
        return trimmed
    }

    /// Stores a login's session before anything answers, publishes it and schedules its refresh:
    /// the one path of code and passkey logins.
    func adopt(_ result: LoginResult, contact: RainWalletContact?, method: String) async throws(RainError) {
        let stored = StoredSession(
            accountID: result.accountID, walletID: result.walletID, accessToken: result.tokens.accessToken,
            refreshToken: result.tokens.refreshToken, expiresAt: clock.now.adding(result.tokens.accessLifetime),
            lifetimeSeconds: result.tokens.accessLifetime.timeInterval, contact: contact, method: method)
        try await context.storage.save(stored, profile: runtime.name)
        setSession(stored)
        clearUnsaved()
        // A verification sent for the previous session's account cannot complete on this one.
        challenges.verification = nil
        scheduler.resetPhase()
        runtime.publish(session: stored)
        schedule()
        logger.info(
            "login",
            [
                "profile": runtime.name, "account": result.accountID, "created": result.accountCreated ? "true" : "false",
                "method": method,
            ])
    }

    // MARK: logout

    /// Ends the session: wipes it locally first, then revokes it at the authority (best effort).
    /// Never fires the expiry event.
    public func logout() async throws(RainError) -> LogoutResponse {
        await restore()
        challenges.login = nil
        challenges.verification = nil
        scheduler.stop()
        guard let ending = session else {
            runtime.publish(session: nil)
            return LogoutResponse(hadSession: false, revokedAtAuthority: false)
        }
        try await context.storage.delete(profile: runtime.name)
        setSession(nil)
        clearUnsaved()
        runtime.publish(session: nil)
        var revoked = true
        do {
            try await context.authority.revokeSession(
                appID: appID, refreshToken: ending.refreshToken, proof: DeviceProof(holder: context.device))
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
        let info = try await read("read the account") { (authority, appID, token, proof) async throws(RainError) in
            try await authority.accountInfo(appID: appID, accessToken: token, proof: proof)
        }
        return Self.accountResponse(info)
    }

    /// A read with the session's access token: transient failures retried with the policy.
    /// With a remote authority the read, its retries and any refresh it needs end within the
    /// authority's read deadline (README "Bounded waits"): each call waits no longer than what is
    /// left, and no retry starts whose backoff would end past it.
    private func read<T: Sendable>(
        _ what: String, _ call: @Sendable (any Authority, String, String, DeviceProof) async throws(RainError) -> T
    ) async throws(RainError) -> T {
        guard let bound = context.authority.deadlines?.read else {
            return try await withSession(what: what, transientRetries: policy.transientRetries, call)
        }
        let end = clock.now.adding(bound)
        let result = await AuthorityDeadlines.$operationDeadline.withValue(end) { () async -> Result<T, RainError> in
            do throws(RainError) {
                return .success(
                    try await withSession(what: what, transientRetries: policy.transientRetries, deadline: end, call))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// What Account/Get answers for an authority's `AccountInfo`.
    static func accountResponse(_ info: AccountInfo) -> AccountResponse { AccountResponse(info) }

    /// The wallet behind the session: its id, creation time and addresses. A read, retried and
    /// refreshed exactly like `account()`.
    /// - Throws: RAIN_201 without a live session; RAIN_404 when the account has no wallet; RAIN_301
    ///   when the authority stayed unreachable.
    public func wallet() async throws(RainError) -> WalletResponse {
        let info = try await read("read the wallet") { (authority, appID, token, proof) async throws(RainError) in
            try await authority.wallet(appID: appID, accessToken: token, proof: proof)
        }
        return Self.walletResponse(info)
    }

    /// What Wallet/Get answers for an authority's `WalletInfo`.
    static func walletResponse(_ info: WalletInfo) -> WalletResponse { WalletResponse(info) }

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
        let chain = try Self.named(chain)
        let secrets = try await export()
        let key = chain == .ethereum ? secrets.ethereumPrivateKeyHex : secrets.solanaKeypairBase58
        return ExportPrivateKeyResponse(chain: chain, privateKey: key)
    }

    /// The chain a private key export names.
    /// - Throws: RAIN_102 (`field: "chain"`) when it names none.
    static func named(_ chain: RainChain?) throws(RainError) -> RainChain {
        guard let chain else { throw RainError.invalid("name a chain: ethereum or solana", field: "chain") }
        return chain
    }

    /// RAIN_202 unless the daemon's config sets `allowExport` for this profile. No client can set it.
    private func requireExportAllowed() throws(RainError) {
        guard runtime.settings.isExportAllowed else {
            throw RainError(
                .unauthorized,
                "export is not allowed for profile \(runtime.name); set \"allowExport\": true for it in the daemon's config "
                    + "file and confirm the change with `rainwallet settings confirm` (or have the machine's policy set it)",
                details: .init(reason: "export_not_allowed"))
        }
    }

    /// The wallet's secrets, after the permission check. Exports are treated like sends: a
    /// transient failure is reported, never retried automatically.
    private func export() async throws(RainError) -> WalletSecrets {
        try requireExportAllowed()
        let secrets = try await withSession(what: "export the wallet", transientRetries: 0) {
            (authority, appID, token, proof) async throws(RainError) in
            try await authority.exportWallet(appID: appID, accessToken: token, proof: proof)
        }
        logger.info("wallet.exported", ["profile": runtime.name])
        return secrets
    }

    /// Runs one authority call with the session's access token and the device's proof (its keys,
    /// in-process: a remote authority proves them on its connection): the shared path of reads,
    /// sends and exports. Transient failures are retried `transientRetries` times with the policy's
    /// backoff (`RetrySchedule`). A token the authority refuses as rotated or expired gets one
    /// refresh and one more try (the refusal means the call did nothing); a session revoked at the
    /// authority ends here (`revokedElsewhere` when another device logged in, else `refreshFailed`).
    /// - Throws: RAIN_201 without a live session; RAIN_301 when the authority stayed unreachable;
    ///   any other refusal as the authority raised it.
    func withSession<T: Sendable>(
        what: String, transientRetries: Int, deadline: Date? = nil,
        _ call: @Sendable (any Authority, String, String, DeviceProof) async throws(RainError) -> T
    ) async throws(RainError) -> T {
        await restore()
        // Tokens that could not be saved are never used: save them first, or refuse the call.
        try await requireSaved()
        var isRefreshed = false
        let retry = RetrySchedule(policy: policy, retries: transientRetries)
        let result = await retry.run(clock: clock, deadline: deadline) { _ -> RetryStep<T> in
            guard let current = session else { return .finished(.failure(noSessionError())) }
            if unsaved != nil { return .finished(.failure(Self.notPersistedError(nil))) }
            let result: Result<T, RainError>
            do throws(RainError) {
                result = .success(
                    try await call(context.authority, appID, current.accessToken, DeviceProof(holder: context.device)))
            } catch {
                result = .failure(error)
            }
            // Re-checked below against `session`: the call may have raced a refresh, a login or a logout.
            switch result {
            case .success(let value):
                return .finished(.success(value))
            case .failure(let error) where error.code == .sessionExpired:
                let reason = SessionEndReason(reasonOf: error)
                if reason?.isStaleAccessToken == true {
                    // Rotated meanwhile, or expired before the scheduler ran: refresh once, then retry.
                    if session?.accessToken != current.accessToken { return .again }
                    if !isRefreshed {
                        switch await refreshNow() {
                        case .success:
                            isRefreshed = true
                            return .again
                        case .failure(let error) where Self.isNotPersisted(error):
                            return .finished(.failure(error))
                        case .failure:
                            break
                        }
                    }
                }
                if session?.refreshToken == current.refreshToken {
                    await end(reason?.deviceExpiry ?? .refreshFailed, cause: error.details.reason)
                }
                return .finished(.failure(noSessionError()))
            case .failure(let error) where Self.isDefinitive(error) || error.code == .unavailable:
                return .finished(.failure(error))
            case .failure(let error):
                return .transient(error)
            }
        } exhausted: { error in
            guard error.code == .network else { return error }
            return RainError(
                .network, "the authority could not be reached to \(what); try again",
                underlying: SendableErrorDescription(error))
        }
        return try result.get()
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

    /// Returns once the stored session has loaded, if there is one: a call the user confirms asks
    /// this before the prompt, so nobody confirms a call that would be refused for want of a
    /// session (the call itself checks again, as the session may end while the prompt is open).
    /// - Throws: RAIN_201 saying why there is no session.
    func requireSession() async throws(RainError) {
        await restore()
        guard session != nil else { throw noSessionError() }
    }

    /// RAIN_201 saying why there is no session.
    func noSessionError() -> RainError {
        if let reason = runtime.endedReason ?? endingReason { return Self.endedError(reason) }
        return RainError(
            .sessionExpired, "no session; log in first", details: .init(reason: SessionEndReason.noSession.rawValue))
    }

    /// RAIN_201 for a session that ended without logout.
    static func endedError(_ reason: ExpiryReason) -> RainError {
        RainError(
            .sessionExpired, "the session ended (\(reason.rawValue)); log in again",
            details: .init(reason: SessionEndReason(reason).rawValue))
    }

    /// Calls of `refreshSession()` so far (tests check they share one refresh).
    private(set) var refreshCallCount = 0

    /// Why the session is ending while `end` waits for its file to be wiped: the runtime publishes
    /// the reason only after that, and a call served meanwhile must not report "no session".
    private var endingReason: ExpiryReason?

    /// One refresh through the scheduler: single flight, with the policy's retries unless this is
    /// a scheduled retry at the cap.
    private func refreshNow(isScheduledRetry: Bool = false) async -> Result<Void, RainError> {
        await scheduler.refresh(isScheduledRetry: isScheduledRetry) { number in
            await self.refreshAttempt(number: number)
        }
    }

    /// One refresh request for the current session.
    private func refreshAttempt(number: Int) async -> RetryStep<Void> {
        // Rotating tokens that are not saved would lose them for good: save them first.
        if unsaved != nil, await !saveUnsaved() { return .finished(.failure(Self.notPersistedError(nil))) }
        guard let current = session else { return .finished(.failure(noSessionError())) }
        let outcome: Result<SessionTokens, RainError>
        do {
            // No signature and no device clock here: the device key is proven in-process, or once
            // per connection by a remote authority.
            outcome = .success(
                try await context.authority.refreshSession(
                    RefreshRequest(appID: appID, deviceID: context.deviceID, refreshToken: current.refreshToken),
                    proof: DeviceProof(holder: context.device)))
        } catch {
            outcome = .failure(error)
        }
        // Re-check after the await: a logout or a new login may have replaced the session.
        guard let latest = session, latest.refreshToken == current.refreshToken else {
            return .finished(session == nil ? .failure(noSessionError()) : .success(()))
        }
        switch outcome {
        case .success(let tokens):
            var renewed = latest
            renewed.accessToken = tokens.accessToken
            renewed.refreshToken = tokens.refreshToken
            renewed.expiresAt = clock.now.adding(tokens.accessLifetime)
            renewed.lifetimeSeconds = tokens.accessLifetime.timeInterval
            setSession(renewed)
            do {
                try await context.storage.save(renewed, profile: runtime.name)
            } catch {
                return .finished(.failure(keepUnsaved(renewed, cause: error)))
            }
            runtime.publish(session: renewed)
            logger.info("session.refreshed", ["profile": runtime.name])
            // A pair handed back long after its rotation (the device could not save it) may have no
            // access lifetime left: rotate on at once with its refresh token.
            if tokens.accessLifetime <= .zero, session == renewed { return .again }
            return .finished(.success(()))
        case .failure(let error) where Self.isDefinitive(error):
            let reason = SessionEndReason(reasonOf: error)?.deviceExpiry ?? .refreshFailed
            logger.warning(
                "refresh.refused", ["profile": runtime.name, "reason": error.details.reason ?? error.code.description])
            await end(reason, cause: error.details.reason)
            return .finished(.failure(Self.endedError(reason)))
        case .failure(let error):
            logger.warning(
                "refresh.transient_failure", ["profile": runtime.name, "attempt": "\(number)", "error": error.code.description])
            return .transient(error)
        }
    }

    // MARK: saving refreshed tokens

    /// Where the save-retry timers fire.
    private static let saveRetryQueue = DispatchQueue(label: "rainwallet.save-retry")

    /// RAIN_502 `session_not_persisted`: the refreshed tokens are not saved. `cause` (the storage's
    /// error, which names the file, never a token) is shown when known.
    static func notPersistedError(_ cause: RainError?) -> RainError {
        let why = cause.map { " (\($0.message))" } ?? ""
        return RainError(
            .internalError,
            "the session was refreshed but its new tokens could not be saved\(why); free disk space in the daemon's "
                + "state directory (sessions/): the session is kept and saved again automatically, and calls are "
                + "refused with this error until then",
            details: .init(reason: SessionSnapshot.sessionNotPersisted), underlying: cause)
    }

    /// Whether `error` is the refusal of tokens that are not saved yet.
    static func isNotPersisted(_ error: RainError) -> Bool {
        error.code == .internalError && error.details.reason == SessionSnapshot.sessionNotPersisted
    }

    /// A refresh rotated the tokens but the save failed: keep `renewed` in memory, unused, publish
    /// the storage warning, log once and retry the save on a timer.
    /// - Returns: the RAIN_502 the refresh answers.
    private func keepUnsaved(_ renewed: StoredSession, cause: RainError) -> RainError {
        let isFirst = unsaved == nil
        unsaved = renewed
        runtime.publish(session: renewed, isUnsaved: true)
        if isFirst {
            logger.error("refresh.not_persisted", ["profile": runtime.name, "error": cause.message])
            saveRetry.count = 0
        }
        scheduleSaveRetry()
        return Self.notPersistedError(cause)
    }

    /// Saves the unsaved tokens, if any. On success they become the session as usual (published
    /// without the warning, logged once); on failure the retry timer is armed again.
    /// - Returns: whether nothing is left unsaved.
    @discardableResult
    func saveUnsaved() async -> Bool {
        guard let pending = unsaved else { return true }
        do {
            try await context.storage.save(pending, profile: runtime.name)
        } catch {
            // Re-checked after the await: a logout or a login may have replaced the session.
            if unsaved == pending { scheduleSaveRetry() }
            return unsaved == nil
        }
        guard unsaved == pending else { return unsaved == nil }
        clearUnsaved()
        runtime.publish(session: pending)
        logger.info("session.persisted", ["profile": runtime.name])
        if clock.now >= pending.expiresAt {
            // Its access token expired while it waited: refresh now (not from here, which may run
            // inside a refresh), rather than let the timer end a session whose refresh token works.
            Task { await self.refreshAfterSave() }
        } else {
            schedule()
        }
        return true
    }

    /// Refreshes a session saved after its access token expired, then re-arms the timer.
    private func refreshAfterSave() async {
        guard session != nil, unsaved == nil else { return }
        _ = await refreshNow()
        schedule()
    }

    /// Throws RAIN_502 `session_not_persisted` unless the session's tokens are saved (saving them
    /// now when they are not).
    private func requireSaved() async throws(RainError) {
        if unsaved != nil, await !saveUnsaved() { throw Self.notPersistedError(nil) }
    }

    /// Arms the next save retry: the policy's backoff (`RetrySchedule`, doubling up to
    /// `retryMaxDelay`), then at the cap until the save succeeds, on the injected clock.
    private func scheduleSaveRetry() {
        saveRetry.timer?.cancel()
        saveRetry.count += 1
        let delay = RetrySchedule(policy: policy, retries: 0).delay(beforeRetry: saveRetry.count)
        saveRetry.timer = clock.schedule(after: delay, on: Self.saveRetryQueue) { [weak self] in
            guard let self else { return }
            Task { await self.saveUnsaved() }
        }
    }

    /// Forgets unsaved tokens and their retry (saved, or replaced by a login, a logout or an end).
    private func clearUnsaved() {
        unsaved = nil
        saveRetry.timer?.cancel()
        saveRetry = (nil, 0)
    }

    /// Whether the session's tokens are waiting to be saved (tests).
    var hasUnsavedSession: Bool { unsaved != nil }

    /// A refusal that retrying cannot fix.
    static func isDefinitive(_ error: RainError) -> Bool {
        error.code == .sessionExpired || error.code == .unauthorized || error.code == .invalidArgument
    }

    /// Ends the session without logout: wipes it and tells every watcher once.
    private func end(_ reason: ExpiryReason, cause: String? = nil) async {
        guard session != nil else { return }
        scheduler.stop()
        endingReason = reason
        defer { endingReason = nil }
        setSession(nil)
        clearUnsaved()
        do {
            try await context.storage.delete(profile: runtime.name)
        } catch {
            logger.error("session.wipe_failed", ["profile": runtime.name, "error": error.message])
        }
        runtime.publish(session: nil, expiry: reason)
        logger.info("session.ended", ["profile": runtime.name, "reason": reason.rawValue])
        await recordEnd(reason, cause: cause)
    }

    // MARK: scheduler

    /// Arms the scheduler's timer for the current session (disarms it without one).
    private func schedule() {
        scheduler.arm(for: session) { [weak self] in
            guard let self else { return }
            Task { await self.tick() }
        }
    }

    /// The timer fired: re-check against the wall clock (it may have jumped) and act.
    func tick() async {
        scheduler.cancelTimer()
        guard let current = session else { return }
        // Unsaved tokens: the save-retry timer runs until they are saved, then re-arms this one. An
        // access token that expires meanwhile ends nothing: its refresh token works once saved.
        if unsaved != nil { return }
        switch scheduler.action(for: current) {
        case .end(let reason):
            await end(reason)
            return
        case .refresh(let isScheduledRetry):
            _ = await refreshNow(isScheduledRetry: isScheduledRetry)
        case .wait:
            break
        }
        schedule()
    }

    /// Whether a scheduler timer is armed (tests).
    var isScheduled: Bool { scheduler.isArmed }
}
