import Foundation
import RainCore
import RainTestSupport
import Synchronization
import Testing

@testable import RainDevice

/// A gate a test opens by hand: `wait()` suspends until `open()`.
final class Gate: Sendable {
    private struct State {
        var isOpen = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let isOpen = state.withLock { s -> Bool in
                if !s.isOpen { s.waiters.append(c) }
                return s.isOpen
            }
            if isOpen { c.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.isOpen = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }
}

/// Calls a scheduler's refresh from an actor, counting the calls: each joins the flight on
/// this actor before it suspends, so `count` callers are in the flight.
actor RefreshCaller {
    private(set) var count = 0

    func refresh(_ scheduler: RefreshScheduler, _ attempt: @escaping @Sendable (Int) async -> RetryStep<Void>) async
        -> Result<Void, RainError>
    {
        count += 1
        return await scheduler.refresh(isScheduledRetry: false, attempt)
    }
}

/// A session as the scheduler sees it: expiring `lifetime` from now.
private func session(expiringIn lifetime: Duration, on clock: ManualClock) -> StoredSession {
    StoredSession(
        accountID: "acct_1", walletID: "wal_1", accessToken: "at", refreshToken: "rt",
        expiresAt: clock.now.adding(lifetime), lifetimeSeconds: lifetime.timeInterval, contact: nil)
}

/// `RefreshScheduler` on its own, with a manual clock.
@Suite struct RefreshSchedulerTimingTests {
    @Test func theTimerFiresAtExpiryMinusTheBuffer() {
        let clock = ManualClock()
        let scheduler = RefreshScheduler(profile: "default", clock: clock, policy: .default)
        // 40 s lifetime: the 60 s buffer is clamped to half of it, so the refresh is due at 20 s.
        let s = session(expiringIn: .seconds(40), on: clock)
        #expect(scheduler.due(for: s) == s.expiresAt.adding(.seconds(-20)))
        let fired = Mutex(0)
        scheduler.arm(for: s) { fired.withLock { $0 += 1 } }
        #expect(scheduler.isArmed)
        clock.advance(by: .milliseconds(19_999))
        #expect(fired.withLock { $0 } == 0)
        #expect(scheduler.action(for: s) == .wait)
        clock.advance(by: .milliseconds(1))
        #expect(fired.withLock { $0 } == 1)
        #expect(scheduler.action(for: s) == .refresh(isScheduledRetry: false))
    }

    @Test func aLongSessionIsRecheckedEveryThirtySecondsAndRefreshedAtExpiryMinusSixty() {
        let clock = ManualClock()
        let scheduler = RefreshScheduler(profile: "default", clock: clock, policy: .default)
        let s = session(expiringIn: .seconds(900), on: clock)
        let fired = Mutex(0)
        var rechecks = 0
        while true {
            scheduler.arm(for: s) { fired.withLock { $0 += 1 } }
            let before = fired.withLock { $0 }
            clock.advance(by: RefreshScheduler.recheckInterval)
            #expect(fired.withLock { $0 } == before + 1)
            scheduler.cancelTimer()
            guard scheduler.action(for: s) == .wait else { break }
            rechecks += 1
        }
        #expect(rechecks == 27)  // 28 firings of 30 s: the last one at 840 s
        #expect(clock.now == s.expiresAt.adding(.seconds(-60)))
        #expect(scheduler.action(for: s) == .refresh(isScheduledRetry: false))
    }

    @Test func aWallClockJumpIsSeenAtTheNextRecheck() {
        let clock = ManualClock()
        let scheduler = RefreshScheduler(profile: "default", clock: clock, policy: .default)
        let s = session(expiringIn: .seconds(900), on: clock)
        clock.jumpWallClock(by: .seconds(850))
        #expect(scheduler.action(for: s) == .refresh(isScheduledRetry: false))
        clock.jumpWallClock(by: .seconds(50))
        #expect(scheduler.action(for: s) == .end(.refreshFailed))
    }

    @Test func withoutAutoRefreshTheTimerWaitsForTheExpiry() {
        var policy = RainWalletSessionPolicy.default
        policy.isAutoRefreshEnabled = false
        let clock = ManualClock()
        let scheduler = RefreshScheduler(profile: "default", clock: clock, policy: policy)
        let s = session(expiringIn: .seconds(20), on: clock)
        #expect(scheduler.due(for: s) == nil)
        let fired = Mutex(0)
        scheduler.arm(for: s) { fired.withLock { $0 += 1 } }
        clock.advance(by: .milliseconds(19_999))
        #expect(fired.withLock { $0 } == 0)
        clock.advance(by: .milliseconds(1))
        #expect(fired.withLock { $0 } == 1)
        #expect(scheduler.action(for: s) == .end(.expired))
    }

