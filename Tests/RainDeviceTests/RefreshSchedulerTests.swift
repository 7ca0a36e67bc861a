import Foundation
import RainAuthority
import RainAuthorityAPI
import RainConfig
import RainCore
import RainCrypto
import RainTestSupport
import RainTransport
import RainWire
import Synchronization
import Testing

@testable import RainDevice

/// Forwards to a real authority; refreshes can be made to fail transiently or wait at a gate.
final class ControlledAuthority: ForwardingAuthority {
    let inner: any Authority
    var forwarded: any Authority { inner }
    struct State {
        var refreshCalls = 0
        var transientFailuresLeft = 0
        var isGateClosed = false
        var readCalls = 0
        var readFailuresLeft = 0
        var sendCalls = 0
        var sendFailuresLeft = 0
        var walletCalls = 0
        var exportCalls = 0
        var exportFailuresLeft = 0
        var isKeptReadEnabled = false
        var answersToLose = 0
        var idempotencyKeys: [[UInt8]] = []
    }
    let state = Mutex(State())

    init(_ inner: any Authority) { self.inner = inner }

    var refreshCalls: Int { state.withLock { $0.refreshCalls } }
    var readCalls: Int { state.withLock { $0.readCalls } }
    var sendCalls: Int { state.withLock { $0.sendCalls } }
    var walletCalls: Int { state.withLock { $0.walletCalls } }
    var exportCalls: Int { state.withLock { $0.exportCalls } }
    func failNextExports(_ n: Int) { state.withLock { $0.exportFailuresLeft = n } }
    func failNextReads(_ n: Int) { state.withLock { $0.readFailuresLeft = n } }
    func failNextSends(_ n: Int) { state.withLock { $0.sendFailuresLeft = n } }
    func failNextRefreshes(_ n: Int) { state.withLock { $0.transientFailuresLeft = n } }
    /// The next `n` confirms, passkey finishes and contact verifications run at the inner
    /// authority, and their answers (whatever they were) are lost: RAIN_501 `outcome_unknown`.
    func loseNextAnswers(_ n: Int) { state.withLock { $0.answersToLose = n } }
    /// The idempotency keys those calls carried, in order.
    var idempotencyKeys: [[UInt8]] { state.withLock { $0.idempotencyKeys } }

    /// Runs a call that carries `key`, losing its answer when told to.
    private func keyed<T>(_ key: [UInt8], _ call: () async throws(RainError) -> T) async throws(RainError) -> T {
        let lose = state.withLock { s -> Bool in
            s.idempotencyKeys.append(key)
            guard s.answersToLose > 0 else { return false }
            s.answersToLose -= 1
            return true
        }
        guard lose else { return try await call() }
        _ = try? await call()
        throw RainError(.provider, "the answer was lost (test)", details: .init(reason: AuthorityOutcome.unknownReason))
    }
    /// Offers the inner authority's `ReadFreshness` (off by default: every read reaches the
    /// authority, as the counting tests expect), so the service keeps Account/Get and Wallet/Get.
    func enableKeptReads() { state.withLock { $0.isKeptReadEnabled = true } }
    var readFreshness: (any ReadFreshness)? {
        state.withLock({ $0.isKeptReadEnabled }) ? inner.readFreshness : nil
    }

    func closeGate() { state.withLock { $0.isGateClosed = true } }
    func openGate() { state.withLock { $0.isGateClosed = false } }

    func refreshSession(_ request: RefreshRequest, caller: AuthorityCaller) async throws(RainError)
        -> AuthorityRefreshSessionResponse
    {
        let fail = state.withLock { s -> Bool in
            s.refreshCalls += 1
            if s.transientFailuresLeft > 0 {
                s.transientFailuresLeft -= 1
                return true
            }
            return false
        }
        if fail { throw RainError(.network, "authority unreachable (test)") }
        while state.withLock({ $0.isGateClosed }) { try? await Task.sleep(for: .milliseconds(2)) }
        return try await inner.refreshSession(request, caller: caller)
    }

    /// Counts a send in `sendCalls`; true when it must fail.
    private func takeSend() -> Bool {
        state.withLock { s -> Bool in
            s.sendCalls += 1
            guard s.sendFailuresLeft > 0 else { return false }
            s.sendFailuresLeft -= 1
            return true
        }
    }

