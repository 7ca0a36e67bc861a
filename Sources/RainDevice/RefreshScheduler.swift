import Dispatch
import FoundationEssentials
import RainCore
import Synchronization

/// When a profile's session is refreshed, and how often (docs/user-guide.md "Sessions"). The session actor owns the
/// session and performs each refresh request; this type owns the timing around it:
///
/// - one timer (a Dispatch timer through the injected `RainClock`, on the scheduler's own queue)
///   armed for `expiresAt − refreshBuffer` (the buffer clamped to half the lifetime), or for the
///   expiry itself when auto refresh is off. A timer never waits more than `recheckInterval` on the
///   monotonic clock, and every firing re-checks against the wall clock (`action(for:)`), so a
///   wall-clock jump or a suspend is noticed within that interval;
/// - single flight: the timer and any number of callers share one refresh (`refresh`);
/// - the backoff: transient failures are retried with `RetrySchedule` (`transientRetries`,
///   `retryInitialDelay` doubling up to `retryMaxDelay`); once the retries run out the session
///   stays usable and the next attempt comes at the cap, as a single call, until it expires.
final class RefreshScheduler: Sendable {
    /// The longest a timer waits before re-checking the wall clock.
    static let recheckInterval: Duration = .seconds(30)

    /// Where the refresh of the current session stands.
    enum Phase: Sendable, Equatable {
        /// Refresh at `expiresAt − buffer`, with the full retries.
        case onSchedule
        /// The retries of the last refresh ran out: the next attempt comes no earlier than `next`,
        /// as a single call.
        case retryingAtCap(next: Date)
    }

    /// What a timer firing calls for, after re-checking the wall clock.
    enum Action: Sendable, Equatable {
        /// The session is past its expiry: end it with this reason.
        case end(ExpiryReason)
        /// A refresh is due (`isScheduledRetry`: a single call at the cap).
        case refresh(isScheduledRetry: Bool)
        /// Nothing yet: arm the timer again.
        case wait
    }

    private struct State {
        var phase: Phase = .onSchedule
        /// The armed timer; the timer only lives while this handle does.
        var timer: (any RainTimer)?
        /// The refresh in flight, shared by every caller.
        var flight: Task<Result<Void, RainError>, Never>?
        /// The service is being replaced (a live storage migration): no timer, no new refresh.
        var isRetired = false
    }

    private let policyState: Mutex<RainWalletSessionPolicy>
    private let clock: any RainClock
    private let queue: DispatchQueue
    private let state = Mutex(State())

    /// The profile's session policy (a client's `Profile/Configure` may change it).
    var policy: RainWalletSessionPolicy { policyState.withLock { $0 } }

    /// Uses `policy` from now on; the caller re-arms the timer for its session.
    func update(policy: RainWalletSessionPolicy) { policyState.withLock { $0 = policy } }

    /// - Parameters:
    ///   - profile: the profile's name (labels the timer queue).
    ///   - clock: the injected clock: wall time for due dates, timers, backoff waits.
    ///   - policy: the profile's session policy.
    init(profile: String, clock: any RainClock, policy: RainWalletSessionPolicy) {
        self.clock = clock
        self.policyState = Mutex(policy)
        self.queue = DispatchQueue(label: "rainwallet.refresh.\(profile)")
    }

    /// The current phase (tests, logs).
    var phase: Phase { state.withLock { $0.phase } }

    /// Whether a timer is armed.
    var isArmed: Bool { state.withLock { $0.timer != nil } }

    /// When the next refresh of `session` is due: `expiresAt − buffer`, or later while retrying at
    /// the cap; nil when auto refresh is off.
    func due(for session: StoredSession) -> Date? {
        guard policy.isAutoRefreshEnabled else { return nil }
        let lifetime = Duration.milliseconds(Int64(session.lifetimeSeconds * 1000))
        let due = session.expiresAt.adding(.zero - policy.effectiveRefreshBuffer(lifetime: lifetime))
        if case .retryingAtCap(let next) = phase { return max(due, next) }
        return due
    }

