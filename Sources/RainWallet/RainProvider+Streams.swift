import Dispatch
import FoundationEssentials
import Glibc
import RainCore
internal import RainWire
import Synchronization

/// How the library's streams wait before reconnecting to a daemon that went away (restarted,
/// upgraded, or not started yet): `initial`, doubling up to `maximum`, each delay jittered (a
/// random point in its upper half) so that the apps of a session do not reconnect in step.
package struct ReconnectBackoff: Sendable, Equatable {
    /// The first delay.
    package var initial: Duration
    /// The cap of the delay.
    package var maximum: Duration

    /// Creates a backoff.
    package init(initial: Duration = .milliseconds(50), maximum: Duration = .seconds(2)) {
        self.initial = initial
        self.maximum = maximum
    }

    /// 50 ms doubling up to 2 s.
    package static let `default` = ReconnectBackoff()

    /// The delay before reconnect attempt `attempt` (0 for the first after a loss), jittered:
    /// between half the attempt's delay and the whole of it.
    package func delay(attempt: Int) -> Duration {
        var base = initial
        var doublings = 0
        while doublings < attempt && base < maximum {
            base *= 2
            doublings += 1
        }
        let milliseconds = max(min(base, maximum).milliseconds, 1)
        return .milliseconds(milliseconds / 2 + Int64.random(in: 0...(milliseconds - milliseconds / 2)))
    }
}

/// What a watcher that reconnects sees: an event of the daemon, the loss of the daemon, or a
/// failed attempt to reach it.
enum WatchUpdate: Sendable {
    /// An event; `isFirst` for the current state the daemon sends first on each new stream.
    case event(WatchEvent, isFirst: Bool)
    /// The stream the daemon served ended (it went away): the watcher is waiting to reconnect.
    case disconnected
    /// The watch could not be opened, or was refused before its first event: RAIN_101 when no
    /// daemon answers (or one of another uid), another code when the daemon refuses this app. The
    /// watcher tries again.
    case unreachable(RainError)

    /// The snapshot the state streams show for this update: the event's, or `loading` while the
    /// daemon is away.
    var snapshot: SessionSnapshot {
        if case .event(let event, _) = self { return event.state }
        return .loading
    }

    /// What `serviceState` shows for this update; nil for the loss of a stream, which says nothing
    /// yet about the daemon (a restart reconnects at once: the next attempt tells).
    var serviceState: ServiceState? {
        switch self {
        case .event: return .running
        case .disconnected: return nil
        case .unreachable(let error): return error.code == .notInitialized ? .notRunning(error) : .refused(error)
        }
    }
}

/// One profile's `Session/Watch`, reopened with backoff whenever the daemon goes away, until the
/// task that runs it is cancelled or `open` returns nil (the provider is gone).
struct ProfileWatcher: Sendable {
    /// Opens a new watch stream; nil when there is no provider any more.
    let open: @Sendable () throws(RainError) -> AsyncThrowingStream<[UInt8], any Error>?
    let backoff: ReconnectBackoff

    /// Calls `handle` with every event, every loss of the daemon and every failed attempt, in
    /// order, until cancelled.
    func run(_ handle: (WatchUpdate) async -> Void) async {
        var attempt = 0
        while !Task.isCancelled {
            var hasEvents = false
            let ending: WatchUpdate
            do {
                guard let messages = try open() else { return }
                for try await bytes in messages {
                    let event = try WatchEvent.decode(bytes)
                    attempt = 0
                    await handle(.event(event, isFirst: !hasEvents))
                    hasEvents = true
                }
                ending = .disconnected
            } catch {
                // Away, gone or refused: the watcher shows `loading` and tries again either way.
                let error = error as? RainError ?? RainError(.notInitialized, "the daemon's watch stream failed: \(error)")
                ending = hasEvents ? .disconnected : .unreachable(error)
            }
            if Task.isCancelled { return }
            await handle(ending)
            try? await Task.sleep(for: backoff.delay(attempt: attempt))
            attempt += 1
        }
    }
}