    func sendLoginCode(_ request: SendCodeRequest, caller: AuthorityCaller) async throws(RainError) -> SendCodeResult {
        if takeSend() { throw RainError(.network, "authority unreachable (test)") }
        return try await inner.sendLoginCode(request, caller: caller)
    }
    func confirmLoginCode(_ request: ConfirmCodeRequest, caller: AuthorityCaller) async throws(RainError) -> LoginResult {
        try await keyed(request.idempotencyKey) { () throws(RainError) in
            try await inner.confirmLoginCode(request, caller: caller)
        }
    }
    /// Counts a read in `readCalls`; true when it must fail.
    private func takeRead(isWallet: Bool = false) -> Bool {
        state.withLock { s -> Bool in
            s.readCalls += 1
            if isWallet { s.walletCalls += 1 }
            guard s.readFailuresLeft > 0 else { return false }
            s.readFailuresLeft -= 1
            return true
        }
    }
    func getAccountInfo(_ request: AuthorityAccountInfoRequest, caller: AuthorityCaller) async throws(RainError)
        -> AccountInfo
    {
        if takeRead() { throw RainError(.network, "authority unreachable (test)") }
        return try await inner.getAccountInfo(request, caller: caller)
    }
    /// A read like `getAccountInfo`: counted in `walletCalls` and `readCalls`, failed by `failNextReads`.
    func getWallet(_ request: AuthorityWalletRequest, caller: AuthorityCaller) async throws(RainError) -> WalletInfo {
        if takeRead(isWallet: true) { throw RainError(.network, "authority unreachable (test)") }
        return try await inner.getWallet(request, caller: caller)
    }
    func exportWallet(_ request: AuthorityWalletRequest, caller: AuthorityCaller) async throws(RainError) -> WalletSecrets {
        let fail = state.withLock { s -> Bool in
            s.exportCalls += 1
            guard s.exportFailuresLeft > 0 else { return false }
            s.exportFailuresLeft -= 1
            return true
        }
        if fail { throw RainError(.network, "authority unreachable (test)") }
        return try await inner.exportWallet(request, caller: caller)
    }
    func finishPasskeyRegistration(_ request: PasskeyFinishRequest, caller: AuthorityCaller) async throws(RainError)
        -> PasskeyFinishResult
    {
        try await keyed(request.idempotencyKey) { () throws(RainError) in
            try await inner.finishPasskeyRegistration(request, caller: caller)
        }
    }
    func finishPasskeyAuthentication(_ request: PasskeyFinishRequest, caller: AuthorityCaller) async throws(RainError)
        -> PasskeyFinishResult
    {
        try await keyed(request.idempotencyKey) { () throws(RainError) in
            try await inner.finishPasskeyAuthentication(request, caller: caller)
        }
    }
    /// A send like `sendLoginCode`: counted in `sendCalls`, failed by the send failures.
    func sendContactVerificationCode(_ request: AuthoritySendContactVerificationRequest, caller: AuthorityCaller)
        async throws(RainError) -> SendCodeResult
    {
        if takeSend() { throw RainError(.network, "authority unreachable (test)") }
        return try await inner.sendContactVerificationCode(request, caller: caller)
    }
    func confirmContactVerification(_ request: AuthorityConfirmContactVerificationRequest, caller: AuthorityCaller)
        async throws(RainError) -> AccountInfo
    {
        try await keyed(request.idempotencyKey) { () throws(RainError) in
            try await inner.confirmContactVerification(request, caller: caller)
        }
    }
}

/// Polls `condition` until it holds. The bound is generous (60 s) and only matters on failure: the
/// swift test process also runs suites that block the two-thread concurrency pool for seconds
/// (processes waited for), so a tight bound turns a busy moment into a failure.
func eventually(_ what: String, _ condition: () async -> Bool) async {
    let deadline = ContinuousClock.now + .seconds(60)
    while ContinuousClock.now < deadline {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(2))
    }
    Issue.record("timed out waiting for: \(what)")
}

struct SchedulerFixture {
    let dir = TempDir()
    let clock = ManualClock()
    let sender = CapturingCodeSender()
    let authority: ControlledAuthority
    let embedded: EmbeddedAuthority
    let storage = InMemoryStorage()
    let service: DeviceService
    let logSink: CapturingLogSink
    let logger: Logger

