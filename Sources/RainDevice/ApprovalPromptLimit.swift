import RainCore
import Synchronization

/// At most `limit` approval prompts per uid in any rolling `window`, for apps not yet approved (an
/// app's first use of a profile, a new binary at an approved path). One prompt is on screen at a
/// time, so copies of one program at many paths, each asking in turn, would otherwise keep the
/// user's only prompt busy for as long as they like. Kept in memory, on the injected clock's
/// monotonic time; the uids are those the daemon admits, so the table stays small.
final class ApprovalPromptLimit: Sendable {
    /// Prompts allowed per uid within `window`.
    let limit: Int
    /// The rolling window.
    let window: Duration
    /// The monotonic times of the prompts begun within the window, by uid, oldest first.
    private let begun = Mutex<[UInt32: [Duration]]>([:])

    init(limit: Int = 3, window: Duration = .seconds(60)) {
        self.limit = limit
        self.window = window
    }

    /// Takes a slot for a prompt of `uid` at `now`.
    /// - Returns: nil when the prompt may be shown (the slot is taken); else how long until the
    ///   oldest prompt of the window leaves it.
    func take(uid: UInt32, now: Duration) -> Duration? {
        begun.withLock { begun in
            let since = now - window
            var times = (begun[uid] ?? []).filter { $0 > since }
            defer { begun[uid] = times.isEmpty ? nil : times }
            if times.count >= limit, let oldest = times.first { return oldest + window - now }
            times.append(now)
            return nil
        }
    }
}
