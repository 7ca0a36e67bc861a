import Dispatch
import FoundationEssentials
import Glibc
import RainCore
import Synchronization

/// The shared authority store: one PostgreSQL database that several `rainwalletd authority`
/// processes use at once (`--store postgres://USER@HOST:PORT/DATABASE`).
///
/// Semantics are those of `SQLiteAuthorityStore`; what SQLite gets from its single writer, this
/// store gets from row locks and transaction-scoped advisory locks taken inside each use case's
/// transaction (READ COMMITTED), so the rules hold across processes:
/// - code attempts: single conditional `UPDATE`s on the challenge row (the row lock serializes
///   them; a 4th wrong guess finds the challenge locked);
/// - refresh rotation: `SELECT … FOR UPDATE` on the session row, so a second refresh of the same
///   token waits and then sees the rotation (grace repeat or reuse);
/// - logins: the account row is locked before its sessions are revoked, so one device at a time
///   holds a live session;
/// - account creation: an advisory lock per contact serializes its logins, and the primary key on
///   `(app_id, kind, value)` of `contacts` backs it up: the loser of a race gets a unique
///   violation and runs its transaction again, finding the winner's account;
/// - the active-code limit: an advisory lock per device, contact and account key;
/// - the hourly SMS budget: one advisory lock for the whole budget, held from the count
///   to the insert, so the instances together never exceed it.
/// Serialization failures, deadlocks and unique violations run the transaction again (5 times at
/// most). Timestamps are `bigint` Unix milliseconds, as in SQLite, so `Date`s round-trip alike.
/// Schema migrations are numbered, recorded in `schema_version` and run under an advisory lock,
/// so two instances starting together never both migrate.
package final class PostgresAuthorityStore: ConnectionStore {
    let pool: PostgresConnectionPool
    /// The schema versions found at open (`SchemaCompatibility`).
    package let schemaCompatibility: SchemaCompatibility?

    /// `user@host:port/database` (never the password).
    package var target: String { pool.target }

    /// The newest schema version this build knows.
    package static var latestSchemaVersion: Int { migrations.last?.version ?? 0 }

    private init(pool: PostgresConnectionPool, schema: SchemaCompatibility) {
        self.pool = pool
        self.schemaCompatibility = schema
    }

    /// Connects `connections` sessions to `url` and migrates the schema to the latest version.
    /// - Parameter url: `postgres://USER[:PASSWORD]@HOST:PORT/DATABASE` (libpq's URI form).
    /// - Throws: RAIN_102 when the URL is malformed, or (`schema_too_new`) when a newer build migrated
    ///   the database past what this one may share (`SchemaCompatibility`); RAIN_502 when the server
    ///   cannot be reached or the migration fails.
    package static func open(url: String, connections: Int = 4) async throws(RainError) -> PostgresAuthorityStore {
        _ = try PostgresConnection.describe(url: url)
        let (pool, schema) = try await DispatchQueue(label: "rain.authority.postgres.open").runBlocking {
            () throws(RainError) -> (PostgresConnectionPool, SchemaCompatibility) in
            var opened: [PostgresConnection] = []
            var schema: SchemaCompatibility?
            for index in 0..<max(1, connections) {
                let connection = try PostgresConnection(url: url)
                if index == 0 { schema = try migrate(connection) }
                opened.append(connection)
            }
            guard let schema else { throw RainError(.internalError, "authority store: the schema was not read") }
            // Each connection is handed to its own queue here and used only there from now on.
            return (PostgresConnectionPool(connections: opened), schema)
        }
        return PostgresAuthorityStore(pool: pool, schema: schema)
    }

    // MARK: - Migrations

    struct Migration {
        var version: Int
        var statements: [String]
        /// The oldest schema version a build must know to share the store once this migration is
        /// applied (`SchemaCompatibility`). By default the migration's own: an older build would
        /// not understand it. A migration older builds can live beside (a new table or a column
        /// with a default, which they never touch) names the previous migration's value instead.
        var readableFrom: Int

        init(version: Int, statements: [String], readableFrom: Int? = nil) {
            self.version = version
            self.statements = statements
            self.readableFrom = readableFrom ?? version
        }
    }

    /// Numbered migrations, applied in order, each exactly once. Those before the reader record
    /// keep their own version as `readableFrom`: the builds of their time refused any newer schema.
    /// Never edit a released one: add
    /// the next number. Version 1 is the schema of SQLite version 6, with `seq`
    /// identity columns standing in for SQLite's rowid order.
    static let migrations: [Migration] = [
        Migration(
            version: 1,
            statements: [
                "CREATE TABLE accounts (id TEXT PRIMARY KEY, app_id TEXT NOT NULL, created_at BIGINT NOT NULL)",
                """
                CREATE TABLE contacts (
                    app_id TEXT NOT NULL,
                    kind TEXT NOT NULL CHECK (kind IN ('email', 'phone')),
                    value TEXT NOT NULL,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    verified_at BIGINT,
                    seq BIGINT GENERATED ALWAYS AS IDENTITY,
                    PRIMARY KEY (app_id, kind, value)
                )
                """,
                "CREATE INDEX contacts_account ON contacts(account_id)",
                """
                CREATE TABLE wallets (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL UNIQUE REFERENCES accounts(id),
                    created_at BIGINT NOT NULL,
                    entropy_ciphertext BYTEA,
                    entropy_key_id TEXT,
                    ethereum_address TEXT,
                    solana_address TEXT,
                    seq BIGINT GENERATED ALWAYS AS IDENTITY
                )
                """,
                """
                CREATE TABLE challenges (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    contact_kind TEXT NOT NULL CHECK (contact_kind IN ('email', 'phone')),
                    contact_value TEXT NOT NULL,
                    account_key TEXT NOT NULL,
                    code_hash BYTEA NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    wrong_attempts BIGINT NOT NULL DEFAULT 0,
                    state TEXT NOT NULL CHECK (state IN ('pending', 'used', 'retired', 'locked')),
                    purpose TEXT NOT NULL DEFAULT 'login' CHECK (purpose IN ('login', 'verify_contact')),
                    target_account_id TEXT REFERENCES accounts(id),
                    seq BIGINT GENERATED ALWAYS AS IDENTITY
                )
                """,
                "CREATE INDEX challenges_device ON challenges(app_id, device_id, state)",
                "CREATE INDEX challenges_account ON challenges(app_id, account_key, state)",
                "CREATE INDEX challenges_contact_sent ON challenges(app_id, contact_kind, contact_value, created_at)",
                "CREATE INDEX challenges_account_sent ON challenges(app_id, account_key, created_at)",
                "CREATE INDEX challenges_expiry ON challenges(expires_at)",
                """
                CREATE TABLE sessions (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    device_id TEXT NOT NULL,
                    access_hash BYTEA NOT NULL UNIQUE,
                    refresh_hash BYTEA NOT NULL UNIQUE,
                    access_expires_at BIGINT NOT NULL,
                    created_at BIGINT NOT NULL,
                    revoked_at BIGINT,
                    revoke_reason TEXT,
                    device_public_key BYTEA,
                    previous_refresh_hash BYTEA,
                    rotated_at BIGINT,
                    refresh_generation BIGINT NOT NULL DEFAULT 0,
                    seq BIGINT GENERATED ALWAYS AS IDENTITY
                )
                """,
                "CREATE INDEX sessions_account ON sessions(account_id, revoked_at)",
                "CREATE INDEX sessions_previous_refresh ON sessions(previous_refresh_hash)",
                "CREATE INDEX sessions_revoked ON sessions(revoked_at)",
                """
                CREATE TABLE retired_refresh_tokens (
                    refresh_hash BYTEA PRIMARY KEY,
                    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                    generation BIGINT NOT NULL,
                    retired_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX retired_refresh_tokens_session ON retired_refresh_tokens(session_id)",
                "CREATE INDEX retired_refresh_tokens_age ON retired_refresh_tokens(retired_at)",
                """
                CREATE TABLE passkey_ceremonies (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    kind TEXT NOT NULL CHECK (kind IN ('sign_up', 'add', 'login')),
                    rp_id TEXT NOT NULL,
                    origins TEXT NOT NULL,
                    challenge BYTEA NOT NULL,
                    user_handle BYTEA,
                    account_id TEXT REFERENCES accounts(id),
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('pending', 'used'))
                )
                """,
                "CREATE INDEX passkey_ceremonies_expiry ON passkey_ceremonies(expires_at)",
                """
                CREATE TABLE passkey_credentials (
                    credential_id BYTEA PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    app_id TEXT NOT NULL,
                    rp_id TEXT NOT NULL,
                    public_key BYTEA NOT NULL,
                    algorithm BIGINT NOT NULL,
                    sign_count BIGINT NOT NULL,
                    backup_eligible BOOLEAN NOT NULL,
                    backed_up BOOLEAN NOT NULL,
                    user_handle BYTEA NOT NULL,
                    created_at BIGINT NOT NULL,
                    last_used_at BIGINT,
                    seq BIGINT GENERATED ALWAYS AS IDENTITY
                )
                """,
                "CREATE INDEX passkey_credentials_account ON passkey_credentials(account_id)",
            ]),
        // Send limits across apps: SQLite's version 7.
        Migration(
            version: 2,
            statements: [
                "ALTER TABLE challenges ADD COLUMN source TEXT",
                "CREATE INDEX challenges_contact_all_apps_sent ON challenges(contact_kind, contact_value, created_at)",
                "CREATE INDEX challenges_source_sent ON challenges(source, created_at)",
            ]),
        // The pending device key of a key move: SQLite's version 8.
        Migration(
            version: 3,
            statements: [
                "ALTER TABLE sessions ADD COLUMN pending_device_public_key BYTEA",
                "CREATE INDEX sessions_device ON sessions(device_id, revoked_at)",
            ]),
        // Whether the current pair was used: SQLite's version 9.
        Migration(
            version: 4,
            statements: [
                "ALTER TABLE sessions ADD COLUMN pair_used BOOLEAN NOT NULL DEFAULT FALSE",
                "UPDATE sessions SET pair_used = TRUE",
            ]),
        // The first outcome of a confirm with an idempotency key: SQLite's version 10.
        Migration(
            version: 5,
            statements: [
                """
                CREATE TABLE idempotent_logins (
                    key_hash BYTEA PRIMARY KEY, challenge_id TEXT NOT NULL, account_id TEXT NOT NULL,
                    wallet_id TEXT NOT NULL, account_created BOOLEAN NOT NULL, sealed_tokens BYTEA NOT NULL,
                    expires_at BIGINT NOT NULL)
                """,
                "CREATE INDEX idempotent_logins_expiry ON idempotent_logins(expires_at)",
            ]),
        // The call an idempotency key belongs to (a passkey finish, a contact
        // verification; existing rows are confirms). Only grows the table, so instances of the
        // previous version sharing the database keep working during an upgrade: SQLite's version 11.
        Migration(
            version: 6,
            statements: [
                "ALTER TABLE idempotent_logins ADD COLUMN kind TEXT NOT NULL DEFAULT 'login_code'"
            ]),
        // The hourly SMS budget's slots, one per message handed to the gateway, shared by
        // every instance (a new table: instances of the previous version keep working): SQLite's
        // version 12.
        Migration(
            version: 7,
            statements: [
                "CREATE TABLE sms_slots (id TEXT PRIMARY KEY, taken_at BIGINT NOT NULL)",
                "CREATE INDEX sms_slots_taken_at ON sms_slots(taken_at)",
            ]),
        // The wrong-guess budgets, shared by every instance (a new table: instances of the
        // previous version keep working, and check codes without spending them): SQLite's version 13.
        Migration(
            version: 8,
            statements: [
                """
                CREATE TABLE code_guesses (
                    id TEXT PRIMARY KEY, device_key TEXT NOT NULL, source TEXT NOT NULL, guessed_at BIGINT NOT NULL)
                """,
                "CREATE INDEX code_guesses_device_key ON code_guesses(device_key, guessed_at)",
                "CREATE INDEX code_guesses_source ON code_guesses(source, guessed_at)",
                "CREATE INDEX code_guesses_guessed_at ON code_guesses(guessed_at)",
            ]),
        // Each idempotency key bound to the SHA-256 of its first request. Only grows the table:
        // instances of the previous version sharing the database write rows with an empty hash,
        // which the authority accepts as before (SQLite's version 14).
        Migration(
            version: 9,
            statements: [
                "ALTER TABLE idempotent_logins ADD COLUMN request_hash BYTEA NOT NULL DEFAULT ''::bytea"
            ]),
        // Each device key's audit-chain head, moved only forward. A new table: instances of the
        // previous version sharing the database never touch it (SQLite's version 15).
        Migration(
            version: 10,
            statements: [
                """
                CREATE TABLE audit_anchors (
                    device_key TEXT PRIMARY KEY, device_id TEXT NOT NULL, entries BIGINT NOT NULL,
                    head_hash TEXT NOT NULL, updated_at BIGINT NOT NULL)
                """
            ]),
        // The master key's check value and id, one row written by the first start and compared by
        // every later one. A new table: instances of the previous version sharing the database never
        // touch it; a database with data gets the check of the key of the first start of this
        // version, the key its instances already run with (SQLite's version 16).
        Migration(
            version: 11,
            statements: [
                """
                CREATE TABLE store_key_check (
                    id INTEGER PRIMARY KEY CHECK (id = 1), key_id TEXT NOT NULL, key_check BYTEA NOT NULL,
                    recorded_at BIGINT NOT NULL)
                """
            ]),
        // What holds each passkey, for the account's list. A column with a default: instances of
        // the previous version sharing the database write rows without it, shown as unknown
        // (SQLite's version 17).
        Migration(
            version: 12,
            statements: ["ALTER TABLE passkey_credentials ADD COLUMN kind TEXT NOT NULL DEFAULT ''"],
            readableFrom: 11),
    ]

    /// The advisory lock key every migration runs under (any fixed number; "rainmigr").
    static let migrationLockKey: Int64 = 0x7261_696E_6D69_6772

    /// Migrates the schema to this build's newest version, or, on a database a newer build migrated
    /// further, checks that this build may share it and changes nothing.
    /// - Returns: the versions found and reached.
    /// - Throws: RAIN_102 `schema_too_new` for a database this build may not share; RAIN_502 when a
    ///   statement fails.
    @discardableResult
    static func migrate(_ db: PostgresConnection) throws(RainError) -> SchemaCompatibility {
        try db.transaction("migrate the schema", attempts: 1) { () throws(RainError) -> SchemaCompatibility in
            // Held until COMMIT: a second instance starting now waits here, then finds the
            // migrations recorded and applies nothing.
            _ = try db.query(
                "SELECT pg_advisory_xact_lock($1)", [.integer(migrationLockKey)], operation: "lock the schema")
            try db.execute(
                """
                CREATE TABLE IF NOT EXISTS schema_version (
                    version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL,
                    min_reader_version BIGINT NOT NULL DEFAULT 0)
                """,
                operation: "create the schema_version table")
            try addReaderColumn(db)
            let (current, floor) = try currentVersions(db)
            let found = SchemaCompatibility(storeVersion: current, readableFrom: floor, buildVersion: latestSchemaVersion)
            try found.check(store: "the PostgreSQL database \(db.target)")
            if found.isStoreNewer { return found }
            let now = Date().unixMilliseconds
            var reached = found
            for migration in migrations where migration.version > current {
                for statement in migration.statements {
                    try db.execute(statement, operation: "apply schema migration \(migration.version)")
                }
                try db.execute(
                    "INSERT INTO schema_version (version, applied_at, min_reader_version) VALUES ($1, $2, $3)",
                    [.integer(Int64(migration.version)), .integer(now), .integer(Int64(migration.readableFrom))],
                    operation: "record schema migration \(migration.version)")
                reached.storeVersion = migration.version
                reached.readableFrom = max(reached.readableFrom, migration.readableFrom)
            }
            return reached
        }
    }

    /// Adds `schema_version.min_reader_version` to a database made before it existed, and fills it
    /// in for the migrations recorded there, which this build knows. Looked up first: an ALTER
    /// TABLE at every start would lock the table against the other instances' reads each time.
    private static func addReaderColumn(_ db: PostgresConnection) throws(RainError) {
        let op = "look for schema_version.min_reader_version"
        let rows = try db.query(
            """
            SELECT COUNT(*)::bigint FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = 'schema_version' AND column_name = 'min_reader_version'
            """, operation: op)
        guard let row = rows.first, try row.integer(0, op) == 0 else { return }
        try db.execute(
            "ALTER TABLE schema_version ADD COLUMN min_reader_version BIGINT NOT NULL DEFAULT 0",
            operation: "add schema_version.min_reader_version")
        for migration in migrations {
            try db.execute(
                "UPDATE schema_version SET min_reader_version = $1 WHERE version = $2",
                [.integer(Int64(migration.readableFrom)), .integer(Int64(migration.version))],
                operation: "record the reader version of migration \(migration.version)")
        }
    }

    /// The recorded schema version and the oldest version that may share it. A row without a
    /// reader version (0: written by something that does not know the column) counts as readable
    /// from its own version only, the safe guess.
    static func currentVersions(_ db: PostgresConnection) throws(RainError) -> (version: Int, readableFrom: Int) {
        let op = "read the schema version"
        let rows = try db.query(
            """
            SELECT COALESCE(MAX(version), 0)::bigint,
                COALESCE(MAX(CASE WHEN min_reader_version > 0 THEN min_reader_version ELSE version END), 0)::bigint
            FROM schema_version
            """, operation: op)
        guard let row = rows.first else { return (0, 0) }
        return (Int(try row.integer(0, op)), Int(try row.integer(1, op)))
    }

    static func currentVersion(_ db: PostgresConnection) throws(RainError) -> Int {
        try currentVersions(db).version
    }

    // MARK: - Running on a connection

    /// Runs `body` with a pooled connection on that connection's queue.
    func perform<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) throws(RainError) -> T
    ) async throws(RainError) -> T {
        do {
            return try await pool.withConnection(body)
        } catch {
            if error.code == .internalError { failedOperations.add(1, ordering: .relaxed) }
            throw error
        }
    }

    /// Operations that threw RAIN_502 (`AuthorityStore.failedOperationCount`).
    private let failedOperations = Atomic<Int>(0)

    /// How many operations failed since the store opened.
    package var failedOperationCount: Int { failedOperations.load(ordering: .relaxed) }

    // MARK: - AuthorityStore

    // The use cases themselves are `ConnectionStore`'s and `StoreOperations`', shared with
    // `SQLiteAuthorityStore`: each runs on a pooled connection, the atomic ones in one transaction
    // that takes the locks described above (`PostgresConnection`'s `StoreConnection` hooks).

    /// The highest migration recorded in `schema_version`.
    package func schemaVersion() async throws(RainError) -> Int {
        try await perform { db throws(RainError) in try Self.currentVersion(db) }
    }

    /// Closes every connection; later calls throw RAIN_502.
    package func close() async {
        await pool.close()
    }
}

// MARK: - Test and benchmark support

extension PostgresAuthorityStore {
    /// Every migration recorded in `schema_version`, in order (tests check none ran twice).
    package func appliedMigrations() async throws(RainError) -> [Int] {
        try await perform { db throws(RainError) in
            let op = "list applied migrations"
            var out: [Int] = []
            for row in try db.query("SELECT version FROM schema_version ORDER BY version", operation: op) {
                out.append(Int(try row.integer(0, op)))
            }
            return out
        }
    }

    /// Creates an empty database named `name` on the server of `serverURL` (a
    /// `postgres://…/DATABASE` URL of an existing database, without a query string) and returns
    /// the URL of the new one. For tests and benchmarks: each gets a database of its own.
    /// - Throws: RAIN_102 when `name` is not lowercase letters, digits and underscores; RAIN_502
    ///   when the server refuses.
    package static func createDatabase(named name: String, serverURL: String) async throws(RainError) -> String {
        guard !name.isEmpty, name.count <= 63,
            name.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }),
            let slash = serverURL.lastIndex(of: "/"), !serverURL.contains("?")
        else {
            throw RainError.invalid("a test database needs a plain name and a postgres://…/DATABASE server URL")
        }
        try await DispatchQueue(label: "rain.authority.postgres.create").runBlocking { () throws(RainError) in
            let admin = try PostgresConnection(url: serverURL)
            // An identifier cannot be a parameter: `name` was checked to be [a-z0-9_] above.
            try admin.executeSimple("CREATE DATABASE \(name)", operation: "create a database")
        }
        return String(serverURL[...slash]) + name
    }
}

// MARK: - The shared use cases on PostgreSQL

extension PostgresValue {
    /// The PostgreSQL binding of a shared value.
    init(_ value: StoreValue) {
        switch value {
        case .null: self = .null
        case .integer(let v): self = .integer(v)
        case .text(let s): self = .text(s)
        case .bytes(let b): self = .bytes(b)
        case .boolean(let b): self = .boolean(b)
        }
    }
}

/// The shared use cases (`ConnectionStore`, `StoreOperations`) on PostgreSQL: the row locks and advisory locks that give each use case's
/// READ COMMITTED transaction what SQLite gets from its single writer (see
/// `PostgresAuthorityStore`).
extension PostgresConnection: StoreConnection {
    /// Runs shared SQL as it is (it uses PostgreSQL's placeholders).
    func query(_ sql: String, values: [StoreValue], operation: String) throws(RainError) -> [PostgresRow] {
        try query(sql, values.map(PostgresValue.init), operation: operation)
    }

    /// Runs shared SQL as it is (it uses PostgreSQL's placeholders).
    @discardableResult
    func execute(_ sql: String, values: [StoreValue], operation: String) throws(RainError) -> Int {
        try execute(sql, values.map(PostgresValue.init), operation: operation)
    }

    /// A use case's transaction: run again when it loses a race, 5 times at most.
    func transaction<T>(_ operation: String, _ body: () throws(RainError) -> T) throws(RainError) -> T {
        try transaction(operation, attempts: 5, body)
    }

    /// The identity column each table has for insertion order.
    static var insertionOrder: String { "seq" }

    /// PostgreSQL sorts NULLs last in ascending order unless told.
    static var nullsFirst: String { " NULLS FIRST" }

    /// `IS NOT DISTINCT FROM` is true for equal values and for two NULLs; the cast types a NULL
    /// parameter.
    static func sameBytes(_ column: String, _ placeholder: String) -> String {
        "\(column) IS NOT DISTINCT FROM \(placeholder)::bytea"
    }

    /// `FOR UPDATE`, or `FOR UPDATE OF alias` to lock one table's rows of a join.
    static func lockRows(of alias: String?) -> String { alias.map { "FOR UPDATE OF \($0)" } ?? "FOR UPDATE" }

    /// Takes a transaction-scoped advisory lock named by `parts` (hashed to 64 bits by the server).
    func lock(_ parts: String...) throws(RainError) {
        _ = try query(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [.text(parts.joined(separator: "\u{1F}"))],
            operation: "take a lock")
    }

    /// Locks the account row, so logins of one account run one at a time and exactly one device
    /// ends up live.
    func lockAccount(_ accountID: String) throws(RainError) {
        _ = try query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [.text(accountID)], operation: "lock the account")
    }

    /// Retires the device's pending challenges of `purpose` in one `UPDATE … RETURNING id`.
    func retirePendingChallenges(appID: String, deviceID: String, purpose: String) throws(RainError) -> [String] {
        let op = "retire the device's pending challenges"
        var ids: [String] = []
        for row in try query(
            """
            UPDATE challenges SET state = 'retired'
            WHERE app_id = $1 AND device_id = $2 AND purpose = $3 AND state = 'pending'
            RETURNING id
            """,
            [.text(appID), .text(deviceID), .text(purpose)], operation: op)
        {
            ids.append(try row.text(0, op))
        }
        return ids
    }
}