    /// With `keptReads`, the authority offers the embedded authority's `ReadFreshness` to the
    /// service.
    init(
        policy: RainWalletSessionPolicy = .default, allowExport: Bool = false, keptReads: Bool = false,
        passkeyDomain: String? = nil
    ) async throws {
        let sink = CapturingLogSink()
        logSink = sink
        logger = Logger(label: "test", minimumLevel: .debug, sink: sink)
        embedded = try await EmbeddedAuthority(
            stateDirectory: dir.path, settings: AuthoritySettings(sendLimits: .unlimited), clock: clock, sender: sender,
            logger: logger)
        authority = ControlledAuthority(embedded)
        if keptReads { authority.enableKeptReads() }
        var config = DaemonConfig()
        config.profiles["default"] = ProfileSettings(
            appID: "default", passkeyDomain: passkeyDomain, isExportAllowed: allowExport, sessionPolicy: policy)
        service = DeviceService(
            config: config,
            context: DeviceContext(authority: authority, storage: storage, clock: clock, device: try testDevice(), logger: logger)
        )
    }

    var runtime: ProfileRuntime { service.entry("default").runtime }
    var session: ProfileSession { service.session(profile: "default") }

    func login() async throws {
        _ = try await session.sendLoginCode(.email("user@example.com"))
        _ = try await session.confirmLoginCode(try #require(sender.lastCode))
    }

    /// The same account logs in on another device of the app: this device's session is revoked
    /// at the authority (this device has not learned it yet).
    func loginOnAnotherDevice() async throws {
        let challenge = try await embedded.sendLoginCode(
            SendCodeRequest(appID: "default", deviceID: "dev_other", contact: .email("user@example.com")))
        _ = try await embedded.confirmLoginCode(
            ConfirmCodeRequest(
                appID: "default", deviceID: "dev_other", challengeID: challenge.challengeID,
                code: try #require(sender.lastCode)))
    }

    func watch(_ n: Int) -> [EventCollector] {
        (0..<n).map { i in
            let c = EventCollector()
            runtime.addWatcher(connection: ConnectionID(rawValue: 7), requestID: UInt64(i + 1), send: c.send)
            return c
        }
    }

    /// Advances in small steps so timers armed by tasks in between also fire.
    func advance(by total: Duration, step: Duration = .seconds(1)) async {
        var left = total
        while left > .zero {
            let d = min(step, left)
            clock.advance(by: d)
            left -= d
            try? await Task.sleep(for: .milliseconds(1))
        }
    }
}

@Suite struct RefreshSchedulerTests {
    @Test func refreshFiresAtExpiryMinusTheBuffer() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        let firstExpiry = try #require(f.runtime.snapshot().expiresAt)
        await f.advance(by: .seconds(839))
        #expect(f.authority.refreshCalls == 0)
        await f.advance(by: .seconds(1))
        await eventually("the refresh at expiresAt - 60 s") { f.authority.refreshCalls == 1 }
        await eventually("the new expiry") { f.runtime.snapshot().expiresAt != firstExpiry }
        #expect(f.runtime.snapshot().expiresAt == f.clock.now.adding(.seconds(900)))
        #expect(await f.storage.load(profile: "default")?.expiresAt == f.runtime.snapshot().expiresAt)
    }

    @Test func sessionStaysAliveAcrossSeveralLifetimes() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        let watchers = f.watch(1)
        for cycle in 1...4 {
            let expiry = try #require(f.runtime.snapshot().expiresAt)
            await eventually("scheduler armed") { await f.session.isScheduled }
            // Exactly to expiresAt − 60 s, in steps, on the wall clock the scheduler reads.
            let untilDue = expiry.timeIntervalSince(f.clock.now) - 60
            await f.advance(by: .milliseconds(Int64(untilDue * 1000)), step: .seconds(30))
            await eventually("refresh \(cycle)") { f.authority.refreshCalls == cycle }
            await eventually("new expiry after refresh \(cycle)") { f.runtime.snapshot().expiresAt != expiry }
        }
        #expect(f.runtime.snapshot().authState == .authenticated)
        #expect(!watchers[0].all.contains { $0.kind == .sessionExpired })
    }

    @Test func twoTransientFailuresThenSuccess() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        f.authority.failNextRefreshes(2)
        await f.advance(by: .seconds(840))
        await eventually("first attempt") { f.authority.refreshCalls == 1 }
        await eventually("backoff timer armed") { f.clock.pendingTimerCount >= 1 }
        f.clock.advance(by: .milliseconds(499))
        #expect(f.authority.refreshCalls == 1)
        f.clock.advance(by: .milliseconds(1))  // 500 ms after the first failure
        await eventually("second attempt") { f.authority.refreshCalls == 2 }
        await eventually("backoff timer armed") { f.clock.pendingTimerCount >= 1 }
        f.clock.advance(by: .milliseconds(999))
        #expect(f.authority.refreshCalls == 2)
        f.clock.advance(by: .milliseconds(1))  // the delay doubled to 1 s
        await eventually("third attempt succeeds") { f.authority.refreshCalls == 3 }
        await eventually("refreshed") { f.runtime.snapshot().expiresAt == f.clock.now.adding(.seconds(900)) }
        #expect(f.runtime.snapshot().authState == .authenticated)
    }

