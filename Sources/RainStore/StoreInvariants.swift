import RainCore

/// The invariants a crash or a race must never break, as queries both stores run in their
/// `consistencyViolations` (the crash-safety kill loop and the store races check them). Each query
/// returns one id per violation; the SQL is the common subset of SQLite and PostgreSQL.
enum StoreInvariants {
    /// One invariant: what a violation is called, and the query that finds them.
    struct Check {
        /// Prefixes each violation line (`"<what>: <id>"`).
        let what: String
        /// Returns one text id per violation.
        let sql: String
        /// Whether `sql` takes the wrong-attempt limit as its one parameter.
        let takesAttemptLimit: Bool
    }

    /// Every check; `$1` is the wrong-attempt limit.
    static let checks: [Check] = [
        Check(
            what: "account without a wallet",
            sql: "SELECT a.id FROM accounts a LEFT JOIN wallets w ON w.account_id = a.id WHERE w.id IS NULL",
            takesAttemptLimit: false),
        Check(
            what: "wallet without its keys",
            sql: "SELECT id FROM wallets WHERE entropy_ciphertext IS NULL OR ethereum_address IS NULL",
            takesAttemptLimit: false),
        Check(
            what: "account without a contact or passkey",
            sql: """
                SELECT a.id FROM accounts a
                WHERE NOT EXISTS (SELECT 1 FROM contacts c WHERE c.account_id = a.id)
                  AND NOT EXISTS (SELECT 1 FROM passkey_credentials p WHERE p.account_id = a.id)
                """,
            takesAttemptLimit: false),
        Check(
            what: "device with more than one pending challenge",
            sql: """
                SELECT app_id || '/' || device_id FROM challenges WHERE state = 'pending'
                GROUP BY app_id, device_id HAVING COUNT(*) > 1
                """,
            takesAttemptLimit: false),
        Check(
            what: "pending challenge past its wrong-attempt limit",
            sql: "SELECT id FROM challenges WHERE state = 'pending' AND wrong_attempts >= $1",
            takesAttemptLimit: true),
        Check(
            what: "used login challenge whose contact has no account",
            sql: """
                SELECT ch.id FROM challenges ch
                WHERE ch.state = 'used' AND ch.purpose = 'login' AND NOT EXISTS (
                    SELECT 1 FROM contacts c
                    WHERE c.app_id = ch.app_id AND c.kind = ch.contact_kind AND c.value = ch.contact_value)
                """,
            takesAttemptLimit: false),
        Check(
            what: "account with more than one live session",
            sql: """
                SELECT account_id FROM sessions WHERE revoked_at IS NULL
                GROUP BY account_id HAVING COUNT(*) > 1
                """,
            takesAttemptLimit: false),
    ]

    /// The violations `db` holds, one readable line each (`"<what>: <id>"`).
    /// - Parameter maxWrongAttempts: the attempt count that locks a challenge.
    static func violations(_ db: some StoreConnection, maxWrongAttempts: Int) throws(RainError) -> [String] {
        var found: [String] = []
        for check in checks {
            let op = "check: \(check.what)"
            let parameters: [StoreValue] = check.takesAttemptLimit ? [.integer(Int64(maxWrongAttempts))] : []
            for row in try db.query(check.sql, values: parameters, operation: op) {
                found.append("\(check.what): \(try row.text(0, op))")
            }
        }
        return found
    }
}