/// Decides when `onSessionExpired` fires: once per session it saw active, whether the daemon
/// reported the end live (`sessionExpired`) or the end happened while the watcher was away and the
/// first state after reconnecting shows the session gone. A restart alone shows the session again
/// (or `loading`), which is no end; a logout shows no session, which is no expiry either.
struct ExpiryTracker {
    /// What an update means for the hook.
    enum Verdict: Equatable {
        /// Fire the hook with this reason.
        case fire(ExpiryReason)
        /// Fire the hook; the session ended while the watcher was away, so the reason is asked of
        /// the daemon (it answers RAIN_201 with it).
        case fireWithReasonFromDaemon
    }

    /// True from the moment a session is seen active until its end is reported (or a logout).
    private(set) var hasSeenActiveSession = false

    /// Takes one update; returns what to do with the hook, if anything.
    mutating func observe(_ update: WatchUpdate) -> Verdict? {
        guard case .event(let event, let isFirst) = update else { return nil }
        if event.kind == .sessionExpired {
            defer { hasSeenActiveSession = false }
            return hasSeenActiveSession ? .fire(event.expiryReason ?? .expired) : nil
        }
        switch event.state.sessionState {
        case .active:
            hasSeenActiveSession = true
        case .none:
            // Logged out (here or by another client of the profile): not an expiry.
            hasSeenActiveSession = false
        case .expired:
            // While connected, the daemon's `sessionExpired` event reports the end (an expired
            // session it has not ended yet reads as expired before that). A first state showing the
            // session ended means it ended while this watcher was away.
            if isFirst && event.state.accountID == nil && hasSeenActiveSession {
                hasSeenActiveSession = false
                return .fireWithReasonFromDaemon
            }
        case .loading:
            break
        }
        return nil
    }
}

/// What the `onSessionExpired` watcher has seen (tests).
package struct ExpiryWatchStatus: Sendable, Equatable {
    /// Streams opened so far: 1 once connected, 2 after one reconnect, …
    package var connections = 0
    /// Whether a session is active and its end not reported yet.
    package var hasSeenActiveSession = false
}

extension RainProvider {
    /// `loading`, `authenticated` or `unauthenticated`: the current value first, then every change.
    /// Bind the login gate to it. The stream survives the daemon: while it is away (restarting,
    /// not started yet) the value is `loading`, and the stream reconnects (with backoff, 50 ms
    /// doubling up to 2 s) and shows the current value again; `serviceState` tells a daemon that
    /// is not running from one that is still restoring. It ends only when the task iterating it is
    /// cancelled (or at once for an invalid `RainWalletConfig.profile`, or after `close()`).
    ///
    /// It agrees with `sessionState`: both follow one subscription of the provider, so they
    /// reconnect together and pass through the same states in the same order (`authenticated`
    /// exactly while the session is `active`, `unauthenticated` while it is `none` or `expired`);
    /// neither delivers the same value twice in a row. Values arrive on a background task: hop to
    /// your UI's actor before touching UI.
    public var authState: AsyncStream<AuthState> {
        follow { $0.snapshot.authState }
    }

    /// The finer session state (`active(expiresAt)`, `expired`, `none`, `loading`): the current
    /// value first, then every change. Survives the daemon like `authState` and agrees with it:
    /// `loading` while the daemon is away, then the current value again.
    public var sessionState: AsyncStream<SessionState> {
        follow { $0.snapshot.sessionState }
    }

    /// Whether the daemon is there: `running` once it serves this profile's state, `notRunning`
    /// with the RAIN_101 a call would throw now (no daemon answers at the socket: not started,
    /// stopped; its message says how to start it) while the provider keeps trying, `refused` when
    /// the daemon answers but will not serve this app (RAIN_202: the app is not approved for the
    /// profile). While it is not `running`, `authState` and `sessionState` show `loading`: this
    /// stream tells "the wallet service is missing" from "the session is still being restored".
    /// Its value comes first once the provider has tried to reach the daemon, then every change;
    /// a restart that the provider reconnects across at once stays `running`.
    public var serviceState: AsyncStream<ServiceState> {
        follow { $0.serviceState }
    }

