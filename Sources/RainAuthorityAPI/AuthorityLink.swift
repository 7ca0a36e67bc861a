import Foundation
import RainCore

/// Where the device's link to its authority stands (issue 20): what `rainwallet status --json`
/// shows as `authorityLink` and the `Watch` stream carries when it changes. An embedded authority
/// is always `connected`.
public struct AuthorityLinkState: Sendable, Equatable {
    /// The three states, named as `status --json` spells them.
    public enum Phase: String, Sendable, Equatable, CaseIterable {
        /// The last call got an answer (or none was made yet).
        case connected
        /// The last call got no answer (a deadline passed, the connection dropped): the authority may
        /// be slow or briefly away.
        case degraded
        /// The authority cannot be reached: a connection could not be made, or calls went
        /// unanswered twice in a row.
        case unreachable
    }

    /// The state.
    public var phase: Phase
    /// The message of the failure that led here (nil when connected); never a code or a token.
    public var lastError: String?
    /// When the link entered this state, on the injected clock.
    public var since: Date

    /// A state.
    public init(phase: Phase, lastError: String? = nil, since: Date) {
        self.phase = phase
        self.lastError = lastError
        self.since = since
    }
}

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