    /// Arms one timer for the next thing to do for `session` (refresh, retry or expiry), replacing
    /// any armed one; without a session only disarms. `fire` runs on the scheduler's queue.
    func arm(for session: StoredSession?, fire: @escaping @Sendable () -> Void) {
        cancelTimer()
        guard let session, !state.withLock({ $0.isRetired }) else { return }
        var wake = session.expiresAt
        if let due = due(for: session) { wake = min(wake, due) }
        let untilWake = Duration.milliseconds(Int64(wake.timeIntervalSince(clock.now) * 1000))
        let wait = max(.zero, min(Self.recheckInterval, untilWake))
        let timer = clock.schedule(after: wait, on: queue, fire)
        state.withLock { $0.timer = timer }
    }

    /// Drops the armed timer (it fired, or its session changed).
    func cancelTimer() {
        let timer = state.withLock { s -> (any RainTimer)? in
            defer { s.timer = nil }
            return s.timer
        }
        timer?.cancel()
    }

    /// Back on schedule: after a refresh, a login, a logout or an end.
    func resetPhase() { state.withLock { $0.phase = .onSchedule } }

    /// Stops everything for the session that is going away: the timer and the retries at the cap.
    func stop() {
        cancelTimer()
        resetPhase()
    }

    /// What a timer firing calls for, re-checked against the wall clock (it may have jumped).
    func action(for session: StoredSession) -> Action {
        let now = clock.now
        if now >= session.expiresAt {
            return .end(policy.isAutoRefreshEnabled ? .refreshFailed : .expired)
        }
        if let due = due(for: session), now >= due {
            if case .retryingAtCap = phase { return .refresh(isScheduledRetry: true) }
            return .refresh(isScheduledRetry: false)
        }
        return .wait
    }

    /// Refreshes, sharing a refresh already in flight. `attempt` makes one request (on the session
    /// actor); transient failures are retried with the policy's backoff, or not at all for a
    /// scheduled retry at the cap. A success puts the scheduler back on schedule; running out of
    /// retries moves it to the cap and answers RAIN_301 (the session stays usable).
    ///
    /// A caller joins the flight on its own actor (`isolation`), before its first suspension: a
    /// refresh asked for on the session actor shares a flight that is still running, whatever the
    /// scheduling of the threads.
    /// - Returns: the outcome every sharer of the flight gets.
    func refresh(
        isScheduledRetry: Bool, isolation: isolated (any Actor)? = #isolation,
        _ attempt: @escaping @Sendable (_ number: Int) async -> RetryStep<Void>
    ) async -> Result<Void, RainError> {
        let retry = RetrySchedule(policy: policy, retries: isScheduledRetry ? 0 : policy.transientRetries)
        let task = state.withLock { s -> Task<Result<Void, RainError>, Never> in
            if let flight = s.flight { return flight }
            if s.isRetired {
                return Task {
                    .failure(
                        RainError(
                            .provider, "the daemon is moving its keys: try again when `rainwallet storage migrate` ends",
                            details: .init(reason: "storage_migrating")))
                }
            }
            let flight = Task { await self.run(retry, attempt) }
            s.flight = flight
            return flight
        }
        let result = await task.value
        state.withLock { s in
            if s.flight == task { s.flight = nil }
        }
        return result
    }

    /// Stops for good (the service is being replaced by one on new keys): disarms the timer,
    /// refuses new refreshes, and returns once the refresh in flight, if any, has ended (its
    /// tokens saved under the keys it started with).
    func retire() async {
        let flight = state.withLock { s -> Task<Result<Void, RainError>, Never>? in
            s.isRetired = true
            return s.flight
        }
        cancelTimer()
        _ = await flight?.value
    }

    private func run(_ retry: RetrySchedule, _ attempt: @Sendable (_ number: Int) async -> RetryStep<Void>) async
        -> Result<Void, RainError>
    {
        let result = await retry.run(clock: clock, attempt) { error in
            let maxDelay = policy.retryMaxDelay
            let next = clock.now.adding(maxDelay)
            state.withLock { $0.phase = .retryingAtCap(next: next) }
            guard error.code == .network else {
                // Not the link (the device's own keys, an authority that answered with a failure):
                // its own code and reason, so a TPM that went away never reads as the authority.
                var kept = error
                kept.message = "the session could not be refreshed (it stays usable until it expires): \(error.message)"
                kept.details.retryAfterMilliseconds = UInt64(maxDelay.milliseconds)
                return kept
            }
            return RainError(
                .network, "the authority could not be reached to refresh the session; it stays usable until it expires",
                details: .init(retryAfterMilliseconds: UInt64(maxDelay.milliseconds)),
                underlying: SendableErrorDescription(error))
        }
        if case .success = result { resetPhase() }
        return result
    }
}
