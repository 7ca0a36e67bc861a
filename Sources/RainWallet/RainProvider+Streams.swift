import Dispatch
import Foundation
import RainCore
internal import RainWire

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

/// What a watcher that reconnects sees: an event of the daemon, or the loss of the daemon.
enum WatchUpdate: Sendable {
    /// An event; `isFirst` for the current state the daemon sends first on each new stream.
    case event(WatchEvent, isFirst: Bool)
    /// The daemon went away (or never answered): the watcher is waiting to reconnect.
    case disconnected
}

/// One profile's `Session/Watch`, reopened with backoff whenever the daemon goes away, until the
/// task that runs it is cancelled or `open` returns nil (the provider is gone).
struct ProfileWatcher: Sendable {
    /// Opens a new watch stream; nil when there is no provider any more.
    let open: @Sendable () throws(RainError) -> AsyncThrowingStream<[UInt8], any Error>?
    let backoff: ReconnectBackoff

    /// Calls `handle` with every event and every loss of the daemon, in order, until cancelled.
    func run(_ handle: (WatchUpdate) async -> Void) async {
        var attempt = 0
        while !Task.isCancelled {
            do {
                guard let messages = try open() else { return }
                var isFirst = true
                for try await bytes in messages {
                    let event = try WatchEvent.decode(bytes)
                    attempt = 0
                    await handle(.event(event, isFirst: isFirst))
                    isFirst = false
                }
            } catch {
                // The daemon is away, went away, or refused the stream: all the same to a watcher,
                // which shows `loading` and tries again.
            }
            if Task.isCancelled { return }
            await handle(.disconnected)
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
    /// doubling up to 2 s) and shows the current value again. It ends only when the task iterating
    /// it is cancelled (or at once for an invalid `RainWalletConfig.profile`). Values arrive on a
    /// background task: hop to your UI's actor before touching UI.
    public var authState: AsyncStream<AuthState> {
        stateStream(loading: .loading) { $0.authState }
    }

    /// The finer session state (`active(expiresAt)`, `expired`, `none`, `loading`): the current
    /// value first, then every change. Survives the daemon like `authState`: `loading` while it is
    /// away, then the current value again.
    public var sessionState: AsyncStream<SessionState> {
        stateStream(loading: .loading) { $0.sessionState }
    }

    /// Sets the hook called when the session ends without `logout()`: it could not be refreshed,
    /// it expired, or the user logged in on another device. Called exactly once per session seen
    /// active, on a serial background queue (switch to your UI thread before touching UI), also
    /// when the session ended while the daemon was away (reported once the provider reconnects
    /// and finds it gone); a daemon restart alone is not an expiry. The provider keeps the hook for
    /// its whole life: don't capture short-lived objects in it. Setting a new hook replaces the old.
    public func onSessionExpired(_ hook: @escaping @Sendable (ExpiryReason) -> Void) {
        guard let watcher = profileWatcher(retainingProvider: false) else { return }
        let queue = expiryQueue
        let task = Task { [weak self] in
            var tracker = ExpiryTracker()
            await watcher.run { update in
                let verdict = tracker.observe(update)
                let hasSeenActive = tracker.hasSeenActiveSession
                self?.expiryWatchState.withLock { s in
                    if case .event(_, isFirst: true) = update { s.connections += 1 }
                    s.hasSeenActiveSession = hasSeenActive
                }
                switch verdict {
                case nil:
                    return
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

    /// A watcher of this provider's profile; nil when the profile name is invalid. A stream's
    /// watcher keeps the provider alive while it runs (it ends with the stream); the expiry hook's
    /// does not (the provider owns that task and cancels it when it goes away).
    private func profileWatcher(retainingProvider: Bool) -> ProfileWatcher? {
        guard (try? ProfileName.validate(config.profile)) != nil else { return nil }
        if retainingProvider {
            return ProfileWatcher(open: { () throws(RainError) in try self.openWatch() }, backoff: reconnectBackoff)
        }
        return ProfileWatcher(
            open: { [weak self] () throws(RainError) in try self?.openWatch() }, backoff: reconnectBackoff)
    }

    /// A stream of one value taken from each state the daemon reports (repeats dropped), with
    /// `loading` while the daemon is away.
    private func stateStream<T: Equatable & Sendable>(
        loading: T, _ transform: @escaping @Sendable (SessionSnapshot) -> T
    ) -> AsyncStream<T> {
        let (stream, continuation) = AsyncStream<T>.makeStream(bufferingPolicy: .bufferingNewest(64))
        guard let watcher = profileWatcher(retainingProvider: true) else {
            continuation.finish()
            return stream
        }
        let task = Task {
            var last: T?
            await watcher.run { update in
                let value: T
                switch update {
                case .disconnected: value = loading
                case .event(let event, _): value = transform(event.state)
                }
                if value != last {
                    last = value
                    continuation.yield(value)
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
