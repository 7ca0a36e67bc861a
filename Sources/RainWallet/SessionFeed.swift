import RainCore
import Synchronization

/// The one `Session/Watch` of a provider's profile that `authState`, `sessionState`, `serviceState`
/// and `onSessionExpired` all follow. One subscription, not one each: they reconnect at the same
/// moment, and every subscriber gets the daemon's reports in the same order, each report handed to
/// all of them before the next is read (docs/swift-library.md, "Streams that agree").
///
/// The watch runs while someone subscribes: the first subscriber starts it, the last one to leave
/// stops it.
final class SessionFeed: Sendable {
    /// One follower of the feed.
    struct Subscriber: Sendable {
        /// Takes one update. Runs with the feed's lock held, so it must not block or call the feed:
        /// it maps the update and yields to a stream.
        let deliver: @Sendable (WatchUpdate) -> Void
        /// Ends the follower's stream (the feed was closed). Runs without the lock.
        let finish: @Sendable () -> Void
    }

    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 0
        /// The running watch; nil while nobody subscribes.
        var task: Task<Void, Never>?
        /// Which watch is current: updates of a stopped one are dropped, however late they come.
        var generation: UInt64 = 0
        /// The current watch's last update, given first to a new subscriber; nil until it has one.
        var latest: WatchUpdate?
        var isClosed = false
    }

    private let state = Mutex(State())
    private let watcher: ProfileWatcher

    init(watcher: ProfileWatcher) { self.watcher = watcher }

    /// Adds a subscriber. It gets the watch's last update at once (an event as the first of a
    /// stream: it is the current state), then every update in order, with none missed or repeated
    /// in between.
    /// - Returns: the id to `unsubscribe` with; nil when the feed is closed.
    func subscribe(_ subscriber: Subscriber) -> UInt64? {
        state.withLock { s -> UInt64? in
            guard !s.isClosed else { return nil }
            let id = s.nextID
            s.nextID += 1
            s.subscribers[id] = subscriber
            switch s.latest {
            case .event(let event, _)?: subscriber.deliver(.event(event, isFirst: true))
            case let latest?: subscriber.deliver(latest)
            case nil: break
            }
            if s.task == nil {
                s.generation += 1
                let generation = s.generation
                let watcher = self.watcher
                s.task = Task { await watcher.run { self.deliver($0, generation: generation) } }
            }
            return id
        }
    }

    /// Removes a subscriber; the last one out stops the watch.
    func unsubscribe(_ id: UInt64) {
        let stopped = state.withLock { s -> Task<Void, Never>? in
            s.subscribers[id] = nil
            guard s.subscribers.isEmpty, let task = s.task else { return nil }
            s.task = nil
            s.latest = nil
            return task
        }
        // Outside the lock: cancelling ends the watch's stream, which writes the call's cancel.
        stopped?.cancel()
    }

    /// Stops the watch for good and ends every subscriber's stream.
    func close() {
        let (stopped, ended) = state.withLock { s -> (Task<Void, Never>?, [Subscriber]) in
            s.isClosed = true
            defer {
                s.task = nil
                s.latest = nil
                s.subscribers = [:]
            }
            return (s.task, Array(s.subscribers.values))
        }
        // Outside the lock: finishing a stream runs its termination handler, which unsubscribes.
        stopped?.cancel()
        for subscriber in ended { subscriber.finish() }
    }

    /// Whether a watch runs (tests).
    var isWatching: Bool { state.withLock { $0.task != nil } }

    private func deliver(_ update: WatchUpdate, generation: UInt64) {
        state.withLock { s in
            guard s.generation == generation, s.task != nil else { return }
            s.latest = update
            for subscriber in s.subscribers.values { subscriber.deliver(update) }
        }
    }
}
