import Dispatch
import FoundationEssentials
import RainAccess
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainWire

// Refreshing the session through the scheduler (single flight, retries), and the scheduler's timer.
extension ProfileSession {
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

    /// Whether a session is stored, once the stored one (if any) has loaded.
    func hasSession() async -> Bool {
        await restore()
        return session != nil
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

    /// One refresh through the scheduler: single flight, with the policy's retries unless this is
    /// a scheduled retry at the cap.
    func refreshNow(isScheduledRetry: Bool = false) async -> Result<Void, RainError> {
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
                    caller: AuthorityCaller(holder: context.device)
                ).tokens)
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
            context.health.refreshWorked()
            context.metrics?.refreshed("ok")
            logger.info("session.refreshed", ["profile": runtime.name])
            // A pair handed back long after its rotation (the device could not save it) may have no
            // access lifetime left: rotate on at once with its refresh token.
            if tokens.accessLifetime <= .zero, session == renewed { return .again }
            return .finished(.success(()))
        case .failure(let error) where Self.isDefinitive(error):
            let reason = SessionEndReason(reasonOf: error)?.deviceExpiry ?? .refreshFailed
            context.metrics?.refreshed("refused")
            logger.warning(
                "refresh.refused", ["profile": runtime.name, "reason": error.details.reason ?? error.code.description])
            await end(reason, cause: error.details.reason)
            return .finished(.failure(Self.endedError(reason)))
        case .failure(let error):
            context.metrics?.refreshed("failed")
            logger.warning(
                "refresh.transient_failure", ["profile": runtime.name, "attempt": "\(number)", "error": error.code.description])
            // No answer is the link's to tell (its client saw it); an answer that failed, or keys
            // that could not sign, would otherwise leave the link looking connected.
            if error.code != .network { context.health.refreshFailed(error.message, now: clock.now) }
            return .transient(error)
        }
    }

    /// A refusal that retrying cannot fix.
    static func isDefinitive(_ error: RainError) -> Bool {
        error.code == .sessionExpired || error.code == .unauthorized || error.code == .invalidArgument
    }

    /// Arms the scheduler's timer for the current session (disarms it without one).
    func schedule() {
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
