internal import CSQLite
import FoundationEssentials
import RainCore

/// A value bound to, or read from, a SQLite statement.
enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// One result row, read by column index (the typed reads are `StoreRow`'s).
struct SQLiteRow: StoreRow, Sendable {
    var values: [SQLiteValue]
}

extension SQLiteValue: StoreColumnValue {
    /// Whether this is NULL.
    var isNull: Bool { self == .null }
    /// The text, if this is TEXT.
    var textValue: String? { if case .text(let s) = self { s } else { nil } }
    /// The integer, if this is an INTEGER.
    var integerValue: Int64? { if case .integer(let v) = self { v } else { nil } }
    /// The bytes, if this is a BLOB.
    var bytesValue: [UInt8]? { if case .blob(let b) = self { b } else { nil } }
    /// A yes/no column is an INTEGER 0/1.
    var flagValue: Bool? { integerValue.map { $0 != 0 } }
}

/// The one owner of a `sqlite3*` handle. Every call into SQLite goes through this class.
///
/// Not thread-safe: its owner uses it from one serial queue only. Statements are prepared with
/// `sqlite3_prepare_v2` and take bound parameters only. The first `statementCacheLimit` distinct
/// statements stay prepared (reset and unbound after each use, so no read transaction stays open);
/// any further one is finalized before the call returns.
/// Failures become RAIN_502 naming the operation, never a bound value; SQLite's own message goes
/// to `RainError.underlying` (debugging only).
final class SQLiteConnection {
    private let db: OpaquePointer
    /// Prepared statements by SQL text. The store's SQL is a fixed set of strings, so the cache is
    /// small; the limit only guards against a caller that builds SQL with varying text.
    private var statements: [String: OpaquePointer] = [:]
    /// `BEGIN`, `COMMIT`, `SAVEPOINT` and the like, prepared once (a fixed handful).
    private var controlStatements: [String: OpaquePointer] = [:]
    static let statementCacheLimit = 128
    /// The database file.
    let path: String

    /// `SQLITE_TRANSIENT`, a macro that does not import: SQLite copies bound values at once.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Opens (creating if needed, unless `createIfMissing` is false) the database at `path`.
    /// - Parameter busyTimeoutMilliseconds: how long a statement waits for another connection's lock.
    /// - Throws: RAIN_502 when the file cannot be opened.
    init(path: String, busyTimeoutMilliseconds: Int32 = 5000, createIfMissing: Bool = true) throws(RainError) {
        var handle: OpaquePointer?
        let flags =
            SQLITE_OPEN_READWRITE | (createIfMissing ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let detail = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            if let handle { sqlite3_close_v2(handle) }
            throw RainError(
                .internalError, "authority store: cannot open the database \(path) (SQLite result \(rc))",
                underlying: SQLiteFailure(detail))
        }
        self.db = handle
        self.path = path
        let timeoutRC = sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        guard timeoutRC == SQLITE_OK else { throw failure("set the busy timeout", timeoutRC) }
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        for statement in controlStatements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(db)
    }

    /// How many statements stay prepared (tests).
    var cachedStatementCount: Int { statements.count }

