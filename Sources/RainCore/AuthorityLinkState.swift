import Foundation

/// Where the device's link to its authority stands: what `rainwallet status --json`
/// shows as `authorityLink` (`state`, `lastError`, `since`), what `SessionSnapshot.authorityLink`
/// carries and what the `Watch` stream announces when it changes (event kind `authorityLink`). An
/// embedded authority is always `connected`.
public struct AuthorityLinkState: Sendable, Hashable {
    /// The three states, named as `status --json` spells them.
    public enum Phase: String, Sendable, Hashable, CaseIterable {
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
