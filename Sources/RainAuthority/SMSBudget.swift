import FoundationEssentials
import RainCore
import RainCrypto
import Synchronization

/// One message counted against the SMS budget, for `SMSBudget.giveBack`.
public struct SMSBudgetSlot: Sendable, Hashable {
    /// The slot's id (random).
    public var id: String
    /// When it was taken.
    public var takenAt: Date

    /// A slot.
    public init(id: String, takenAt: Date) {
        self.id = id
        self.takenAt = takenAt
    }
}

/// What `SMSBudget.take` did.
public enum SMSBudgetOutcome: Sendable, Equatable {
    /// A slot was taken: the message may go.
    case taken(SMSBudgetSlot)
    /// The budget is used up; a slot frees at `retryAfter`.
    case full(retryAfter: Date)
}

/// Where the SMS sender counts the messages it hands to the gateway (toll fraud): at
/// most `limit` within any `window`. `StoreSMSBudget` keeps the count in the authority's store, so
/// every instance sharing the store spends one budget and a restart does not refill it;
/// `InMemorySMSBudget` counts for one sender only (a sender without a store).
public protocol SMSBudget: Sendable {
    /// Takes a slot at `now` unless `limit` slots were taken within `window` before it; the check
    /// and the taking are atomic.
    /// - Returns: the slot, or when one frees.
    /// - Throws: RAIN_502 when the store fails.
    func take(limit: Int, window: Duration, now: Date) async throws(RainError) -> SMSBudgetOutcome

    /// Gives a slot back (its message was refused before the gateway accepted it).
    /// - Throws: RAIN_502 when the store fails.
    func giveBack(_ slot: SMSBudgetSlot) async throws(RainError)
}

/// The SMS budget of one sender, in memory: lost with the process and not shared with other
/// instances (a sender made without a store, as in unit tests).
public final class InMemorySMSBudget: SMSBudget {
    /// The slots taken within the last window, oldest first.
    private let slots = Mutex<[SMSBudgetSlot]>([])

    /// An empty budget.
    public init() {}

    /// Takes a slot unless `limit` were taken within `window` before `now`.
    public func take(limit: Int, window: Duration, now: Date) throws(RainError) -> SMSBudgetOutcome {
        let start = now.unixMilliseconds - window.milliseconds
        let slot = SMSBudgetSlot(id: try SecureRandom.identifier(prefix: "sms"), takenAt: now)
        let clears: Int64? = slots.withLock { slots in
            slots.removeAll { $0.takenAt.unixMilliseconds <= start }
            guard slots.count >= limit else {
                slots.append(slot)
                return nil
            }
            guard limit > 0 else { return now.unixMilliseconds + window.milliseconds }
            // Room comes back once all but `limit - 1` of the counted slots have left the window.
            return slots[slots.count - limit].takenAt.unixMilliseconds + window.milliseconds
        }
        guard let clears else { return .taken(slot) }
        return .full(retryAfter: Date(unixMilliseconds: clears))
    }

    /// Forgets the slot.
    public func giveBack(_ slot: SMSBudgetSlot) {
        slots.withLock { slots in slots.removeAll { $0.id == slot.id } }
    }
}