    @Test func concurrentRefreshesShareOneFlight() async throws {
        let clock = ManualClock()
        let scheduler = RefreshScheduler(profile: "default", clock: clock, policy: .default)
        let gate = Gate()
        let attempts = Mutex(0)
        let caller = RefreshCaller()
        let attempt: @Sendable (Int) async -> RetryStep<Void> = { _ in
            attempts.withLock { $0 += 1 }
            await gate.wait()
            return .finished(.success(()))
        }
        var callers: [Task<Result<Void, RainError>, Never>] = []
        for _ in 0..<5 {
            callers.append(Task { await caller.refresh(scheduler, attempt) })
        }
        await eventually("every caller in the flight, one attempt") {
            await caller.count == 5 && attempts.withLock { $0 } == 1
        }
        gate.open()
        for c in callers {
            guard case .success = await c.value else {
                Issue.record("expected every caller to share the success")
                continue
            }
        }
        #expect(attempts.withLock { $0 } == 1)
    }

    @Test func exhaustedRetriesMoveTheNextAttemptToTheCapAsASingleCall() async throws {
        let clock = ManualClock()
        let scheduler = RefreshScheduler(profile: "default", clock: clock, policy: .default)
        let attempts = Mutex(0)
        let failing: @Sendable (Int) async -> RetryStep<Void> = { _ in
            attempts.withLock { $0 += 1 }
            return .transient(RainError(.network, "down (test)"))
        }
        let first = Task { await scheduler.refresh(isScheduledRetry: false, failing) }
        await eventually("backoff 1") { attempts.withLock { $0 } == 1 && clock.pendingTimerCount == 1 }
        clock.advance(by: .milliseconds(500))
        await eventually("backoff 2") { attempts.withLock { $0 } == 2 && clock.pendingTimerCount == 1 }
        clock.advance(by: .seconds(1))
        guard case .failure(let error) = await first.value else {
            Issue.record("expected RAIN_301 once the retries ran out")
            return
        }
        #expect(attempts.withLock { $0 } == 3)
        #expect(error.code == .network)
        #expect(error.details.retryAfterMilliseconds == 4000)
        #expect(scheduler.phase == .retryingAtCap(next: clock.now.adding(.seconds(4))))
        // A session already due: the next refresh waits for the cap.
        let s = session(expiringIn: .seconds(6), on: clock)  // due at 3 s, before the cap
        #expect(scheduler.due(for: s) == clock.now.adding(.seconds(4)))
        #expect(scheduler.action(for: s) == .wait)
        clock.advance(by: .seconds(4))
        #expect(scheduler.action(for: s) == .refresh(isScheduledRetry: true))
        // At the cap: one call, no backoff.
        let atCap = await scheduler.refresh(isScheduledRetry: true, failing)
        #expect(attempts.withLock { $0 } == 4)
        guard case .failure = atCap else {
            Issue.record("expected a failure at the cap")
            return
        }
        // A success puts it back on schedule.
        let ok = await scheduler.refresh(isScheduledRetry: true) { _ in .finished(.success(())) }
        guard case .success = ok else {
            Issue.record("expected a success")
            return
        }
        #expect(scheduler.phase == .onSchedule)
    }

    @Test func exhaustedRetriesKeepALocalFailureAsItIsNeverTheAuthoritys() async throws {
        let clock = ManualClock()
        let scheduler = RefreshScheduler(profile: "default", clock: clock, policy: .default)
        let tpm = RainError(
            .provider, "this device's key could not sign its proof", details: .init(reason: "tpm_unavailable"))
        let result = await scheduler.refresh(isScheduledRetry: true) { _ in .transient(tpm) }
        guard case .failure(let error) = result else {
            Issue.record("expected the TPM's failure")
            return
        }
        #expect(error.code == .provider)
        #expect(error.details.reason == "tpm_unavailable")
        #expect(error.message.contains("could not sign its proof") && !error.message.contains("authority could not be reached"))
        #expect(error.details.retryAfterMilliseconds == 4000)
    }

    @Test func stopDisarmsAndResetsThePhase() async throws {
        let clock = ManualClock()
        let scheduler = RefreshScheduler(profile: "default", clock: clock, policy: .default)
        _ = await scheduler.refresh(isScheduledRetry: true) { _ in .transient(RainError(.network, "down (test)")) }
        #expect(scheduler.phase != .onSchedule)
        scheduler.arm(for: session(expiringIn: .seconds(900), on: clock)) {}
        #expect(scheduler.isArmed)
        scheduler.stop()
        #expect(!scheduler.isArmed)
        #expect(clock.pendingTimerCount == 0)
        #expect(scheduler.phase == .onSchedule)
    }
}
