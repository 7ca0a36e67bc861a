import FoundationEssentials
import RainCore

/// Follows the link from the outcomes of calls: an answer (any answer, a refusal too) means
/// connected; a failed connection attempt means unreachable; a call without an answer means
/// degraded, and unreachable at the second in a row.
struct AuthorityLinkTracker: Sendable {
    private(set) var state: AuthorityLinkState
    private var failuresInARow = 0

    init(now: Date) {
        state = AuthorityLinkState(phase: .connected, since: now)
    }

    /// Records an answer; returns the new state when it changed.
    mutating func answered(now: Date) -> AuthorityLinkState? {
        failuresInARow = 0
        guard state.phase != .connected else { return nil }
        state = AuthorityLinkState(phase: .connected, since: now)
        return state
    }

    /// Records a call without an answer; returns the new state when it changed (a new error in the
    /// same state is a change too: watchers show the latest).
    mutating func failed(_ message: String, couldNotConnect: Bool, now: Date) -> AuthorityLinkState? {
        failuresInARow += 1
        let phase: AuthorityLinkState.Phase = couldNotConnect || failuresInARow >= 2 ? .unreachable : .degraded
        let since = phase == state.phase ? state.since : now
        let next = AuthorityLinkState(phase: phase, lastError: message, since: since)
        guard next != state else { return nil }
        state = next
        return state
    }
}
