import Dispatch
import FoundationEssentials
import RainAccess
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainWire

// Refreshed tokens that could not be saved: kept in memory, unused, and saved again on a timer.
extension ProfileSession {
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
    func keepUnsaved(_ renewed: StoredSession, cause: RainError) -> RainError {
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
    func requireSaved() async throws(RainError) {
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
    func clearUnsaved() {
        unsaved = nil
        saveRetry.timer?.cancel()
        saveRetry = (nil, 0)
    }

    /// Whether the session's tokens are waiting to be saved (tests).
    var hasUnsavedSession: Bool { unsaved != nil }
}
