import Foundation
import RainCore

extension PostgresAuthorityStore {
    /// The invariants no race or crash may break, checked on the whole database: the same list as
    /// `SQLiteAuthorityStore.consistencyViolations` (PostgreSQL checks its own constraints and
    /// foreign keys on every write). Each violation is one readable line naming ids only.
    /// - Parameter maxWrongAttempts: the attempt count that locks a challenge.
    /// - Returns: the violations; empty when the database is consistent.
    package func consistencyViolations(maxWrongAttempts: Int = 3) async throws(RainError) -> [String] {
        try await perform { db throws(RainError) -> [String] in
            var found: [String] = []
            func ids(_ sql: String, _ what: String, _ parameters: [PostgresValue] = []) throws(RainError) {
                for row in try db.query(sql, parameters, operation: "check: \(what)") {
                    found.append("\(what): \(try row.text(0, "check: \(what)"))")
                }
            }
            try ids(
                "SELECT a.id FROM accounts a LEFT JOIN wallets w ON w.account_id = a.id WHERE w.id IS NULL",
                "account without a wallet")
            try ids(
                "SELECT id FROM wallets WHERE entropy_ciphertext IS NULL OR ethereum_address IS NULL",
                "wallet without its keys")
            try ids(
                """
                SELECT a.id FROM accounts a
                WHERE NOT EXISTS (SELECT 1 FROM contacts c WHERE c.account_id = a.id)
                  AND NOT EXISTS (SELECT 1 FROM passkey_credentials p WHERE p.account_id = a.id)
                """,
                "account without a contact or passkey")
            try ids(
                """
                SELECT app_id || '/' || device_id FROM challenges WHERE state = 'pending'
                GROUP BY app_id, device_id HAVING COUNT(*) > 1
                """,
                "device with more than one pending challenge")
            try ids(
                "SELECT id FROM challenges WHERE state = 'pending' AND wrong_attempts >= $1",
                "pending challenge past its wrong-attempt limit", [.integer(Int64(maxWrongAttempts))])
            try ids(
                """
                SELECT ch.id FROM challenges ch
                WHERE ch.state = 'used' AND ch.purpose = 'login' AND NOT EXISTS (
                    SELECT 1 FROM contacts c
                    WHERE c.app_id = ch.app_id AND c.kind = ch.contact_kind AND c.value = ch.contact_value)
                """,
                "used login challenge whose contact has no account")
            try ids(
                """
                SELECT account_id FROM sessions WHERE revoked_at IS NULL
                GROUP BY account_id HAVING COUNT(*) > 1
                """,
                "account with more than one live session")
            return found
        }
    }
}
