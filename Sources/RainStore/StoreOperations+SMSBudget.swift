import Foundation
import RainCore

/// The authority's hourly SMS budget (toll fraud), kept in the store so every instance
/// sharing it (several authority processes on one PostgreSQL database) spends one budget, and a
/// restart does not refill it. One row per message handed to the gateway in `sms_slots`.
extension StoreOperations {
    /// Takes a slot unless `limit` slots were already taken within `window` before `now`; in the
    /// caller's transaction, under the budget's lock: SQLite's write lock, and on PostgreSQL one
    /// advisory lock every instance takes (`pg_advisory_xact_lock` of a constant name). A row lock
    /// would not do: READ COMMITTED cannot lock the rows another instance is about to insert, and
    /// an empty window has no row to lock, so two takes could both count `limit - 1` and both insert.
    /// Holding the lock to the commit, the next take's count (a new snapshot per statement in READ
    /// COMMITTED) sees every committed slot.
    static func takeSMSSlot<DB: StoreConnection>(
        _ db: DB, id: String, limit: Int, window: Duration, now: Date
    ) throws(RainError) -> SMSSlotOutcome {
        try db.lock("sms-budget")
        let windowMilliseconds = window.milliseconds
        let start = now.unixMilliseconds - windowMilliseconds
        let op = "count the SMS budget's slots"
        // Slots a clock ahead of this one took count too: they are within the window.
        let rows = try db.query(
            "SELECT COUNT(*) FROM sms_slots WHERE taken_at > $1", values: [.integer(start)], operation: op)
        let count = try rows.first?.integer(0, op) ?? 0
        let allowed = Int64(max(0, limit))
        if count >= allowed {
            guard allowed > 0 else { return .full(retryAfter: Date(unixMilliseconds: now.unixMilliseconds + windowMilliseconds)) }
            // Room comes back once all but `limit - 1` of the counted slots have left the window.
            let findOp = "find when an SMS budget slot frees"
            let oldest = try db.query(
                "SELECT taken_at FROM sms_slots WHERE taken_at > $1 ORDER BY taken_at LIMIT 1 OFFSET $2",
                values: [.integer(start), .integer(count - allowed)], operation: findOp)
            let takenAt = try oldest.first?.integer(0, findOp) ?? now.unixMilliseconds
            return .full(retryAfter: Date(unixMilliseconds: takenAt + windowMilliseconds))
        }
        try db.execute(
            "INSERT INTO sms_slots (id, taken_at) VALUES ($1, $2)",
            values: [.text(id), .integer(now.unixMilliseconds)], operation: "take an SMS budget slot")
        return .taken
    }

    /// Deletes a slot (the gateway refused its message before accepting it).
    static func releaseSMSSlot(_ db: some StoreConnection, id: String) throws(RainError) {
        try db.execute("DELETE FROM sms_slots WHERE id = $1", values: [.text(id)], operation: "give back an SMS budget slot")
    }

    /// Deletes the slots taken before `cutoff`; in the caller's transaction.
    static func pruneSMSSlots(_ db: some StoreConnection, takenBefore cutoff: Date) throws(RainError) -> Int {
        try db.execute(
            "DELETE FROM sms_slots WHERE taken_at < $1", values: [.integer(cutoff.unixMilliseconds)],
            operation: "delete old SMS budget slots")
    }
}
