import Dispatch
import FoundationEssentials
import RainAccess
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainPasskeyDomain
import RainWire

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
    var unsaved: StoredSession?
    /// Logins (code confirmations, passkey finishes) waiting for the authority or adopting their
    /// session: a pushed revocation does not check the session meanwhile, since the
    /// session the login replaces is about to go anyway and ending it would report an expiry.
    var loginsInFlight = 0
    /// The calls whose outcome is not known yet (their answer was lost), one per kind:
    /// what the call was (challenge and code, ceremony and response) and the idempotency key a
    /// repeat of it sends again. Held in memory only.
    var pendingCalls: [PendingCallKind: (call: String, key: [UInt8])] = [:]

    /// The calls a device repeats safely with an idempotency key.
    enum PendingCallKind: Hashable {
        case loginCode, passkeyFinish, contactVerification
    }
    /// The idempotency keys of this profile's recent signatures (their SHA-256) and the SHA-256 of
    /// the request each came with: a key sent again with another request is refused before anyone
    /// is asked. In memory, at most `SigningKeys.limit`; the authority keeps every key durably.
    var signingKeys = SigningKeys()
    /// The timer of the next save retry (held until it fires) and how many retries ran.
    var saveRetry: (timer: (any RainTimer)?, count: Int) = (nil, 0)

    init(runtime: ProfileRuntime, context: DeviceContext) {
        self.runtime = runtime
        self.context = context
        self.logger = context.logger.child("profile")
        self.scheduler = RefreshScheduler(
            profile: runtime.name, clock: context.clock, policy: runtime.sessionPolicy)
    }

    var appID: String { runtime.settings.appID }
    var policy: RainWalletSessionPolicy { runtime.sessionPolicy }
    var clock: any RainClock { context.clock }

    /// The current session: the one loaded while restoring, the live one once restored.
    var session: StoredSession? {
        switch state {
        case .unrestored, .signedOut: return nil
        case .restoring(_, let session): return session
        case .authenticated(let session): return session
        }
    }

    /// Replaces the session, keeping the restore phase.
    func setSession(_ session: StoredSession?) {
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
        passkeyDomain requested: String, sessionPolicy fields: SessionPolicy? = nil
    ) async throws(RainError) -> ConfigureProfileResponse {
        await restore()
        if let fields { try applySessionPolicy(fields) }
        var response = try await configureDomain(requested)
        response.sessionPolicy = SessionPolicy(runtime.sessionPolicy)
        response.configKeys = runtime.settings.sessionPolicyKeys.sorted()
        return response
    }

    /// Applies a client's session policy over the profile's current one, the config file's keys
    /// winning, and re-arms the refresh timer of the current session under it. Held in memory while
    /// the daemon runs (each provider sends it again).
    /// - Throws: RAIN_102 naming `sessionPolicy.<key>` for a value out of its range.
    func applySessionPolicy(_ fields: SessionPolicy) throws(RainError) {
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
                // Applying a provider's config never moves the domain: a change is asked for on
                // its own, by the profile's app, and confirmed by the user.
                let how =
                    runtime.settings.passkeyDomain != nil
                    ? "the daemon's config sets it (profiles.\(runtime.name).passkeyDomain)"
                    : "its app moves it with RainProvider.changePasskeyDomain(to:) or `rainwallet domain set \(domain)`, "
                        + "which the user confirms"
                throw RainError.invalid(
                    "profile \(runtime.name) uses passkey domain \(current), not \(domain): \(how)",
                    field: "passkeyDomain", reason: "passkey_domain_mismatch")
            }
            return ConfigureProfileResponse(passkeyDomain: current)
        }
        try await context.profileState.save(passkeyDomain: domain, profile: runtime.name)
        passkeyDomain = domain
        logger.info("profile.passkey_domain_set", ["profile": runtime.name, "domain": domain])
        return ConfigureProfileResponse(passkeyDomain: domain)
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
            return LogoutResponse(hadSession: false, isRevokedAtAuthority: false)
        }
        try await context.storage.delete(profile: runtime.name)
        setSession(nil)
        clearUnsaved()
        runtime.publish(session: nil)
        var revoked = true
        do {
            _ = try await context.authority.revokeSession(
                AuthorityRevokeSessionRequest(appID: appID, refreshToken: ending.refreshToken),
                caller: AuthorityCaller(holder: context.device))
        } catch {
            revoked = false
            logger.warning("logout.revoke_failed", ["profile": runtime.name, "error": error.code.description])
        }
        logger.info("logout", ["profile": runtime.name, "revoked": revoked ? "true" : "false"])
        return LogoutResponse(hadSession: true, isRevokedAtAuthority: revoked)
    }

    // MARK: refresh

    /// Calls of `refreshSession()` so far (tests check they share one refresh).
    var refreshCallCount = 0

    /// Why the session is ending while `end` waits for its file to be wiped: the runtime publishes
    /// the reason only after that, and a call served meanwhile must not report "no session".
    var endingReason: ExpiryReason?

    // MARK: end

    /// Ends the session without logout: wipes it and tells every watcher once.
    func end(_ reason: ExpiryReason, cause: String? = nil) async {
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
}
