import FoundationEssentials
import RainCore

extension SQLiteAuthorityStore {
    /// The invariants a crash must never break, checked on the whole database.
    /// Each violation is one readable line naming ids only (never hashes or contacts).
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
            let integrity = try db.query("PRAGMA integrity_check", operation: "check database integrity")
            let verdicts = try integrity.map { row throws(RainError) in try row.text(0, "read integrity_check") }
            if verdicts != ["ok"] { found.append("integrity_check: \(verdicts.joined(separator: "; "))") }
            let foreign = try db.query("PRAGMA foreign_key_check", operation: "check foreign keys")
            for row in foreign { found.append("foreign key broken in table \(try row.text(0, "read foreign_key_check"))") }
            found += try StoreInvariants.violations(db, maxWrongAttempts: maxWrongAttempts)
            return found
        }
    }
}
