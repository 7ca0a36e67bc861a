import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

/// An `AuthorityStore` whose use cases run on one of its connections: each is written once, for
/// `SQLiteAuthorityStore` and `PostgresAuthorityStore`, in the `ConnectionStore+…` extensions, and
/// the pieces several of them share are `StoreOperations`. A store supplies `perform` (where its
/// connections run) and keeps what really differs (opening, migrations, `schemaVersion`, `close`).
///
/// An atomic use case runs in one `Connection.transaction`: in SQLite a savepoint of the `BEGIN
/// IMMEDIATE` transaction its group of requests shares (`SQLiteGroupCommitWriter`), whose write lock
/// serializes it against every other writer; in PostgreSQL a READ
/// COMMITTED transaction that takes the row and advisory locks the connection's hooks take
/// (see `PostgresAuthorityStore`) and runs again when it loses a race.
protocol ConnectionStore: AuthorityStore {
    /// The store's connection.
    associatedtype Connection: StoreConnection

    /// Runs `body` with a connection on that connection's queue.
    func perform<T: Sendable>(_ body: @escaping @Sendable (Connection) throws(RainError) -> T) async throws(RainError)
        -> T
}
