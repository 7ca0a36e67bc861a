import FoundationEssentials
import RainCore
import RainCrypto
import RainStore

/// The SMS budget kept in the authority's store (`AuthorityStore.takeSMSSlot`): one budget for
/// every authority instance on the store (the count and the insert are one transaction, under a
/// lock every instance takes), kept across restarts. The periodic prune deletes the slots that
/// left the window.
package struct StoreSMSBudget: SMSBudget {
    let store: any AuthorityStore

    /// The budget in `store`.
    package init(store: any AuthorityStore) {
        self.store = store
    }

    /// Takes a slot in the store (see `AuthorityStore.takeSMSSlot`).
    package func take(limit: Int, window: Duration, now: Date) async throws(RainError) -> SMSBudgetOutcome {
        let slot = SMSBudgetSlot(id: try SecureRandom.identifier(prefix: "sms"), takenAt: now)
        switch try await store.takeSMSSlot(id: slot.id, limit: limit, window: window, now: now) {
        case .taken: return .taken(slot)
        case .full(let retryAfter): return .full(retryAfter: retryAfter)
        }
    }

    /// Deletes the slot's row.
    package func giveBack(_ slot: SMSBudgetSlot) async throws(RainError) {
        try await store.releaseSMSSlot(id: slot.id)
    }
}
