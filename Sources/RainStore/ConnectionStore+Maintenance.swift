import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

// Pruning and the SMS budget.
extension ConnectionStore {
    /// Deletes old challenges, revoked sessions, old rotated-out refresh hashes and old SMS budget
    /// slots, in one transaction.
    @discardableResult
    package func prune(
        challengesExpiredBefore: Date, sessionsRevokedBefore: Date, refreshTokensRetiredBefore: Date,
        smsSlotsTakenBefore: Date
    ) async throws(RainError) -> PruneResult {
        try await perform { db throws(RainError) in
            try db.transaction("prune old challenges and sessions") { () throws(RainError) -> PruneResult in
                var result = try StoreOperations.prune(
                    db, challengesExpiredBefore: challengesExpiredBefore, sessionsRevokedBefore: sessionsRevokedBefore,
                    refreshTokensRetiredBefore: refreshTokensRetiredBefore)
                result.smsSlotsDeleted = try StoreOperations.pruneSMSSlots(db, takenBefore: smsSlotsTakenBefore)
                return result
            }
        }
    }

    /// Takes a slot unless `limit` slots were already taken within `window` before `now`; in
    /// one transaction, under the budget's lock: SQLite's write lock, and on PostgreSQL one
    /// advisory lock every instance takes (`pg_advisory_xact_lock` of a constant name). A row lock
    /// would not do: READ COMMITTED cannot lock the rows another instance is about to insert, and
    /// an empty window has no row to lock, so two takes could both count `limit - 1` and both insert.
    /// Holding the lock to the commit, the next take's count (a new snapshot per statement in READ
    /// COMMITTED) sees every committed slot.
    package func takeSMSSlot(id: String, limit: Int, window: Duration, now: Date) async throws(RainError)
        -> SMSSlotOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("take an SMS budget slot") { () throws(RainError) -> SMSSlotOutcome in
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
                    guard allowed > 0 else {
                        return .full(retryAfter: Date(unixMilliseconds: now.unixMilliseconds + windowMilliseconds))
                    }
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
        }
    }

    /// Deletes a slot (the gateway refused its message before accepting it).
    package func releaseSMSSlot(id: String) async throws(RainError) {
        try await perform { db throws(RainError) -> Void in
            try db.execute("DELETE FROM sms_slots WHERE id = $1", values: [.text(id)], operation: "give back an SMS budget slot")
        }
    }
}