    @Test func exhaustedRetriesKeepTheSessionThenRetryAtTheCapUntilExpiryEndsItWithRefreshFailed() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        let watchers = f.watch(3)
        f.authority.failNextRefreshes(Int.max)
        await f.advance(by: .seconds(840))
        await eventually("attempt 1") { f.authority.refreshCalls == 1 }
        await eventually("timer") { f.clock.pendingTimerCount >= 1 }
        f.clock.advance(by: .milliseconds(500))
        await eventually("attempt 2") { f.authority.refreshCalls == 2 }
        await eventually("timer") { f.clock.pendingTimerCount >= 1 }
        f.clock.advance(by: .seconds(1))
        await eventually("attempt 3, retries exhausted") { f.authority.refreshCalls == 3 }
        // Still usable.
        await eventually("scheduler re-armed") { await f.session.isScheduled }
        #expect(f.runtime.snapshot().authState == .authenticated)
        // The next attempt comes at the capped interval (4 s), as a single call.
        f.clock.advance(by: .milliseconds(3900))
        try? await Task.sleep(for: .milliseconds(20))
        #expect(f.authority.refreshCalls == 3)
        f.clock.advance(by: .milliseconds(100))
        await eventually("attempt at the cap") { f.authority.refreshCalls == 4 }
        // Keep failing until expiry: the session ends with refreshFailed, once per watcher.
        await f.advance(by: .seconds(60), step: .milliseconds(500))
        await eventually("ended") { f.runtime.snapshot().sessionState == .expired }
        for w in watchers {
            let expired = w.all.filter { $0.kind == .sessionExpired }
            #expect(expired.count == 1)
            #expect(expired.first?.expiryReason == .refreshFailed)
        }
        #expect(await f.storage.load(profile: "default") == nil)
        let error = await #expect(throws: RainError.self) { try await f.session.refreshSession() }
        #expect(error?.code == .sessionExpired)
    }

    @Test func fiftyConcurrentRefreshesMakeOneAuthorityRequest() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        f.authority.closeGate()
        let session = f.session
        try await withThrowingTaskGroup(of: SessionSnapshot.self) { group in
            for _ in 0..<50 { group.addTask { try await session.refreshSession() } }
            await eventually("all 50 callers waiting") { await session.refreshCallCount == 50 }
            f.authority.openGate()
            var results: [SessionSnapshot] = []
            for try await r in group { results.append(r) }
            #expect(results.count == 50)
            #expect(Set(results.map(\.expiresAt)).count == 1)
        }
        #expect(f.authority.refreshCalls == 1)
    }

    @Test func loginElsewhereEndsTheSessionOnceForEveryWatcherEvenWithConcurrentCalls() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        let watchers = f.watch(20)
        // Device B logs in to the same account through the same authority.
        let other = DeviceService(
            config: DaemonConfig(),
            context: DeviceContext(
                authority: f.embedded, storage: InMemoryStorage(), clock: f.clock, device: try testDevice(id: "dev_test2"),
                logger: f.logger))
        _ = try await other.session(profile: "default").sendLoginCode(.email("user@example.com"))
        _ = try await other.session(profile: "default").confirmLoginCode(try #require(f.sender.lastCode))
        let session = f.session
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<10 { group.addTask { _ = try? await session.refreshSession() } }
        }
        let error = await #expect(throws: RainError.self) { try await session.refreshSession() }
        #expect(error?.code == .sessionExpired)
        for w in watchers {
            let expired = w.all.filter { $0.kind == .sessionExpired }
            #expect(expired.count == 1)
            #expect(expired.first?.expiryReason == .revokedElsewhere)
        }
        #expect(f.runtime.snapshot().sessionState == .expired)
    }

    @Test func wallClockJumpIsNoticedWithinTheRecheckInterval() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        // The wall clock jumps 850 s ahead (a resume after suspend), monotonic time does not.
        f.clock.jumpWallClock(by: .seconds(850))
        #expect(f.authority.refreshCalls == 0)
        await f.advance(by: .seconds(30))
        await eventually("refresh after the jump") { f.authority.refreshCalls == 1 }
        await eventually("active again") { f.runtime.snapshot().hasActiveSession }
    }

    @Test func withoutAutoRefreshTheSessionExpiresWithReasonExpired() async throws {
        var policy = RainWalletSessionPolicy.default
        policy.isAutoRefreshEnabled = false
        let f = try await SchedulerFixture(policy: policy)
        try await f.login()
        let watchers = f.watch(1)
        await f.advance(by: .seconds(900), step: .seconds(30))
        await eventually("ended") { f.runtime.snapshot().sessionState == .expired }
        // The snapshot reads .expired from the clock as soon as the expiry passes; the event comes
        // when the session's expiry timer runs, a moment later on a busy machine.
        await eventually("the expiry event") { watchers[0].all.contains { $0.kind == .sessionExpired } }
        #expect(f.authority.refreshCalls == 0)
        #expect(watchers[0].all.filter { $0.kind == .sessionExpired }.map(\.expiryReason) == [.expired])
    }

    @Test func logoutFiresNoExpiryEventAndStopsTheScheduler() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        let watchers = f.watch(2)
        _ = try await f.session.logout()
        #expect(await !f.session.isScheduled)
        await f.advance(by: .seconds(1000), step: .seconds(100))
        #expect(f.authority.refreshCalls == 0)
        for w in watchers { #expect(!w.all.contains { $0.kind == .sessionExpired }) }
        #expect(f.runtime.snapshot().sessionState == .none)
    }
}