    /// Finalizes every cached statement: after one-off statements (migrations), so they do not
    /// hold places the hot statements need.
    func clearStatementCache() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
    }

    /// Runs one statement that returns no rows and returns the number of rows it changed.
    @discardableResult
    func execute(_ sql: String, _ parameters: [SQLiteValue] = [], operation: String) throws(RainError) -> Int {
        _ = try run(sql, parameters, operation: operation, collectRows: false)
        return Int(sqlite3_changes(db))
    }

    /// Runs one statement and returns its rows.
    func query(_ sql: String, _ parameters: [SQLiteValue] = [], operation: String) throws(RainError) -> [SQLiteRow] {
        try run(sql, parameters, operation: operation, collectRows: true)
    }

    /// Runs `body` inside `BEGIN IMMEDIATE` … `COMMIT`, rolling back when it throws; inside a
    /// transaction already open (a group commit's), inside a savepoint instead, so a failure rolls
    /// back `body`'s statements only and the enclosing transaction goes on.
    ///
    /// `BEGIN IMMEDIATE` takes the write lock up front, so two writers never both read and then
    /// fail to upgrade: the second one waits (busy timeout) instead.
    func transaction<T>(_ operation: String, _ body: () throws(RainError) -> T) throws(RainError) -> T {
        if isInTransaction { return try savepoint(operation, body) }
        return try transaction(begin: "BEGIN IMMEDIATE", operation, body)
    }

    /// Runs `body` inside `SAVEPOINT` … `RELEASE` of the open transaction; when it throws, its
    /// statements are rolled back (`ROLLBACK TO`) and the transaction stays open for the others.
    /// When the failure ended the whole transaction (SQLite does so on some I/O errors and a full
    /// disk), there is nothing left to roll back: `isInTransaction` is then false.
    func savepoint<T>(_ operation: String, _ body: () throws(RainError) -> T) throws(RainError) -> T {
        try control("SAVEPOINT rain_step", operation: "open a savepoint to \(operation)")
        let result: T
        do {
            result = try body()
        } catch {
            rollbackSavepoint()
            throw error
        }
        do {
            try control("RELEASE rain_step", operation: "release a savepoint to \(operation)")
        } catch {
            rollbackSavepoint()
            throw error
        }
        return result
    }

    /// Whether a transaction is open on this connection.
    var isInTransaction: Bool { sqlite3_get_autocommit(db) == 0 }

    /// How many statements that may write (`sqlite3_stmt_readonly` false: `INSERT`, `UPDATE`,
    /// `DELETE`, DDL, whether or not they changed a row) this connection has run: unchanged across
    /// a request means it only read.
    private(set) var writingStatementCount = 0

    /// `BEGIN IMMEDIATE`: opens a write transaction (the write lock, waiting up to the busy timeout).
    func beginImmediate(_ operation: String) throws(RainError) {
        try control("BEGIN IMMEDIATE", operation: "begin a transaction to \(operation)")
    }

    /// `COMMIT`: with `synchronous=FULL` it returns once the transaction is on disk.
    func commit(_ operation: String) throws(RainError) {
        try control("COMMIT", operation: "commit a transaction to \(operation)")
    }

    private func transaction<T>(begin: String, _ operation: String, _ body: () throws(RainError) -> T) throws(RainError) -> T {
        try control(begin, operation: "begin a transaction to \(operation)")
        let result: T
        do {
            result = try body()
        } catch {
            rollback()
            throw error
        }
        do {
            try commit(operation)
        } catch {
            rollback()
            throw error
        }
        return result
    }

    /// Rolls back the open transaction, if one is open.
    func rollback() {
        // Only reached after a failure that is already being thrown; a failed rollback leaves the
        // transaction open, which SQLite rolls back itself when the connection closes.
        if isInTransaction {
            _ = try? control("ROLLBACK", operation: "roll back a transaction")
        }
    }

    private func rollbackSavepoint() {
        // As `rollback`: only after a failure being thrown. `ROLLBACK TO` keeps the savepoint open,
        // so it is released too. Nothing to do when the failure already ended the transaction.
        guard isInTransaction else { return }
        _ = try? control("ROLLBACK TO rain_step", operation: "roll back a savepoint")
        _ = try? control("RELEASE rain_step", operation: "release a rolled-back savepoint")
    }

    /// Runs one transaction-control statement (no parameters, no rows). These few statements stay
    /// prepared apart from the store's own (`cachedStatementCount` counts the store's SQL only).
    private func control(_ sql: String, operation: String) throws(RainError) {
        let statement: OpaquePointer
        if let cached = controlStatements[sql] {
            statement = cached
        } else {
            var prepared: OpaquePointer?
            let prepareRC = sqlite3_prepare_v2(db, sql, -1, &prepared, nil)
            guard prepareRC == SQLITE_OK, let prepared else {
                if let prepared { sqlite3_finalize(prepared) }
                throw failure(operation, prepareRC)
            }
            statement = prepared
            controlStatements[sql] = prepared
        }
        defer { sqlite3_reset(statement) }
        let rc = sqlite3_step(statement)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw failure(operation, rc) }
    }

    /// Runs one statement of the shared SQL (`$N` placeholders, see `StoreConnection`) and returns
    /// its rows. The text is turned into SQLite's `?N` only when the statement is prepared, so a
    /// cached statement costs no translation.
    func query(sharedSQL sql: String, _ parameters: [SQLiteValue], operation: String) throws(RainError) -> [SQLiteRow] {
        try run(sql, parameters, operation: operation, collectRows: true, isSharedSQL: true)
    }

    /// Runs one statement of the shared SQL that returns no rows (see `query(sharedSQL:_:operation:)`)
    /// and returns the number of rows it changed.
    @discardableResult
    func execute(sharedSQL sql: String, _ parameters: [SQLiteValue], operation: String) throws(RainError) -> Int {
        _ = try run(sql, parameters, operation: operation, collectRows: false, isSharedSQL: true)
        return Int(sqlite3_changes(db))
    }

    /// Runs `sql` (shared SQL when `isSharedSQL`; its cache key is the text as given).
    private func run(
        _ sql: String, _ parameters: [SQLiteValue], operation: String, collectRows: Bool, isSharedSQL: Bool = false
    ) throws(RainError) -> [SQLiteRow] {
        let statement: OpaquePointer
        let isCached: Bool
        if let cached = statements[sql] {
            statement = cached
            isCached = true
        } else {
            var prepared: OpaquePointer?
            let text = isSharedSQL ? StoreSQL.sqlitePlaceholders(sql) : sql
            let prepareRC = sqlite3_prepare_v2(db, text, -1, &prepared, nil)
            guard prepareRC == SQLITE_OK, let prepared else {
                if let prepared { sqlite3_finalize(prepared) }
                throw failure(operation, prepareRC)
            }
            statement = prepared
            isCached = statements.count < Self.statementCacheLimit
            if isCached { statements[sql] = prepared }
        }
        defer {
            if isCached {
                // Ends the statement's read (its result code repeats the step's error, already thrown).
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            } else {
                sqlite3_finalize(statement)
            }
        }

        for (offset, value) in parameters.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null:
                rc = sqlite3_bind_null(statement, index)
            case .integer(let v):
                rc = sqlite3_bind_int64(statement, index, v)
            case .real(let v):
                rc = sqlite3_bind_double(statement, index, v)
            case .text(let s):
                let length = Int32(clamping: s.utf8.count)
                rc = s.withCString { sqlite3_bind_text(statement, index, $0, length, Self.transient) }
            case .blob(let bytes):
                if bytes.isEmpty {
                    // An empty buffer may have no base address, which would bind NULL.
                    rc = sqlite3_bind_zeroblob(statement, index, 0)
                } else {
                    rc = bytes.withUnsafeBytes {
                        sqlite3_bind_blob(statement, index, $0.baseAddress, Int32(clamping: $0.count), Self.transient)
                    }
                }
            }
            guard rc == SQLITE_OK else { throw failure("\(operation) (bind parameter \(index))", rc) }
        }

        if sqlite3_stmt_readonly(statement) == 0 { writingStatementCount += 1 }
        var rows: [SQLiteRow] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw failure(operation, rc) }
            if collectRows { rows.append(readRow(statement)) }
        }
        return rows
    }

    private func readRow(_ statement: OpaquePointer) -> SQLiteRow {
        let count = sqlite3_column_count(statement)
        var values: [SQLiteValue] = []
        values.reserveCapacity(Int(count))
        for column in 0..<count {
            switch sqlite3_column_type(statement, column) {
            case SQLITE_INTEGER:
                values.append(.integer(sqlite3_column_int64(statement, column)))
            case SQLITE_TEXT:
                // Pointer first, then length, as SQLite's documentation asks.
                let pointer = sqlite3_column_text(statement, column)
                let length = Int(sqlite3_column_bytes(statement, column))
                if let pointer {
                    values.append(
                        .text(String(decoding: UnsafeBufferPointer(start: pointer, count: length), as: UTF8.self)))
                } else {
                    values.append(.text(""))
                }
            case SQLITE_BLOB:
                let pointer = sqlite3_column_blob(statement, column)
                let length = Int(sqlite3_column_bytes(statement, column))
                if let pointer, length > 0 {
                    values.append(.blob(Array(UnsafeRawBufferPointer(start: pointer, count: length))))
                } else {
                    values.append(.blob([]))
                }
            case SQLITE_FLOAT:
                values.append(.real(sqlite3_column_double(statement, column)))
            default:
                values.append(.null)
            }
        }
        return SQLiteRow(values: values)
    }

    /// RAIN_502 naming the operation and SQLite's result code; the connection's message (which can
    /// name tables and columns, never bound values) is kept as the underlying cause only.
    private func failure(_ operation: String, _ rc: Int32) -> RainError {
        let detail = String(cString: sqlite3_errmsg(db))
        let codeName = String(cString: sqlite3_errstr(rc))
        let primary = rc & 0xff
        if primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT {
            return RainError(
                .internalError,
                "authority store: cannot \(operation): \(path) is damaged or is not a SQLite database "
                    + "(\(codeName), SQLite result \(rc)); stop the daemon and restore the file from a backup "
                    + "(moving it aside starts an empty store: every account and wallet in it would be lost)",
                underlying: SQLiteFailure(detail))
        }
        return RainError(
            .internalError, "authority store: cannot \(operation): \(codeName) (SQLite result \(rc))",
            underlying: SQLiteFailure(detail))
    }
}

/// SQLite's own message, kept as a debugging cause.
struct SQLiteFailure: Error, Sendable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
