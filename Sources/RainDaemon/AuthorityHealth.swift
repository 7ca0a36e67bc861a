import Dispatch
import FoundationEssentials
import Glibc
import RainAuthority
import RainCore
import RainTransport
import Synchronization

/// Whether `rainwalletd authority` can serve: it is ready (serving, not draining), its store
/// answers, and the store records this instance's master key. `GET /healthz` answers it, and the
/// systemd watchdog is fed only while it holds, so systemd restarts an authority that is wedged.
///
/// Checks run on the caller's thread (the metrics server's answering queue or the watchdog's
/// queue), never on the Swift pool: they wait at most `timeout` for the store. One store check runs
/// at a time; while a check the store never answered is still pending, the next ones fail at once
/// instead of piling up.
final class AuthorityHealth: Sendable {
    /// The outcome of a check, as `/healthz` shows it.
    struct Report: Sendable, Encodable {
        var status: String
        var ready: String
        var loop: String = "not checked"
        var store: String
        var masterKey: String

        var isHealthy: Bool { status == "ok" }

        /// A device daemon's report: ready or not; it has no store of its own to check.
        init(serving: Bool) {
            self.init(
                status: serving ? "ok" : "failing", ready: serving ? "ok" : "not serving (starting or draining)",
                store: "not checked", masterKey: "not checked")
        }

        init(status: String, ready: String, store: String, masterKey: String) {
            self.status = status
            self.ready = ready
            self.store = store
            self.masterKey = masterKey
        }

        /// One JSON object, keys sorted, with a final newline.
        var json: String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            guard let data = try? encoder.encode(self) else { return "{\"status\":\"failing\"}\n" }
            return String(decoding: data, as: UTF8.self) + "\n"
        }
    }

    private let authority: EmbeddedAuthority
    /// The event loop, once built: a loop that does not answer a wake-up is wedged.
    private let server = Mutex<EventLoopServer?>(nil)
    private let timeout: Duration
    private let isServing = Atomic<Bool>(false)
    private let isChecking = Atomic<Bool>(false)

    /// - Parameter timeout: how long a check waits for the store.
    init(authority: EmbeddedAuthority, timeout: Duration = .seconds(2)) {
        self.authority = authority
        self.timeout = timeout
    }

    /// The event loop whose liveness is checked.
    func watch(_ loop: EventLoopServer) { server.withLock { $0 = loop } }

    /// Marks the authority serving (ready) or not (starting, draining).
    func setServing(_ serving: Bool) { isServing.store(serving, ordering: .releasing) }

    /// Checks readiness, the store and the master key; blocks up to `timeout`.
    func check() -> Report {
        guard isServing.load(ordering: .acquiring) else {
            return Report(
                status: "failing", ready: "not serving (starting or draining)", store: "not checked", masterKey: "not checked")
        }
        // A loop answers a wake-up in microseconds unless a handler holds it; 2 s leaves room for a
        // loaded machine.
        let loop = server.withLock { $0 }
        let isLoopAlive = loop?.isResponsive(within: .seconds(2)) ?? true
        var report: Report
        switch storeHealth() {
        case .healthy:
            report = Report(status: "ok", ready: "ok", store: "ok", masterKey: "ok")
        case .unreachable(let why):
            report = Report(status: "failing", ready: "ok", store: "unreachable: \(why)", masterKey: "not checked")
        case .keyMismatch(let why):
            report = Report(status: "failing", ready: "ok", store: "ok", masterKey: "mismatch: \(why)")
        }
        if loop != nil { report.loop = isLoopAlive ? "ok" : "not answering: the event loop did not handle a wake-up within 2 s" }
        if !isLoopAlive { report.status = "failing" }
        return report
    }

    /// Holds one check's result for the waiting thread.
    private final class Outcome: Sendable {
        let value = Mutex<StoreHealth?>(nil)
        let done = DispatchSemaphore(value: 0)
    }

    private func storeHealth() -> StoreHealth {
        guard !isChecking.exchange(true, ordering: .acquiringAndReleasing) else {
            return .unreachable("an earlier check is still waiting for the store")
        }
        let outcome = Outcome()
        Task {
            let health = await self.authority.storeHealth()
            self.isChecking.store(false, ordering: .releasing)
            outcome.value.withLock { $0 = health }
            outcome.done.signal()
        }
        guard outcome.done.wait(timeout: .now() + .milliseconds(Int(timeout.milliseconds))) == .success,
            let health = outcome.value.withLock({ $0 })
        else {
            return .unreachable("no answer within \(timeout.milliseconds) ms")
        }
        return health
    }
}

/// Feeds the systemd watchdog (`WATCHDOG=1`) every half interval while the authority is healthy
/// (`AuthorityHealth`): a wedged authority, or one whose store stopped answering, stops feeding it,
/// and systemd restarts it after `WatchdogSec=`.
///
/// `@unchecked Sendable`: the timer is set up in `init` and then only resumed and cancelled,
/// which Dispatch allows from any thread.
final class AuthorityWatchdog: @unchecked Sendable {
    private let timer: any DispatchSourceTimer
    private let queue = DispatchQueue(label: "rainwalletd.watchdog")

    /// - Parameters:
    ///   - interval: `WATCHDOG_USEC` as a duration.
    ///   - health: what is checked before each feed.
    ///   - notifier: where `WATCHDOG=1` goes.
    init(interval: Duration, health: AuthorityHealth, notifier: ServiceNotifier, logger: Logger) {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let half = max(Int(interval.milliseconds / 2), 1)
        timer.schedule(deadline: .now() + .milliseconds(half), repeating: .milliseconds(half))
        let isFailing = Atomic<Bool>(false)
        timer.setEventHandler {
            let report = health.check()
            if report.isHealthy {
                notifier.send(["WATCHDOG=1"])
                if isFailing.exchange(false, ordering: .relaxed) { logger.info("watchdog.fed_again") }
            } else if !isFailing.exchange(true, ordering: .relaxed) {
                // Said once per failure: systemd restarts the authority if it lasts WatchdogSec.
                logger.warning(
                    "watchdog.withheld", ["ready": report.ready, "store": report.store, "masterKey": report.masterKey])
            }
        }
        self.timer = timer
    }

    /// Whether the timer was resumed: a Dispatch source must not be released suspended.
    private let isResumed = Atomic<Bool>(false)

    /// Starts feeding.
    func start() {
        if !isResumed.exchange(true, ordering: .acquiringAndReleasing) { timer.resume() }
    }

    /// Stops feeding (draining: systemd's stop timeout takes over).
    func stop() {
        timer.cancel()
        start()
    }

    /// `WATCHDOG_USEC`, when the watchdog is meant for this process (`WATCHDOG_PID` absent or
    /// ours); both are removed from the environment so that children do not see them.
    static func intervalFromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Duration? {
        let usec = environment["WATCHDOG_USEC"]
        let pid = environment["WATCHDOG_PID"]
        unsetenv("WATCHDOG_USEC")
        unsetenv("WATCHDOG_PID")
        guard let usec, let value = UInt64(usec), value > 0 else { return nil }
        if let pid, Int32(pid) != getpid() { return nil }
        return .microseconds(Int64(clamping: value))
    }
}

/// Whether a daemon serves (ready and not draining), shared by its lifecycle's closures and
/// its health check.
final class ServingFlag: Sendable {
    private let value = Atomic<Bool>(false)

    /// Whether the daemon serves now.
    var isServing: Bool { value.load(ordering: .acquiring) }

    /// Records that the daemon serves (ready) or no longer does (draining).
    func set(_ serving: Bool) { value.store(serving, ordering: .releasing) }
}
