import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// A clock for tests of real processes: the system's wall and monotonic time plus an offset that
/// a test moves from outside the process by writing a file.
///
/// The file holds a decimal number of milliseconds (whitespace around it is ignored). It is
/// re-read every `pollInterval`; a test writes it atomically (a temporary file renamed over it).
/// Wall and monotonic time move by the same offset, so an advance is never mistaken for a
/// wall-clock jump. Timers fire as soon as an advance carries them past their due time, and
/// otherwise at their due time, as on `SystemClock`. A malformed file, or a smaller offset (which
/// would move monotonic time backwards), is refused with a logged error and the previous offset
/// stays; a missing file leaves the offset as it is. Each applied offset is logged
/// (`clock.advanced offsetMilliseconds=N`), after the timers it made due are queued.
public final class OffsetClock: RainClock {
    struct Pending: Sendable {
        var due: Duration
        var queue: DispatchQueue
        var work: @Sendable () -> Void
        var source: TimerSource
        var isDispatched = false
    }

    struct State {
        var offset: Duration = .zero
        /// The last text refused, so a malformed file is logged once, not on every poll.
        var refusedText: String?
        var nextID: UInt64 = 0
        var timers: [UInt64: Pending] = [:]
    }

    /// The file a test writes the offset to.
    public let path: String
    private let logger: Logger
    private let state = Mutex(State())
    /// Runs the poll and the timers' Dispatch sources.
    private let timerQueue = DispatchQueue(label: "rainwallet.offset-clock")
    private let poller: TimerSource

