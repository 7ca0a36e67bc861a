import Dispatch
import Foundation
import RainCore
import Synchronization

/// A clock that moves only when a test says so. Timers fire (on their queue) when `advance(by:)`
/// passes their deadline; wall time can also jump without moving monotonic time.
public final class ManualClock: RainClock {
    struct Pending {
        var id: Int
        var deadline: Duration
        var queue: DispatchQueue
        var work: @Sendable () -> Void
    }

    struct State {
        var wall: Date
        var monotonic: Duration = .seconds(1000)
        var nextID = 0
        var timers: [Pending] = []
    }

    private let state: Mutex<State>

    /// Starts at `start` (a fixed date by default, so tests are repeatable).
    public init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        state = Mutex(State(wall: start))
    }

    public var now: Date { state.withLock { $0.wall } }
    public var monotonic: Duration { state.withLock { $0.monotonic } }

    public func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) -> any RainTimer
    {
        let id = state.withLock { s -> Int in
            s.nextID += 1
            s.timers.append(Pending(id: s.nextID, deadline: s.monotonic + delay, queue: queue, work: work))
            return s.nextID
        }
        return ManualTimer { [weak self] in self?.cancel(id) }
    }

    private func cancel(_ id: Int) { state.withLock { $0.timers.removeAll { $0.id == id } } }

    /// Number of timers waiting to fire.
    public var pendingTimerCount: Int { state.withLock { $0.timers.count } }

    /// Moves wall and monotonic time forward, running due timers in deadline order (each on its
    /// queue, waited for before the next one runs).
    public func advance(by delta: Duration) {
        let target = state.withLock { $0.monotonic + delta }
        while true {
            let due: Pending? = state.withLock { s in
                guard let idx = s.timers.indices.min(by: { s.timers[$0].deadline < s.timers[$1].deadline }),
                    s.timers[idx].deadline <= target
                else { return nil }
                let t = s.timers.remove(at: idx)
                let step = t.deadline - s.monotonic
                if step > .zero {
                    s.wall = s.wall.adding(step)
                    s.monotonic = t.deadline
                }
                return t
            }
            guard let due else { break }
            due.queue.sync { due.work() }
        }
        state.withLock { s in
            let step = target - s.monotonic
            if step > .zero {
                s.wall = s.wall.adding(step)
                s.monotonic = target
            }
        }
    }

    /// Moves only the wall clock (a clock change or NTP step), by `delta` (may be negative).
    public func jumpWallClock(by delta: Duration) { state.withLock { $0.wall = $0.wall.adding(delta) } }
}

final class ManualTimer: RainTimer {
    private let onCancel: Mutex<(@Sendable () -> Void)?>
    init(_ onCancel: @escaping @Sendable () -> Void) { self.onCancel = Mutex(onCancel) }
    func cancel() {
        let f = onCancel.withLock { f -> (@Sendable () -> Void)? in
            defer { f = nil }
            return f
        }
        f?()
    }
}
