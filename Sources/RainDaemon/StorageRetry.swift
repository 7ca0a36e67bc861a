import Dispatch
import RainCore
import Synchronization

/// When the daemon tries again to open keys whose provider cannot be used now (`StorageGate`).
///
/// Every `interval` after a failed try, on the injected clock; and as soon as a call arrives,
/// because a call is most often the user who just unlocked the keyring and runs a command: that
/// command should not wait for the next round. Whatever triggers them, tries are at least
/// `minimumSpacing` apart (a client polling in a loop does not make the daemon hammer the keyring
/// or the TPM) and never run two at a time: they run one by one on `queue`, which must be serial
/// and may block (opening the keys does). A call that arrives during a try gets the next try as
/// soon as the spacing allows, not an `interval` later.
final class StorageRetry<Value: Sendable>: Sendable {
    /// The one pending trigger of the next try.
    struct Next {
        var id: Int
        /// Its monotonic deadline.
        var deadline: Duration
        /// Nil for a try queued at once.
        var timer: (any RainTimer)?
    }

    struct State {
        var next: Next?
        var lastID = 0
        /// When the last try started (monotonic).
        var lastStart: Duration?
        var isTrying = false
        /// A call arrived during the running try.
        var isCallWaiting = false
        /// The keys opened, or `stop()` was called: nothing more is tried.
        var isFinished = false
        /// How many tries have started (for tests and the log).
        var tries = 0
    }

    /// The default time between a failed try and the next one, without calls.
    static var defaultInterval: Duration { .seconds(3) }
    /// The default least time between the starts of two tries.
    static var defaultMinimumSpacing: Duration { .seconds(1) }

    private let state = Mutex(State())
    private let clock: any RainClock
    private let queue: DispatchQueue
    let interval: Duration
    let minimumSpacing: Duration
    private let open: @Sendable () throws(RainError) -> Value
    private let onFailure: @Sendable (RainError) -> Void
    private let onOpen: @Sendable (Value) -> Void

    /// - Parameters:
    ///   - clock: the clock of the tries and their timers.
    ///   - queue: a serial queue the tries run on (they block).
    ///   - open: one try; its error is reported to `onFailure` and tried again later.
    ///   - onOpen: called once, on `queue`, with what the first successful try returned (not after
    ///     `stop()`).
    init(
        clock: any RainClock, queue: DispatchQueue, interval: Duration = defaultInterval,
        minimumSpacing: Duration = defaultMinimumSpacing, open: @escaping @Sendable () throws(RainError) -> Value,
        onFailure: @escaping @Sendable (RainError) -> Void, onOpen: @escaping @Sendable (Value) -> Void
    ) {
        self.clock = clock
        self.queue = queue
        self.interval = interval
        self.minimumSpacing = minimumSpacing
        self.open = open
        self.onFailure = onFailure
        self.onOpen = onOpen
    }

    /// Starts the rounds after a try made elsewhere (the daemon's start) that began at
    /// `lastTryStart` (monotonic) and failed: the next try is `interval` from now, or earlier
    /// when a call arrives.
    func start(lastTryStart: Duration) {
        let now = clock.monotonic
        state.withLock { s in
            guard !s.isFinished, s.next == nil, !s.isTrying else { return }
            s.lastStart = lastTryStart
            plan(at: now + interval, now: now, in: &s)
        }
    }

    /// A call arrived while the keys are not open: try as soon as the spacing allows.
    func callArrived() {
        let now = clock.monotonic
        state.withLock { s in
            guard !s.isFinished else { return }
            if s.isTrying {
                s.isCallWaiting = true
                return
            }
            let earliest = max(now, s.lastStart.map { $0 + minimumSpacing } ?? now)
            if let next = s.next, next.deadline <= earliest { return }
            plan(at: earliest, now: now, in: &s)
        }
    }

    /// Stops: no more tries, and a try under way does not call `onOpen`.
    func stop() {
        state.withLock { s in
            s.isFinished = true
            s.next?.timer?.cancel()
            s.next = nil
        }
    }

    /// How many tries have started.
    var tries: Int { state.withLock { $0.tries } }

    /// Replaces the pending trigger by one at `deadline` (queued at once when it has passed).
    private func plan(at deadline: Duration, now: Duration, in s: inout State) {
        s.next?.timer?.cancel()
        s.lastID += 1
        let id = s.lastID
        if deadline <= now {
            s.next = Next(id: id, deadline: now, timer: nil)
            queue.async { self.fire(id) }
        } else {
            // The timer is cancelled when replaced; a firing that raced the cancel finds another id.
            let timer = clock.schedule(after: deadline - now, on: queue) { self.fire(id) }
            s.next = Next(id: id, deadline: deadline, timer: timer)
        }
    }

    /// Runs one try if the trigger `id` is still the pending one.
    private func fire(_ id: Int) {
        let isDue = state.withLock { s -> Bool in
            guard !s.isFinished, !s.isTrying, s.next?.id == id else { return false }
            s.next = nil
            s.isTrying = true
            s.lastStart = clock.monotonic
            s.tries += 1
            return true
        }
        guard isDue else { return }
        do throws(RainError) {
            let value = try open()
            let isWanted = state.withLock { s -> Bool in
                s.isTrying = false
                guard !s.isFinished else { return false }
                s.isFinished = true
                return true
            }
            if isWanted { onOpen(value) }
        } catch {
            onFailure(error)
            let now = clock.monotonic
            state.withLock { s in
                s.isTrying = false
                guard !s.isFinished else { return }
                var deadline = now + interval
                if s.isCallWaiting, let start = s.lastStart {
                    deadline = max(now, start + minimumSpacing)
                }
                s.isCallWaiting = false
                plan(at: deadline, now: now, in: &s)
            }
        }
    }
}
