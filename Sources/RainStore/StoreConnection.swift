import FoundationEssentials
import RainCore

/// A value bound to a statement of either store. Each connection maps it to its own binding:
/// `bytes` is a SQLite BLOB or a PostgreSQL `bytea`; `boolean` is a SQLite INTEGER 0/1 or a
/// PostgreSQL `boolean`.
enum StoreValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case text(String)
    case bytes([UInt8])
    case boolean(Bool)
}

/// What the code both stores share (`ConnectionStore`, `StoreOperations`) needs from a connection: statements with
/// bound parameters, and the few places where SQLite and PostgreSQL differ (row order, row and
/// advisory locks).
///
/// Shared SQL is written with PostgreSQL's numbered placeholders (`$1` … `$n`, a number may
/// repeat); the SQLite connection turns them into SQLite's numbered `?1` … `?n`
/// (`StoreSQL.sqlitePlaceholders`). So no shared SQL may hold a `$` anywhere else, string
/// literals included. The text of a statement is the same on every call, so the SQLite statement
/// cache keeps working.
///
/// Everything runs on the connection's own queue, inside the transaction the store began (SQLite:
/// a savepoint of the group's `BEGIN IMMEDIATE` transaction, which holds the database's write
/// lock; PostgreSQL: READ COMMITTED, retried when it loses a race).
protocol StoreConnection: AnyObject {
    /// The connection's result row.
    associatedtype Row: StoreRow

    /// Runs one statement and returns its rows.
    func query(_ sql: String, values: [StoreValue], operation: String) throws(RainError) -> [Row]

    /// Runs one statement that returns no rows and returns the number of rows it changed.
    @discardableResult
    func execute(_ sql: String, values: [StoreValue], operation: String) throws(RainError) -> Int

    /// Runs `body` in one transaction of the store's kind (see above), rolling back when it throws.
    func transaction<T>(_ operation: String, _ body: () throws(RainError) -> T) throws(RainError) -> T

    /// The column that orders a table's rows by insertion, as a tie-break (`rowid`, `seq`).
    static var insertionOrder: String { get }

    /// What follows a column in an ascending `ORDER BY` to sort NULLs first (SQLite does so by
    /// default).
    static var nullsFirst: String { get }

    /// A condition that `column` equals the bytes parameter `placeholder`, NULL matching NULL.
    static func sameBytes(_ column: String, _ placeholder: String) -> String

    /// The clause that ends a `SELECT` to lock the rows it reads (of table `alias` only, when
    /// given) until the transaction ends; empty in SQLite, where the transaction already holds
    /// the write lock.
    static func lockRows(of alias: String?) -> String

    /// Takes a transaction-scoped lock named by `parts`; SQLite needs none (its transaction holds
    /// the write lock).
    func lock(_ parts: String...) throws(RainError)

    /// Locks the account's row until the transaction ends, so logins of one account run one at a
    /// time; SQLite needs no lock (its transaction holds the write lock).
    func lockAccount(_ accountID: String) throws(RainError)

    /// Retires the device's pending challenges of `purpose` and returns their ids.
    func retirePendingChallenges(appID: String, deviceID: String, purpose: String) throws(RainError) -> [String]
}

/// Placeholder translation for the shared SQL.
enum StoreSQL {
    /// `sql` with each `$N` placeholder turned into SQLite's numbered `?N` (same number, so a
    /// repeated `$N` binds the same value). A `$` not followed by a digit is left alone.
    static func sqlitePlaceholders(_ sql: String) -> String {
        var bytes = Array(sql.utf8)
        let digits = UInt8(ascii: "0")...UInt8(ascii: "9")
        for index in bytes.indices.dropLast() where bytes[index] == UInt8(ascii: "$") && digits.contains(bytes[index + 1]) {
            bytes[index] = UInt8(ascii: "?")
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
