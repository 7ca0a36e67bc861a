import Foundation
import RainCore

extension SQLiteAuthorityStore {
    /// The invariants a crash must never break, checked on the whole database (issue 6, crash
    /// safety). Each violation is one readable line naming ids only (never hashes or contacts).
    ///
    /// - SQLite's own `integrity_check` and `foreign_key_check` pass.
    /// - Every account has a wallet, and that wallet has its encrypted keys.
    /// - Every account can log in: it has a contact or a passkey credential.
    /// - A device has at most one pending challenge per app (a resend retires the previous one).
    /// - A pending challenge never carries the wrong attempts that lock it.
    /// - A used login challenge's contact belongs to an account (the login it completed exists).
    /// - An account has at most one unrevoked session (a login revokes every other one).
    /// - Parameters:
    ///   - maxWrongAttempts: the attempt count that locks a challenge.
    /// - Returns: the violations; empty when the database is consistent.
    package func consistencyViolations(maxWrongAttempts: Int = 3) async throws(RainError) -> [String] {
        try await perform { db throws(RainError) -> [String] in
            var found: [String] = []
            func ids(_ sql: String, _ what: String, _ parameters: [SQLiteValue] = []) throws(RainError) {
                let rows = try db.query(sql, parameters, operation: "check: \(what)")
                for row in rows { found.append("\(what): \(try row.text(0, "check: \(what)"))") }
            }
            let integrity = try db.query("PRAGMA integrity_check", operation: "check database integrity")
            let verdicts = try integrity.map { row throws(RainError) in try row.text(0, "read integrity_check") }
            if verdicts != ["ok"] { found.append("integrity_check: \(verdicts.joined(separator: "; "))") }
            let foreign = try db.query("PRAGMA foreign_key_check", operation: "check foreign keys")
            for row in foreign { found.append("foreign key broken in table \(try row.text(0, "read foreign_key_check"))") }
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
                "SELECT id FROM challenges WHERE state = 'pending' AND wrong_attempts >= ?",
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