@Suite struct RetriesByKindTests {
    /// Lets the retry timers of a read fire while `body` runs.
    func pumpClock(_ f: SchedulerFixture, while task: Task<AccountResponse, any Error>) async {
        for _ in 0..<400 {
            f.clock.advance(by: .milliseconds(250))
            try? await Task.sleep(for: .milliseconds(2))
        }
        _ = await task.result
    }

    @Test func readsAreRetriedOnTransientFailures() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        f.authority.failNextReads(2)
        let session = f.session
        let task = Task { try await session.account() }
        await pumpClock(f, while: task)
        let account = try await task.value
        #expect(account.accountID.hasPrefix("acct_"))
        #expect(account.contacts == [.email("user@example.com")])
        #expect(f.authority.readCalls == 3)
    }

    @Test func readsGiveUpAfterTheRetriesWithRAIN301() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        f.authority.failNextReads(3)
        let session = f.session
        let task = Task { try await session.account() }
        await pumpClock(f, while: task)
        let error = await #expect(throws: RainError.self) { try await task.value }
        #expect(error?.code == .network)
        #expect(f.authority.readCalls == 3)  // 1 + 2 retries
        #expect(f.runtime.snapshot().authState == .authenticated)  // a failed read ends nothing
    }

    @Test func sendsAreNeverRetried() async throws {
        let f = try await SchedulerFixture()
        f.authority.failNextSends(1)
        let error = await #expect(throws: RainError.self) { try await f.session.sendLoginCode(.email("user@example.com")) }
        #expect(error?.code == .network)
        #expect(f.authority.sendCalls == 1)
        #expect(f.sender.deliveries.isEmpty)
    }

    @Test func aRevokedSessionIsLearntOnTheNextCall() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        let watchers = f.watch(3)
        let other = DeviceService(
            config: DaemonConfig(),
            context: DeviceContext(
                authority: f.embedded, storage: InMemoryStorage(), clock: f.clock, device: try testDevice(id: "dev_test2"),
                logger: f.logger))
        _ = try await other.session(profile: "default").sendLoginCode(.email("user@example.com"))
        _ = try await other.session(profile: "default").confirmLoginCode(try #require(f.sender.lastCode))
        let error = await #expect(throws: RainError.self) { try await f.session.account() }
        #expect(error?.code == .sessionExpired)
        #expect(error?.details.reason == "revoked_elsewhere")
        for w in watchers {
            #expect(w.all.filter { $0.kind == .sessionExpired }.map(\.expiryReason) == [.revokedElsewhere])
        }
        let again = await #expect(throws: RainError.self) { try await f.session.account() }
        #expect(again?.code == .sessionExpired)
    }
}
