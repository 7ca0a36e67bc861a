import Dispatch
import FoundationEssentials
import RainCore
import Synchronization

/// Prunes an embedded authority on a schedule: once when started, then every `interval` on the
/// authority's clock (`EmbeddedAuthority.pruneExpired()`: expired challenges and passkey
/// ceremonies, revoked sessions, retired refresh tokens, old outbox deliveries), until stopped.
///
/// Each run logs one `prune` line with the counts. A failed run is logged (`prune.failed`, with
/// its error code only) and the next one happens at the next interval.
public final class PeriodicPruning: Sendable {
    private struct State {
        var timer: (any RainTimer)?
        var isStopped = false
        var completedRuns = 0
    }

    private let authority: EmbeddedAuthority
    private let interval: Duration
    private let queue = DispatchQueue(label: "rain.authority.prune")
    private let state = Mutex(State())

    /// A schedule for `authority`, every `interval` (at least one second).
    public init(authority: EmbeddedAuthority, interval: Duration) {
        self.authority = authority
        self.interval = max(interval, .seconds(1))
    }

    /// Runs a first prune now, then one every interval.
    public func start() {
        Task { await self.run() }
    }

    /// Stops the schedule; a run in progress finishes, no other starts.
    public func stop() {
        let timer = state.withLock { s -> (any RainTimer)? in
            s.isStopped = true
            defer { s.timer = nil }
            return s.timer
        }
        timer?.cancel()
    }

    /// How many runs finished (successfully or not).
    public var completedRuns: Int { state.withLock { $0.completedRuns } }

    private func run() async {
        guard !state.withLock({ $0.isStopped }) else { return }
        do {
            try await authority.pruneExpired()
        } catch {
            authority.logger.error("prune.failed", ["code": error.code.description])
        }
        let timer = authority.clock.schedule(after: interval, on: queue) { [weak self] in
            guard let self else { return }
            Task { await self.run() }
        }
        let armed = state.withLock { s -> Bool in
            s.completedRuns += 1
            guard !s.isStopped else { return false }
            s.timer = timer
            return true
        }
        if !armed { timer.cancel() }
    }
}
