internal import CPostgres
import FoundationEssentials
import Glibc
import RainCore

/// A value bound to, or read from, a PostgreSQL statement (binary format both ways).
enum PostgresValue: Sendable, Equatable {
    case null
    /// `bigint` (int8); `integer` and `smallint` results read as this too.
    case integer(Int64)
    /// `text`.
    case text(String)
    /// `bytea`.
    case bytes([UInt8])
    /// `boolean`.
    case boolean(Bool)

    /// The parameter type sent with `PQprepare`; 0 lets the server infer it (NULL).
    fileprivate var typeOID: Oid {
        switch self {
        case .null: return 0
        case .integer: return 20
        case .text: return 25
        case .bytes: return 17
        case .boolean: return 16
        }
    }
}

/// One result row, read by column index (the typed reads are `StoreRow`'s).
struct PostgresRow: StoreRow, Sendable {
    var values: [PostgresValue]
}

extension PostgresValue: StoreColumnValue {
    /// Whether this is NULL.
    var isNull: Bool { self == .null }
    /// The text, if this is `text`.
    var textValue: String? { if case .text(let s) = self { s } else { nil } }
    /// The integer, if this is an integer type.
    var integerValue: Int64? { if case .integer(let v) = self { v } else { nil } }
    /// The bytes, if this is `bytea`.
    var bytesValue: [UInt8]? { if case .bytes(let b) = self { b } else { nil } }
    /// A yes/no column is a `boolean`.
    var flagValue: Bool? { if case .boolean(let b) = self { b } else { nil } }
}

/// What PostgreSQL said about a failure, kept as a debugging cause: the SQLSTATE and the primary
/// message (never the DETAIL line, which can quote row values).
struct PostgresFailure: Error, Sendable, CustomStringConvertible {
    /// The five-character SQLSTATE, when the server sent one.
    var sqlState: String?
    var description: String

    /// A serialization failure, a deadlock or a unique violation: the transaction lost a race and
    /// running it again sees the winner's rows.
    var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" || sqlState == "23505" }
}

/// The one owner of a `PGconn*`. Every call into libpq goes through this class.
///
/// Not thread-safe: its pool uses it from one serial queue only. Statements are prepared once per
/// connection (`PQprepare`, named by a counter) and run with binary parameters
/// (`PQexecPrepared`); no value is ever part of the SQL text. Failures become RAIN_502 naming the
/// operation and the SQLSTATE; the server's message goes to `RainError.underlying` only.
final class PostgresConnection {
    fileprivate var connection: OpaquePointer
    /// `host:port/database`, for messages (never the password).
    let target: String
    /// SQL text (and parameter types) → prepared statement name, for this session.
    private var prepared: [String: String] = [:]

