import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

/// What `AuthorityStore.takeSMSSlot` did.
package enum SMSSlotOutcome: Sendable, Equatable {
    /// The slot was stored.
    case taken
    /// The budget is used up; a slot frees at `retryAfter`.
    case full(retryAfter: Date)
}

/// What `AuthorityStore.prune` deleted.
package struct PruneResult: Sendable, Equatable {
    /// Challenges deleted.
    package var challengesDeleted: Int
    /// Sessions deleted.
    package var sessionsDeleted: Int
    /// Rotated-out refresh-token hashes deleted (of live sessions; a deleted session's go with it).
    package var retiredRefreshTokensDeleted: Int
    /// Passkey ceremonies deleted (they expire with the challenges' cutoff).
    package var passkeyCeremoniesDeleted: Int
    /// Development-outbox deliveries deleted: filled in by `EmbeddedAuthority.pruneExpired()`
    /// (the outbox is a file beside the store); a store leaves it 0.
    package var outboxEntriesDeleted: Int = 0
    /// SMS budget slots deleted.
    package var smsSlotsDeleted: Int = 0
    /// Wrong-guess budget slots deleted.
    package var codeGuessesDeleted: Int = 0

    /// Creates a result.
    package init(
        challengesDeleted: Int, sessionsDeleted: Int, retiredRefreshTokensDeleted: Int = 0,
        passkeyCeremoniesDeleted: Int = 0
    ) {
        self.challengesDeleted = challengesDeleted
        self.sessionsDeleted = sessionsDeleted
        self.retiredRefreshTokensDeleted = retiredRefreshTokensDeleted
        self.passkeyCeremoniesDeleted = passkeyCeremoniesDeleted
    }
}
