import FoundationEssentials
import RainCore

extension PostgresAuthorityStore {
    /// The invariants no race or crash may break, checked on the whole database: the same list as
    /// `SQLiteAuthorityStore.consistencyViolations` (PostgreSQL checks its own constraints and
    /// foreign keys on every write). Each violation is one readable line naming ids only.
    /// - Parameter maxWrongAttempts: the attempt count that locks a challenge.
    /// - Returns: the violations; empty when the database is consistent.
    package func consistencyViolations(maxWrongAttempts: Int = 3) async throws(RainError) -> [String] {
        try await perform { db throws(RainError) -> [String] in
            try StoreInvariants.violations(db, maxWrongAttempts: maxWrongAttempts)
        }
    }
}