    /// Connects to `url` (a `postgres://` or `postgresql://` URI). What the URL leaves out, libpq
    /// takes from the standard environment (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`,
    /// `PGDATABASE`, `PGSSLMODE`, `PGSERVICE`, …) and the password from `PGPASSFILE` (`~/.pgpass`).
    /// - Throws: RAIN_102 when the URL is malformed; RAIN_502 when the server cannot be reached or
    ///   refuses the login.
    init(url: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(RainError) {
        let target = try Self.describe(url: url, environment: environment)
        // Our defaults come first so a value in the URL overrides them (expand_dbname); they are
        // left out when the environment sets them, since a keyword given here would override it.
        var keywords: [String] = []
        var values: [String] = []
        if environment["PGCONNECT_TIMEOUT", default: ""].isEmpty {
            keywords.append("connect_timeout")
            values.append("10")
        }
        if environment["PGAPPNAME", default: ""].isEmpty {
            keywords.append("application_name")
            values.append("rainwalletd-authority")
        }
        keywords.append("dbname")
        values.append(url)
        let handle: OpaquePointer? = withCStrings(keywords) { k in
            withCStrings(values) { v in rain_PQconnectdbParams(k, v, 1) }
        }
        guard let handle else {
            throw RainError(.internalError, "authority store: cannot allocate a PostgreSQL connection")
        }
        guard rain_PQstatus(handle) == CONNECTION_OK else {
            let detail = Self.firstLine(rain_PQerrorMessage(handle), hiding: url)
            rain_PQfinish(handle)
            throw RainError(
                .internalError,
                "authority store: cannot connect to PostgreSQL at \(target): \(detail); check that the server is "
                    + "running and that the URL, user and database are right",
                underlying: PostgresFailure(sqlState: nil, description: detail))
        }
        self.connection = handle
        self.target = target
        try configureSession()
    }

    /// Per-session settings: a transaction that waits for a lock longer than 15 s fails (RAIN_502)
    /// instead of hanging; notices (`CREATE TABLE IF NOT EXISTS` … skipping) stay off stderr.
    private func configureSession() throws(RainError) {
        try execute("SET lock_timeout = '15s'", operation: "set the lock timeout")
        try execute("SET client_min_messages = warning", operation: "quiet the server's notices")
    }

    deinit {
        rain_PQfinish(connection)
    }

    /// Loads libpq the first time a PostgreSQL store is used (never for SQLite).
    /// - Throws: RAIN_502 when libpq.so.5 cannot be loaded.
    static func loadLibPQ() throws(RainError) {
        guard let failure = rain_pq_load() else { return }
        throw RainError(
            .internalError,
            "authority store: cannot load the PostgreSQL client library (\(String(cString: failure))); "
                + "install it (apt-get install libpq5) or use the SQLite store")
    }

    /// `user@host:port/database` from a URL, validated by libpq's own parser; what the URL leaves
    /// out comes from the environment libpq reads (`PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`).
    /// Never the password.
    /// - Throws: RAIN_102 when libpq cannot parse it or it is not a `postgres://` URL.
    static func describe(url: String, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(RainError) -> String
    {
        let parts = try target(url: url, environment: environment)
        return "\(parts.user.map { "\($0)@" } ?? "")\(parts.database)"
    }

    /// `postgres://host:port/database` from a URL (see `describe`): which database it names,
    /// whoever connects to it. Never the user or the password.
    /// - Throws: RAIN_102 when libpq cannot parse it or it is not a `postgres://` URL.
    static func databaseIdentity(
        url: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(RainError) -> String {
        "postgres://\(try target(url: url, environment: environment).database)"
    }

    /// The user, and `host:port/database`, a URL names (see `describe`).
    private static func target(url: String, environment: [String: String]) throws(RainError)
        -> (user: String?, database: String)
    {
        guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else {
            throw RainError.invalid(
                "the store URL must look like postgres://USER@HOST:PORT/DATABASE", field: "--store")
        }
        try loadLibPQ()
        var error: UnsafeMutablePointer<CChar>?
        guard let options = rain_PQconninfoParse(url, &error) else {
            let detail = error.map { firstLine($0, hiding: url) } ?? "malformed"
            if let error { rain_PQfreemem(error) }
            throw RainError.invalid(
                "the store URL is not a valid PostgreSQL URL (\(detail)); use postgres://USER@HOST:PORT/DATABASE",
                field: "--store")
        }
        defer { rain_PQconninfoFree(options) }
        var fields: [String: String] = [:]
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if let value = cursor.pointee.val { fields[String(cString: keyword)] = String(cString: value) }
            cursor += 1
        }
        func value(_ keyword: String, _ variable: String) -> String? {
            if let v = fields[keyword], !v.isEmpty { return v }
            if let v = environment[variable], !v.isEmpty { return v }
            return nil
        }
        try checkSettings(fields, environment: environment)
        let userName = value("user", "PGUSER")
        // Without a host libpq uses its Unix socket directory.
        let host = value("host", "PGHOST") ?? value("hostaddr", "PGHOSTADDR") ?? "local socket"
        let port = value("port", "PGPORT") ?? "5432"
        let database = value("dbname", "PGDATABASE") ?? userName ?? ""
        return (userName, "\(host):\(port)/\(database)")
    }

    /// The libpq settings that decide how to connect and that libpq itself only rejects when it
    /// connects (as "could not connect", which reads like a server that is down): the port (each
    /// of a comma-separated list) and `sslmode`, from the URL or from `PGPORT` / `PGSSLMODE`.
    /// - Throws: RAIN_102 (field `--store`) naming the setting, where it came from and what it takes.
    static func checkSettings(_ fields: [String: String], environment: [String: String]) throws(RainError) {
        func source(_ keyword: String, _ variable: String) -> (value: String, origin: String)? {
            if let v = fields[keyword], !v.isEmpty { return (v, "the store URL's \(keyword)") }
            if let v = environment[variable], !v.isEmpty { return (v, variable) }
            return nil
        }
        if let (ports, origin) = source("port", "PGPORT") {
            for port in ports.split(separator: ",", omittingEmptySubsequences: false) {
                guard let n = Int(port), (1...65535).contains(n) else {
                    throw RainError.invalid(
                        "\(origin) \"\(port)\" is not a port number: use 1 to 65535 (PostgreSQL's is 5432)", field: "--store")
                }
            }
        }
        let sslModes = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]
        if let (mode, origin) = source("sslmode", "PGSSLMODE"), !sslModes.contains(mode) {
            throw RainError.invalid(
                "\(origin) \"\(mode)\" is not an SSL mode: use one of \(sslModes.joined(separator: ", "))", field: "--store")
        }
    }

    /// Runs one statement that returns no rows and returns the number of rows it changed.
    @discardableResult
    func execute(_ sql: String, _ parameters: [PostgresValue] = [], operation: String) throws(RainError) -> Int {
        try run(sql, parameters, operation: operation).changed
    }

    /// Runs one statement that takes no parameters and cannot be prepared (`CREATE DATABASE`).
    func executeSimple(_ sql: String, operation: String) throws(RainError) {
        try ensureConnected()
        let result = rain_PQexec(connection, sql)
        defer { rain_PQclear(result) }
        try check(result, operation, expected: PGRES_COMMAND_OK)
    }

    /// Runs one statement and returns its rows.
    func query(_ sql: String, _ parameters: [PostgresValue] = [], operation: String) throws(RainError)
        -> [PostgresRow]
    {
        try run(sql, parameters, operation: operation).rows
    }

    /// Runs `body` inside `BEGIN` … `COMMIT` (READ COMMITTED; callers take the row and advisory
    /// locks they need), rolling back when it throws. A transaction that loses a race (a
    /// serialization failure, a deadlock, a unique violation) runs again, up to `attempts` times.
    func transaction<T>(_ operation: String, attempts: Int, _ body: () throws(RainError) -> T) throws(RainError)
        -> T
    {
        var attempt = 1
        while true {
            do {
                return try transactionOnce(operation, body)
            } catch {
                guard attempt < attempts, let failure = error.underlying as? PostgresFailure, failure.isRetryable
                else { throw error }
                // A short, growing, jittered pause (on this connection's queue, never the
                // concurrency pool) so the racers do not collide again in lockstep.
                usleep(UInt32.random(in: 1_000...5_000) * UInt32(attempt))
                attempt += 1
            }
        }
    }

    private func transactionOnce<T>(_ operation: String, _ body: () throws(RainError) -> T) throws(RainError) -> T {
        try execute("BEGIN", operation: "begin a transaction to \(operation)")
        let result: T
        do {
            result = try body()
            try execute("COMMIT", operation: "commit a transaction to \(operation)")
        } catch {
            rollback()
            throw error
        }
        return result
    }

    private func rollback() {
        // Only reached after a failure that is already being thrown. A connection that broke has
        // no transaction left; it is reset at its next use.
        if rain_PQtransactionStatus(connection) != PQTRANS_IDLE {
            _ = try? execute("ROLLBACK", operation: "roll back a transaction")
        }
    }

    /// Reconnects when the connection broke (the server restarted, the network dropped).
    private func ensureConnected() throws(RainError) {
        guard rain_PQstatus(connection) != CONNECTION_OK else { return }
        prepared.removeAll()
        rain_PQreset(connection)
        guard rain_PQstatus(connection) == CONNECTION_OK else {
            throw RainError(
                .internalError, "authority store: lost the connection to PostgreSQL at \(target) and cannot reconnect")
        }
        try configureSession()
    }

    private func run(_ sql: String, _ parameters: [PostgresValue], operation: String) throws(RainError)
        -> (rows: [PostgresRow], changed: Int)
    {
        try ensureConnected()
        let types = parameters.map(\.typeOID)
        let key = types.map(String.init).joined(separator: ",") + "|" + sql
        let name: String
        if let existing = prepared[key] {
            name = existing
        } else {
            name = "rain_\(prepared.count + 1)"
            let result = rain_PQprepare(connection, name, sql, Int32(types.count), types.isEmpty ? nil : types)
            defer { rain_PQclear(result) }
            try check(result, operation, expected: PGRES_COMMAND_OK)
            prepared[key] = name
        }

        // All parameter bytes in one buffer (plus a pad byte, so an empty value has an address).
        var buffer: [UInt8] = []
        var offsets: [Int] = []
        var lengths: [Int32] = []
        for value in parameters {
            offsets.append(buffer.count)
            switch value {
            case .null: break
            case .integer(let v): withUnsafeBytes(of: v.bigEndian) { buffer.append(contentsOf: $0) }
            case .text(let s): buffer.append(contentsOf: Array(s.utf8))
            case .bytes(let b): buffer.append(contentsOf: b)
            case .boolean(let b): buffer.append(b ? 1 : 0)
            }
            lengths.append(Int32(clamping: buffer.count - (offsets.last ?? 0)))
        }
        buffer.append(0)
        let formats = [Int32](repeating: 1, count: parameters.count)
        let result: OpaquePointer? = buffer.withUnsafeBufferPointer { raw in
            let base = UnsafeRawPointer(raw.baseAddress)
            let pointers: [UnsafePointer<CChar>?] = parameters.enumerated().map { index, value in
                if case .null = value { return nil }
                return base.map { ($0 + offsets[index]).assumingMemoryBound(to: CChar.self) }
            }
            return rain_PQexecPrepared(
                connection, name, Int32(parameters.count), pointers.isEmpty ? nil : pointers,
                lengths.isEmpty ? nil : lengths, formats.isEmpty ? nil : formats, 1)
        }
        defer { rain_PQclear(result) }
        guard let result else { throw failure(operation, nil) }
        switch rain_PQresultStatus(result) {
        case PGRES_COMMAND_OK:
            let changed = Int(String(cString: rain_PQcmdTuples(result))) ?? 0
            return ([], changed)
        case PGRES_TUPLES_OK:
            return (try readRows(result, operation), Int(rain_PQntuples(result)))
        default:
            throw failure(operation, result)
        }
    }

    private func readRows(_ result: OpaquePointer, _ operation: String) throws(RainError) -> [PostgresRow] {
        let rowCount = rain_PQntuples(result)
        let columnCount = rain_PQnfields(result)
        var rows: [PostgresRow] = []
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            var values: [PostgresValue] = []
            values.reserveCapacity(Int(columnCount))
            for column in 0..<columnCount {
                if rain_PQgetisnull(result, row, column) != 0 {
                    values.append(.null)
                    continue
                }
                let length = Int(rain_PQgetlength(result, row, column))
                let bytes: [UInt8]
                if let pointer = rain_PQgetvalue(result, row, column), length > 0 {
                    bytes = Array(UnsafeRawBufferPointer(start: pointer, count: length))
                } else {
                    bytes = []
                }
                switch rain_PQftype(result, column) {
                case 20, 23, 21:  // int8, int4, int2: big-endian two's complement
                    guard bytes.count == 8 || bytes.count == 4 || bytes.count == 2 else {
                        throw StoreRecords.typeError(operation, column: Int(column))
                    }
                    var v: Int64 = bytes.first.map { $0 & 0x80 != 0 ? -1 : 0 } ?? 0
                    for byte in bytes { v = (v << 8) | Int64(byte) }
                    values.append(.integer(v))
                case 25, 1043, 19:  // text, varchar, name
                    values.append(.text(String(decoding: bytes, as: UTF8.self)))
                case 17:  // bytea
                    values.append(.bytes(bytes))
                case 16:  // bool
                    values.append(.boolean(bytes.first == 1))
                case 2278:  // void (pg_advisory_xact_lock)
                    values.append(.null)
                default:
                    throw StoreRecords.typeError(operation, column: Int(column))
                }
            }
            rows.append(PostgresRow(values: values))
        }
        return rows
    }

