import FoundationEssentials
import RainCore

/// The authority's hourly SMS budget (toll fraud), kept in the store so every instance
/// sharing it (several authority processes on one PostgreSQL database) spends one budget, and a
/// restart does not refill it. One row per message handed to the gateway in `sms_slots`.
extension StoreOperations {
    /// Deletes the slots taken before `cutoff`; in the caller's transaction.
    static func pruneSMSSlots(_ db: some StoreConnection, takenBefore cutoff: Date) throws(RainError) -> Int {
        try db.execute(
            "DELETE FROM sms_slots WHERE taken_at < $1", values: [.integer(cutoff.unixMilliseconds)],
            operation: "delete old SMS budget slots")
    }
}