    /// Reads `path` once, then every `pollInterval`.
    /// - Parameters:
    ///   - path: the offset file (decimal milliseconds).
    ///   - pollInterval: how often the file is re-read.
    ///   - logger: where a refused file is reported.
    public init(file path: String, pollInterval: Duration = .milliseconds(10), logger: Logger) {
        self.path = path
        self.logger = logger
        poller = TimerSource(DispatchSource.makeTimerSource(queue: timerQueue))
        reload()
        let interval = Self.dispatchInterval(max(.milliseconds(1), pollInterval))
        poller.source.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(1))
        poller.source.setEventHandler { [weak self] in self?.poll() }
        poller.source.resume()
    }

    deinit {
        poller.source.cancel()
        let sources = state.withLock { s in s.timers.values.map(\.source) }
        for t in sources { t.source.cancel() }
    }

    /// The current offset over the system's time.
    public var offset: Duration { state.withLock { $0.offset } }

    public var now: Date { Date().addingTimeInterval(offset.timeInterval) }

    public var monotonic: Duration { SystemClock().monotonic + offset }

    /// Re-reads the file now (the poll does the same every `pollInterval`) and fires the timers an
    /// advance made due. Returns after the timers it fired are queued on their queues.
    public func reload() {
        timerQueue.sync { poll() }
    }

    public func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) -> any RainTimer
    {
        let source = TimerSource(DispatchSource.makeTimerSource(queue: timerQueue))
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            let id = s.nextID
            s.timers[id] = Pending(due: SystemClock().monotonic + s.offset + delay, queue: queue, work: work, source: source)
            // Armed under the lock, so a concurrent advance cannot re-arm it with a stale delay.
            source.source.schedule(deadline: .now() + Self.dispatchInterval(delay), leeway: .milliseconds(5))
            return id
        }
        source.source.setEventHandler { [weak self] in self?.fireIfDue(id) }
        source.source.resume()
        return OffsetTimer(clock: self, id: id)
    }

    /// The file changed (or not): applies a new offset and fires or re-arms the pending timers.
    private func poll() {
        // The file moves the daemon's clock: take it only from a regular file of this uid that no
        // one else may write, never through a symbolic link, and never larger than a number.
        var info = stat()
        guard lstat(path, &info) == 0 else { return }  // missing: nothing to apply
        if let problem = Self.problem(with: info) {
            refuse("(file \(problem))", reason: problem)
            return
        }
        guard let data = FileManager.default.contents(atPath: path) else { return }
        let text = String(decoding: data, as: UTF8.self).trimmingWhitespaceAndNewlines()
        guard let milliseconds = Int64(text), milliseconds.multipliedReportingOverflow(by: 1_000_000).overflow == false else {
            refuse(text, reason: "not a decimal number of milliseconds")
            return
        }
        let offset = Duration.milliseconds(milliseconds)
        let applied = state.withLock { s -> Bool? in
            if offset == s.offset {
                s.refusedText = nil
                return false
            }
            guard offset > s.offset else { return nil }
            s.offset = offset
            s.refusedText = nil
            return true
        }
        switch applied {
        case nil: refuse(text, reason: "smaller than the current offset; monotonic time never goes back")
        case true?:
            fireDueAndRearm()
            // After the due timers are queued: a test waits for this line to know the advance is applied.
            logger.info("clock.advanced", ["offsetMilliseconds": "\(milliseconds)"])
        case false?: break
        }
    }

    /// Why the offset file may not be trusted, or nil.
    static func problem(with info: stat) -> String? {
        if (info.st_mode & S_IFMT) != S_IFREG { return "not a regular file (a symbolic link is never followed)" }
        if info.st_uid != getuid() { return "owned by uid \(info.st_uid), not by this daemon's uid \(getuid())" }
        if info.st_mode & (S_IWGRP | S_IWOTH) != 0 { return "writable by group or others; chmod 600 it" }
        if info.st_size > 64 { return "larger than 64 bytes" }
        return nil
    }

    private func refuse(_ text: String, reason: String) {
        let isNew = state.withLock { s -> Bool in
            defer { s.refusedText = text }
            return s.refusedText != text
        }
        guard isNew else { return }
        logger.error("clock.offset_refused", ["file": path, "content": String(text.prefix(40)), "reason": reason])
    }

    /// After an advance: the timers now due fire; the others are re-armed for what is left.
    private func fireDueAndRearm() {
        let due = state.withLock { s -> [(UInt64, Pending)] in
            let now = SystemClock().monotonic + s.offset
            var due: [(UInt64, Pending)] = []
            for (id, timer) in s.timers where !timer.isDispatched {
                if timer.due <= now {
                    s.timers[id]?.isDispatched = true
                    due.append((id, timer))
                } else {
                    timer.source.source.schedule(
                        deadline: .now() + Self.dispatchInterval(timer.due - now), leeway: .milliseconds(5))
                }
            }
            return due.sorted { $0.1.due < $1.1.due }
        }
        for (id, timer) in due { dispatch(id, timer) }
    }

    /// A timer's Dispatch source fired: runs it when due on this clock, else re-arms it.
    private func fireIfDue(_ id: UInt64) {
        let timer = state.withLock { s -> Pending? in
            guard let timer = s.timers[id], !timer.isDispatched else { return nil }
            let now = SystemClock().monotonic + s.offset
            guard timer.due <= now else {
                timer.source.source.schedule(deadline: .now() + Self.dispatchInterval(timer.due - now), leeway: .milliseconds(5))
                return nil
            }
            s.timers[id]?.isDispatched = true
            return timer
        }
        if let timer { dispatch(id, timer) }
    }

    /// Queues the work; it runs only if the timer was not cancelled in between.
    private func dispatch(_ id: UInt64, _ timer: Pending) {
        timer.source.source.cancel()
        timer.queue.async { [weak self] in
            guard let self, self.state.withLock({ $0.timers.removeValue(forKey: id) }) != nil else { return }
            timer.work()
        }
    }

    fileprivate func cancel(_ id: UInt64) {
        let removed = state.withLock { $0.timers.removeValue(forKey: id) }
        removed?.source.source.cancel()
    }

    /// `d` for Dispatch, in whole nanoseconds (not milliseconds: a timer armed a fraction of a
    /// millisecond early would find itself not due and re-arm for zero, again and again).
    static func dispatchInterval(_ d: Duration) -> DispatchTimeInterval {
        .nanoseconds(Int(max(0, d.clampedNanoseconds)))
    }
}

/// A handle to an `OffsetClock` timer; like a Dispatch timer, it is cancelled when released.
final class OffsetTimer: RainTimer {
    private let clock: OffsetClock
    private let id: UInt64
    init(clock: OffsetClock, id: UInt64) {
        self.clock = clock
        self.id = id
    }
    deinit { clock.cancel(id) }
    func cancel() { clock.cancel(id) }
}

/// A Dispatch timer source shared between the lock and the timer queue.
final class TimerSource: @unchecked Sendable {
    // @unchecked: Dispatch sources may be scheduled and cancelled from any thread; the reference
    // never changes.
    let source: any DispatchSourceTimer
    init(_ source: any DispatchSourceTimer) { self.source = source }
}

/// Chooses the test clock for a daemon from its environment.
public enum TestClockEnvironment {
    /// The variable naming the offset file.
    public static let variable = "RAINWALLET_TEST_CLOCK_FILE"

    /// An `OffsetClock` on the file named by `RAINWALLET_TEST_CLOCK_FILE`, or nil when it is not
    /// set (production). Logs a warning when the test clock is in use.
    public static func clock(logger: Logger) -> (any RainClock)? {
        guard let path = ProcessInfo.processInfo.environment[variable], !path.isEmpty else { return nil }
        let clock = OffsetClock(file: path, logger: logger.child("clock"))
        logger.warning("clock.test_offset", ["file": path, "milliseconds": "\(clock.offset.milliseconds)"])
        return clock
    }
}