    private func check(_ result: OpaquePointer?, _ operation: String, expected: ExecStatusType) throws(RainError) {
        guard let result, rain_PQresultStatus(result) == expected else { throw failure(operation, result) }
    }

    /// RAIN_502 naming the operation and the SQLSTATE; the server's primary message (which names
    /// tables and constraints, never bound values) is kept as the underlying cause only.
    fileprivate func failure(_ operation: String, _ result: OpaquePointer?) -> RainError {
        let sqlState = result.flatMap { rain_PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) }
        let primary =
            result.flatMap { rain_PQresultErrorField($0, Int32(UInt8(ascii: "M"))) }.map { String(cString: $0) }
            ?? Self.firstLine(rain_PQerrorMessage(connection), hiding: nil)
        let state = sqlState.map { "SQLSTATE \($0)" } ?? "no result"
        return RainError(
            .internalError, "authority store: cannot \(operation): PostgreSQL \(state) at \(target)",
            underlying: PostgresFailure(sqlState: sqlState, description: primary))
    }

    /// The first line of a libpq message, with the URL (which may hold a password) cut out.
    private static func firstLine(_ message: UnsafePointer<CChar>?, hiding url: String?) -> String {
        guard let message else { return "unknown error" }
        var line = String(cString: message).split(separator: "\n").first.map(String.init) ?? "unknown error"
        if let url, !url.isEmpty { line = line.replacing(url, with: "<url>") }
        return line.trimmingWhitespace()
    }
}

extension PostgresConnection {
    /// The connection's socket, for `poll` while it LISTENs; -1 when it is closed.
    var socketDescriptor: Int32 { rain_PQsocket(connection) }

    /// Reads what the server sent and takes the notifications received (`LISTEN`): each one's
    /// channel and payload.
    /// - Throws: RAIN_502 when the connection broke.
    func takeNotifications(operation: String) throws(RainError) -> [(channel: String, payload: String)] {
        guard rain_PQconsumeInput(connection) == 1 else { throw failure(operation, nil) }
        var out: [(channel: String, payload: String)] = []
        while let notify = rain_PQnotifies(connection) {
            defer { rain_PQfreemem(notify) }
            out.append((String(cString: notify.pointee.relname), String(cString: notify.pointee.extra)))
        }
        return out
    }
}

/// Calls `body` with a NULL-terminated array of C strings that live until it returns.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { $0.map { UnsafePointer($0) } } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
}