    /// Sets the hook called when the session ends without `logout()`: it could not be refreshed,
    /// it expired, or the user logged in on another device. Called exactly once per session seen
    /// active, on a serial background queue (switch to your UI thread before touching UI), also
    /// when the session ended while the daemon was away (reported once the provider reconnects
    /// and finds it gone); a daemon restart alone is not an expiry. The provider keeps the hook for
    /// its whole life (until `close()`): don't capture short-lived objects in it. Setting a new hook
    /// replaces the old.
    public func onSessionExpired(_ hook: @escaping @Sendable (ExpiryReason) -> Void) {
        guard profileRefusal == nil, let feed = sessionFeed() else { return }
        // The hook may ask the daemon why the session ended, which takes a call: the feed's updates
        // queue here, in order, for a task of their own.
        let (updates, continuation) = AsyncStream<WatchUpdate>.makeStream()
        let subscriber = SessionFeed.Subscriber(
            deliver: { continuation.yield($0) }, finish: { continuation.finish() })
        guard let id = feed.subscribe(subscriber) else { return }
        // The feed, not the provider: the provider owns this watch and ends it when it goes away.
        continuation.onTermination = { _ in feed.unsubscribe(id) }
        let queue = expiryQueue
        let task = Task { [weak self] in
            var tracker = ExpiryTracker()
            for await update in updates {
                let verdict = tracker.observe(update)
                let hasSeenActive = tracker.hasSeenActiveSession
                self?.expiryWatchState.withLock { s in
                    if case .event(_, isFirst: true) = update { s.connections += 1 }
                    s.hasSeenActiveSession = hasSeenActive
                }
                switch verdict {
                case nil:
                    continue
                case .fire(let reason):
                    queue.async { hook(reason) }
                case .fireWithReasonFromDaemon:
                    let reason = await self?.reasonOfEndedSession() ?? .expired
                    queue.async { hook(reason) }
                }
            }
        }
        expiryWatch.withLock {
            $0?.cancel()
            $0 = task
        }
    }

    /// What the `onSessionExpired` watcher has seen so far (tests).
    package var expiryWatchStatus: ExpiryWatchStatus { expiryWatchState.withLock { $0 } }

    /// Why the profile's session ended, as the daemon's RAIN_201 says; `expired` when it does not say.
    private func reasonOfEndedSession() async -> ExpiryReason {
        do {
            _ = try await call(Method.accountGet, GetAccountRequest(), as: AccountResponse.self)
        } catch {
            switch SessionEndReason(reasonOf: error) {
            case .revokedElsewhere: return .revokedElsewhere
            case .refreshFailed: return .refreshFailed
            default: return .expired
            }
        }
        return .expired
    }

    /// A watcher of this provider's profile. It does not keep the provider alive: the provider
    /// owns the feed that runs it, and a stream keeps the provider alive on its own.
    func profileWatcher() -> ProfileWatcher {
        ProfileWatcher(open: { [weak self] () throws(RainError) in try self?.openWatch() }, backoff: reconnectBackoff)
    }

    /// A stream of one value taken from each update of the provider's feed, repeats dropped
    /// (`value` returns nil for an update that says nothing to this stream). It keeps the provider
    /// alive while it runs, so `for await s in RainProvider(…).authState` works.
    private func follow<T: Equatable & Sendable>(_ value: @escaping @Sendable (WatchUpdate) -> T?) -> AsyncStream<T> {
        // Unbounded: dropping values under a slow reader could leave two equal values side by side.
        let (stream, continuation) = AsyncStream<T>.makeStream()
        guard profileRefusal == nil, let feed = sessionFeed() else {
            continuation.finish()
            return stream
        }
        let last = Mutex<T?>(nil)
        let subscriber = SessionFeed.Subscriber(
            deliver: { update in
                guard let new = value(update) else { return }
                let isChange = last.withLock { kept -> Bool in
                    defer { kept = new }
                    return kept != new
                }
                if isChange { continuation.yield(new) }
            },
            finish: { continuation.finish() })
        guard let id = feed.subscribe(subscriber) else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { _ in
            withExtendedLifetime(self) { feed.unsubscribe(id) }
        }
        return stream
    }
}
