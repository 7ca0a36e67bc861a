import Dispatch
import FoundationEssentials
import Synchronization

/// A handle to a scheduled timer; cancelling it is idempotent.
public protocol RainTimer: Sendable {
    /// Stops the timer; its work will not run afterwards.
    func cancel()
}

/// Time, injected: wall time, monotonic time and timers. Tests use a manual clock; production
/// uses `SystemClock` (Dispatch timers on a monotonic clock).
public protocol RainClock: Sendable {
    /// Wall-clock time.
    var now: Date { get }
    /// Monotonic time since an arbitrary origin; never jumps.
    var monotonic: Duration { get }
    /// Runs `work` on `queue` once `delay` has passed on the monotonic clock. The timer lives
    /// as long as the returned handle: keep it until it fires.
    func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) -> any RainTimer
    /// Suspends for `delay` on this clock (a manual clock resumes it when a test advances time).
    func sleep(for delay: Duration) async
}

/// The real clock.
public struct SystemClock: RainClock {
    public init() {}
    public var now: Date { Date() }
    public var monotonic: Duration { .nanoseconds(Int64(bitPattern: DispatchTime.now().uptimeNanoseconds)) }

    public func sleep(for delay: Duration) async {
        try? await Task.sleep(for: delay)
    }

    public func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) -> any RainTimer
    {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let nanos = max(0, Int(clamping: delay.milliseconds) * 1_000_000)
        timer.schedule(deadline: .now() + .nanoseconds(nanos), leeway: .milliseconds(5))
        timer.setEventHandler(handler: work)
        timer.resume()
        return DispatchRainTimer(timer)
    }
}

/// Wraps a one-shot Dispatch timer.
final class DispatchRainTimer: RainTimer, @unchecked Sendable {
    // @unchecked: DispatchSourceTimer is thread-safe for cancel(); the reference never changes.
    private let source: any DispatchSourceTimer
    init(_ source: any DispatchSourceTimer) { self.source = source }
    func cancel() { source.cancel() }
}

extension RainClock {
    /// Default: a timer from `schedule`, kept alive until it fires.
    public func sleep(for delay: Duration) async {
        let holder = TimerHolder()
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            holder.hold(
                schedule(after: delay, on: .global()) {
                    c.resume()
                    holder.release()
                })
        }
    }
}

/// Keeps a timer referenced until it has fired (a released Dispatch timer never fires).
final class TimerHolder: Sendable {
    private let timer = Mutex<(any RainTimer)?>(nil)
    func hold(_ t: any RainTimer) { timer.withLock { $0 = t } }
    func release() { timer.withLock { $0 = nil } }
}
