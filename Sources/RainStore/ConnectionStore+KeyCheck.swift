import FoundationEssentials
import RainCore

// The master-key check: one row, written once by the first instance, read by every later start.
extension ConnectionStore {
    /// Records `check` unless the store holds a check already, in one transaction.
    package func recordKeyCheck(_ check: StoreKeyCheck, at date: Date) async throws(RainError) -> StoreKeyCheckOutcome {
        try await perform { db throws(RainError) in
            try db.transaction("record the master key check") { () throws(RainError) -> StoreKeyCheckOutcome in
                // Two instances starting together on an empty store: the second waits here, then
                // reads the first one's check.
                try db.lock("store-key-check")
                if let stored = try StoreOperations.keyCheck(db) { return .existing(stored) }
                let hasAccounts = try StoreOperations.hasAccounts(db)
                try db.execute(
                    "INSERT INTO store_key_check (id, key_id, key_check, recorded_at) VALUES (1, $1, $2, $3)",
                    values: [.text(check.keyID), .bytes(check.value), .integer(date.unixMilliseconds)],
                    operation: "record the master key check")
                return hasAccounts ? .adopted : .recorded
            }
        }
    }

    /// The store's master-key check, or nil when none is recorded yet.
    package func keyCheck() async throws(RainError) -> StoreKeyCheck? {
        try await perform { db throws(RainError) in try StoreOperations.keyCheck(db) }
    }

    /// Whether the store holds data a master key protects: an account, or a recorded key check.
    package func holdsKeyedData() async throws(RainError) -> Bool {
        try await perform { db throws(RainError) -> Bool in
            if try StoreOperations.hasAccounts(db) { return true }
            return try StoreOperations.keyCheck(db) != nil
        }
    }
}

extension StoreOperations {
    static func keyCheck<DB: StoreConnection>(_ db: DB) throws(RainError) -> StoreKeyCheck? {
        let op = "read the master key check"
        guard
            let row = try db.query("SELECT key_id, key_check FROM store_key_check WHERE id = 1", values: [], operation: op).first
        else { return nil }
        return StoreKeyCheck(keyID: try row.text(0, op), value: try row.bytes(1, op))
    }

    static func hasAccounts<DB: StoreConnection>(_ db: DB) throws(RainError) -> Bool {
        try !db.query("SELECT 1 FROM accounts LIMIT 1", values: [], operation: "look for an account").isEmpty
    }
}
