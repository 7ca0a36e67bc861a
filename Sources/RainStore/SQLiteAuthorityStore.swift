import Dispatch
import FoundationEssentials
import Glibc
import RainCore
import Synchronization
import RainSystem

/// The embedded authority store: one SQLite file (`authority.sqlite3`) in the state directory.
///
/// WAL journal, `synchronous=FULL`, a busy timeout and foreign keys. Numbered migrations run in one
/// transaction when the store opens and are recorded in `schema_version`. Every SQLite call of the
/// async API runs on one private serial queue (`SQLiteGroupCommitWriter`), never on the Swift
/// concurrency pool; the async API waits for it. Concurrent requests are committed together, one
/// fsync per group, each answered only after that commit.
package final class SQLiteAuthorityStore: ConnectionStore, Sendable {
    /// The connection and its queue: every request goes through it.
    let writer: SQLiteGroupCommitWriter
    /// The database file.
    package let path: String
    /// The schema versions found at open (`SchemaCompatibility`).
    package let schemaCompatibility: SchemaCompatibility?

    /// The file name inside the state directory.
    package static let fileName = "authority.sqlite3"

    /// The newest schema version this build knows.
    package static var latestSchemaVersion: Int { migrations.last?.version ?? 0 }

    private init(path: String, writer: SQLiteGroupCommitWriter, schema: SchemaCompatibility) {
        self.path = path
        self.schemaCompatibility = schema
        self.writer = writer
    }

    /// The writer's count: this process is the file's only writer (the state directory's lock).
    package var soleWriterChanges: StoreChangeCount? { writer.changes }

    /// Opens (creating if needed) `authority.sqlite3` in `stateDirectory` (created 0700 if missing)
    /// and migrates it to the latest schema.
    /// - Throws: RAIN_102 `schema_too_new` when a newer build migrated it past what this one may share
    ///   (`SchemaCompatibility`); RAIN_502 when the file cannot be opened or migrated.
    package static func open(stateDirectory: String) async throws(RainError) -> SQLiteAuthorityStore {
        try await open(path: PathText.joined(stateDirectory, fileName), createDirectory: true)
    }

    /// Opens (creating if needed, mode 0600) the database at `path` and migrates it.
    /// - Throws: RAIN_102 `schema_too_new` when a newer build migrated it past what this one may share
    ///   (`SchemaCompatibility`); RAIN_502 when the file cannot be opened or migrated.
    package static func open(path: String) async throws(RainError) -> SQLiteAuthorityStore {
        try await open(path: path, createDirectory: false)
    }

    private static func open(path: String, createDirectory: Bool) async throws(RainError) -> SQLiteAuthorityStore {
        let writer = SQLiteGroupCommitWriter(label: "rain.authority.sqlite")
        let schema = try await writer.runAlone { () throws(RainError) -> SchemaCompatibility in
            if createDirectory {
                try AtomicFile.makeDirectory(PathText.deletingLastComponent(path))
            }
            try createPrivateFile(path)
            let connection = try SQLiteConnection(path: path)
            try configure(connection)
            let schema = try migrate(connection)
            connection.clearStatementCache()
            writer.install(connection)
            return schema
        }
        return SQLiteAuthorityStore(path: path, writer: writer, schema: schema)
    }

    private static func configure(_ db: SQLiteConnection) throws(RainError) {
        let mode = try db.query("PRAGMA journal_mode=WAL", operation: "enable the WAL journal")
        guard let row = mode.first, (try? row.text(0, "read the journal mode"))?.lowercased() == "wal" else {
            throw RainError(.internalError, "authority store: cannot enable the WAL journal for \(db.path)")
        }
        try db.execute("PRAGMA synchronous=FULL", operation: "set synchronous=FULL")
        try db.execute("PRAGMA foreign_keys=ON", operation: "enable foreign keys")
        let fk = try db.query("PRAGMA foreign_keys", operation: "check foreign keys")
        guard let fkRow = fk.first, (try? fkRow.integer(0, "check foreign keys")) == 1 else {
            throw RainError(.internalError, "authority store: cannot enable foreign keys")
        }
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
    /// the next number.
    static let migrations: [Migration] = [
        Migration(
            version: 1,
            statements: [
                """
                CREATE TABLE accounts (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    created_at INTEGER NOT NULL
                )
                """,
                """
                CREATE TABLE contacts (
                    app_id TEXT NOT NULL,
                    kind TEXT NOT NULL CHECK (kind IN ('email', 'phone')),
                    value TEXT NOT NULL,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    verified_at INTEGER,
                    PRIMARY KEY (app_id, kind, value)
                )
                """,
                "CREATE INDEX contacts_account ON contacts(account_id)",
                """
                CREATE TABLE wallets (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL UNIQUE REFERENCES accounts(id),
                    created_at INTEGER NOT NULL
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
                    code_hash BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    wrong_attempts INTEGER NOT NULL DEFAULT 0,
                    state TEXT NOT NULL CHECK (state IN ('pending', 'used', 'retired', 'locked'))
                )
                """,
                "CREATE INDEX challenges_device ON challenges(app_id, device_id, state)",
                "CREATE INDEX challenges_account ON challenges(app_id, account_key, state)",
                "CREATE INDEX challenges_expiry ON challenges(expires_at)",
                """
                CREATE TABLE sessions (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    device_id TEXT NOT NULL,
                    access_hash BLOB NOT NULL UNIQUE,
                    refresh_hash BLOB NOT NULL UNIQUE,
                    access_expires_at INTEGER NOT NULL,
                    created_at INTEGER NOT NULL,
                    revoked_at INTEGER,
                    revoke_reason TEXT
                )
                """,
                "CREATE INDEX sessions_account ON sessions(account_id, revoked_at)",
            ]),
        // Device-bound, rotating sessions. Rows from version 1 keep a NULL device key:
        // they are unbound and can never be refreshed.
        Migration(
            version: 2,
            statements: [
                "ALTER TABLE sessions ADD COLUMN device_public_key BLOB",
                "ALTER TABLE sessions ADD COLUMN previous_refresh_hash BLOB",
                "ALTER TABLE sessions ADD COLUMN rotated_at INTEGER",
                "ALTER TABLE sessions ADD COLUMN refresh_generation INTEGER NOT NULL DEFAULT 0",
                "CREATE INDEX sessions_previous_refresh ON sessions(previous_refresh_hash)",
                """
                CREATE TABLE retired_refresh_tokens (
                    refresh_hash BLOB PRIMARY KEY,
                    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                    generation INTEGER NOT NULL,
                    retired_at INTEGER NOT NULL
                )
                """,
                "CREATE INDEX retired_refresh_tokens_session ON retired_refresh_tokens(session_id)",
                "CREATE INDEX retired_refresh_tokens_age ON retired_refresh_tokens(retired_at)",
            ]),
        // Wallet keys: the encrypted BIP-39 entropy, the id of the master key it is
        // encrypted under, and the addresses derived from it. Rows from earlier versions keep NULLs
        // until the authority backfills them (at open, or at the account's next login).
        Migration(
            version: 3,
            statements: [
                "ALTER TABLE wallets ADD COLUMN entropy_ciphertext BLOB",
                "ALTER TABLE wallets ADD COLUMN entropy_key_id TEXT",
                "ALTER TABLE wallets ADD COLUMN ethereum_address TEXT",
                "ALTER TABLE wallets ADD COLUMN solana_address TEXT",
            ]),
        // Passkeys: ceremonies (single-use challenges bound to app, device, kind and
        // rpId) and credentials. A credential id is unique across every account and app; one
        // account may hold credentials of several rpIds.
        Migration(
            version: 4,
            statements: [
                """
                CREATE TABLE passkey_ceremonies (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    kind TEXT NOT NULL CHECK (kind IN ('sign_up', 'add', 'login')),
                    rp_id TEXT NOT NULL,
                    origins TEXT NOT NULL,
                    challenge BLOB NOT NULL,
                    user_handle BLOB,
                    account_id TEXT REFERENCES accounts(id),
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('pending', 'used'))
                )
                """,
                "CREATE INDEX passkey_ceremonies_expiry ON passkey_ceremonies(expires_at)",
                """
                CREATE TABLE passkey_credentials (
                    credential_id BLOB PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id),
                    app_id TEXT NOT NULL,
                    rp_id TEXT NOT NULL,
                    public_key BLOB NOT NULL,
                    algorithm INTEGER NOT NULL,
                    sign_count INTEGER NOT NULL,
                    backup_eligible INTEGER NOT NULL,
                    backed_up INTEGER NOT NULL,
                    user_handle BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    last_used_at INTEGER
                )
                """,
                "CREATE INDEX passkey_credentials_account ON passkey_credentials(account_id)",
            ]),
        // Backup contacts: a challenge is a login code or a contact verification bound
        // to the account it attaches the contact to. Earlier rows are login codes.
        Migration(
            version: 5,
            statements: [
                """
                ALTER TABLE challenges ADD COLUMN purpose TEXT NOT NULL DEFAULT 'login'
                    CHECK (purpose IN ('login', 'verify_contact'))
                """,
                "ALTER TABLE challenges ADD COLUMN target_account_id TEXT REFERENCES accounts(id)",
            ]),
        // Send limits: recent codes are counted per contact and per account key by
        // creation time, inside the insert's transaction.
        Migration(
            version: 6,
            statements: [
                "CREATE INDEX challenges_contact_sent ON challenges(app_id, contact_kind, contact_value, created_at)",
                "CREATE INDEX challenges_account_sent ON challenges(app_id, account_key, created_at)",
            ]),
        // Send limits across apps: recent codes are also counted per contact whatever
        // the app, and per source (the sending daemon's uid, or the caller's address). Earlier
        // rows have no source and count against no source limit.
        Migration(
            version: 7,
            statements: [
                "ALTER TABLE challenges ADD COLUMN source TEXT",
                "CREATE INDEX challenges_contact_all_apps_sent ON challenges(contact_kind, contact_value, created_at)",
                "CREATE INDEX challenges_source_sent ON challenges(source, created_at)",
            ]),
        // Sessions bound to the device on every call: while a device moves to a new key
        // (`storage migrate`), its sessions accept the pending key as well, until it confirms it.
        // Earlier rows have none.
        Migration(
            version: 8,
            statements: [
                "ALTER TABLE sessions ADD COLUMN pending_device_public_key BLOB",
                "CREATE INDEX sessions_device ON sessions(device_id, revoked_at)",
            ]),
        // Refreshes the device could not save: whether the current pair was used. A
        // repeat of the previous refresh token gets the current pair back while it is unused.
        // Existing rows count as used (whether they were is unknown), which keeps today's rule
        // for them until their next rotation.
        Migration(
            version: 9,
            statements: [
                "ALTER TABLE sessions ADD COLUMN pair_used INTEGER NOT NULL DEFAULT 0",
                "UPDATE sessions SET pair_used = 1",
            ]),
        // The first outcome of a confirm with an idempotency key, for its repeats
        // within the challenge's lifetime (PostgreSQL's version 5).
        Migration(
            version: 10,
            statements: [
                """
                CREATE TABLE idempotent_logins (
                    key_hash BLOB PRIMARY KEY, challenge_id TEXT NOT NULL, account_id TEXT NOT NULL,
                    wallet_id TEXT NOT NULL, account_created INTEGER NOT NULL, sealed_tokens BLOB NOT NULL,
                    expires_at INTEGER NOT NULL)
                """,
                "CREATE INDEX idempotent_logins_expiry ON idempotent_logins(expires_at)",
            ]),
        // Passkey finishes and contact verifications are idempotent too: the call a key
        // belongs to. The table keeps its name (and the existing rows, confirms, their kind) so the
        // schema only grows (PostgreSQL's version 6).
        Migration(
            version: 11,
            statements: [
                "ALTER TABLE idempotent_logins ADD COLUMN kind TEXT NOT NULL DEFAULT 'login_code'"
            ]),
        // The hourly SMS budget's slots, one per message handed to the gateway, so the
        // budget survives a restart (PostgreSQL's version 7).
        Migration(
            version: 12,
            statements: [
                "CREATE TABLE sms_slots (id TEXT PRIMARY KEY, taken_at INTEGER NOT NULL)",
                "CREATE INDEX sms_slots_taken_at ON sms_slots(taken_at)",
            ]),
        // The wrong-guess budgets: one row per code checked (given back when it was right),
        // counted per device key and per source across apps (PostgreSQL's version 8).
        Migration(
            version: 13,
            statements: [
                """
                CREATE TABLE code_guesses (
                    id TEXT PRIMARY KEY, device_key TEXT NOT NULL, source TEXT NOT NULL, guessed_at INTEGER NOT NULL)
                """,
                "CREATE INDEX code_guesses_device_key ON code_guesses(device_key, guessed_at)",
                "CREATE INDEX code_guesses_source ON code_guesses(source, guessed_at)",
                "CREATE INDEX code_guesses_guessed_at ON code_guesses(guessed_at)",
            ]),
        // Each idempotency key bound to the SHA-256 of its first request, so a repeat with another
        // payload (another code) is refused rather than answered. Existing rows get an empty hash,
        // which the authority accepts as before: they expire with their challenge (PostgreSQL's
        // version 9).
        Migration(
            version: 14,
            statements: [
                "ALTER TABLE idempotent_logins ADD COLUMN request_hash BLOB NOT NULL DEFAULT X''"
            ]),
        // Each device key's audit-chain head, moved only forward (PostgreSQL's version 10).
        Migration(
            version: 15,
            statements: [
                """
                CREATE TABLE audit_anchors (
                    device_key TEXT PRIMARY KEY, device_id TEXT NOT NULL, entries INTEGER NOT NULL,
                    head_hash TEXT NOT NULL, updated_at INTEGER NOT NULL)
                """
            ]),
        // The master key's check value and id, one row written by the first start and compared by
        // every later one (PostgreSQL's version 11). A store migrated here with data gets the check
        // of the key of its first start, the key its instances already run with.
        Migration(
            version: 16,
            statements: [
                """
                CREATE TABLE store_key_check (
                    id INTEGER PRIMARY KEY CHECK (id = 1), key_id TEXT NOT NULL, key_check BLOB NOT NULL,
                    recorded_at INTEGER NOT NULL)
                """
            ]),
        // What holds each passkey, for the account's list. A column with a default: instances of
        // the previous version sharing the store write rows without it, shown as unknown
        // (PostgreSQL's version 12).
        Migration(
            version: 17,
            statements: ["ALTER TABLE passkey_credentials ADD COLUMN kind TEXT NOT NULL DEFAULT ''"],
            readableFrom: 16),
    ]

    /// Migrates the schema to this build's newest version, or, on a store a newer build migrated
    /// further, checks that this build may share it and changes nothing.
    /// - Returns: the versions found and reached.
    /// - Throws: RAIN_102 `schema_too_new` for a store this build may not share; RAIN_502 when a
    ///   statement fails.
    @discardableResult
    static func migrate(_ db: SQLiteConnection) throws(RainError) -> SchemaCompatibility {
        try db.transaction("migrate the schema") { () throws(RainError) -> SchemaCompatibility in
            try db.execute(
                """
                CREATE TABLE IF NOT EXISTS schema_version (
                    version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL,
                    min_reader_version INTEGER NOT NULL DEFAULT 0)
                """,
                operation: "create the schema_version table")
            try addReaderColumn(db)
            let (current, floor) = try currentVersions(db)
            let found = SchemaCompatibility(storeVersion: current, readableFrom: floor, buildVersion: latestSchemaVersion)
            try found.check(store: db.path)
            if found.isStoreNewer { return found }
            let now = Date().unixMilliseconds
            var reached = found
            for migration in migrations where migration.version > current {
                for statement in migration.statements {
                    try db.execute(statement, operation: "apply schema migration \(migration.version)")
                }
                try db.execute(
                    "INSERT INTO schema_version (version, applied_at, min_reader_version) VALUES (?, ?, ?)",
                    [.integer(Int64(migration.version)), .integer(now), .integer(Int64(migration.readableFrom))],
                    operation: "record schema migration \(migration.version)")
                reached.storeVersion = migration.version
                reached.readableFrom = max(reached.readableFrom, migration.readableFrom)
            }
            return reached
        }
    }

    /// Adds `schema_version.min_reader_version` to a store made before it existed, and fills it in
    /// for the migrations recorded there, which this build knows.
    private static func addReaderColumn(_ db: SQLiteConnection) throws(RainError) {
        let op = "look for schema_version.min_reader_version"
        let rows = try db.query(
            "SELECT COUNT(*) FROM pragma_table_info('schema_version') WHERE name = 'min_reader_version'", operation: op)
        guard let row = rows.first, try row.integer(0, op) == 0 else { return }
        try db.execute(
            "ALTER TABLE schema_version ADD COLUMN min_reader_version INTEGER NOT NULL DEFAULT 0",
            operation: "add schema_version.min_reader_version")
        for migration in migrations {
            try db.execute(
                "UPDATE schema_version SET min_reader_version = ? WHERE version = ?",
                [.integer(Int64(migration.readableFrom)), .integer(Int64(migration.version))],
                operation: "record the reader version of migration \(migration.version)")
        }
    }

    /// The recorded schema version and the oldest version that may share it. A row without a
    /// reader version (0: written by something that does not know the column) counts as readable
    /// from its own version only, the safe guess.
    private static func currentVersions(_ db: SQLiteConnection) throws(RainError) -> (version: Int, readableFrom: Int) {
        let op = "read the schema version"
        let rows = try db.query(
            """
            SELECT COALESCE(MAX(version), 0),
                COALESCE(MAX(CASE WHEN min_reader_version > 0 THEN min_reader_version ELSE version END), 0)
            FROM schema_version
            """, operation: op)
        guard let row = rows.first else { return (0, 0) }
        return (Int(try row.integer(0, op)), Int(try row.integer(1, op)))
    }

    private static func currentVersion(_ db: SQLiteConnection) throws(RainError) -> Int {
        try currentVersions(db).version
    }

    // MARK: - Running on the queue

    /// Runs `body` with the open connection on the store's queue, in the next group commit (see
    /// `SQLiteGroupCommitWriter`): answered once its writes are committed.
    func perform<T: Sendable>(
        _ body: @escaping @Sendable (SQLiteConnection) throws(RainError) -> T
    ) async throws(RainError) -> T {
        do {
            return try await writer.perform(body)
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
    // `PostgresAuthorityStore`: each runs on the store's queue in a savepoint of its group's
    // `BEGIN IMMEDIATE` transaction (its write lock, held from the first read to the commit, is
    // all the locking they need; their own `transaction` calls become nested savepoints).

    /// The highest migration recorded in `schema_version`.
    package func schemaVersion() async throws(RainError) -> Int {
        try await perform { db throws(RainError) in try Self.currentVersion(db) }
    }

    /// The session by access hash and the account's passkeys, in one trip to the store's queue.
    package func accountAccessWithPasskeys(appID: String, accessHash: [UInt8]) async throws(RainError)
        -> (access: AccountAccess, passkeys: [PasskeyCredentialRecord])?
    {
        try await perform { db throws(RainError) in
            try StoreOperations.accountAccessWithPasskeys(db, appID: appID, accessHash: accessHash)
        }
    }

    /// The session by access hash and the account's wallet, in one trip to the store's queue.
    package func accountAccessWithWallet(appID: String, accessHash: [UInt8]) async throws(RainError)
        -> (access: AccountAccess, wallet: WalletRecord?)?
    {
        try await perform { db throws(RainError) in
            try StoreOperations.accountAccessWithWallet(db, appID: appID, accessHash: accessHash)
        }
    }

    /// Closes the database handle on the store's queue; later calls throw RAIN_502.
    package func close() async {
        // Dropping the connection on its queue closes the handle (SQLiteConnection.deinit).
        _ = try? await writer.runAlone { () throws(RainError) in self.writer.install(nil) }
    }

    // MARK: - Inspection (tests)

    /// Every row of every table, for tests that check what is stored (for example that no code is).
    func dumpAllRows() async throws(RainError) -> [String: [SQLiteRow]] {
        try await perform { db throws(RainError) in
            var out: [String: [SQLiteRow]] = [:]
            for table in [
                "schema_version", "accounts", "contacts", "wallets", "challenges", "sessions", "retired_refresh_tokens",
            ] {
                // Table names come from the fixed list above, never from input.
                out[table] = try db.query("SELECT * FROM \(table)", operation: "dump table \(table)")
            }
            return out
        }
    }
}

/// SQLite gives its -wal and -shm files the database file's mode: create it 0600 first.
private func createPrivateFile(_ path: String) throws(RainError) {
    let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw AtomicFile.ioError("create", path) }
    defer { Syscall.closeUnchecked(fd, because: .readOnly) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { throw AtomicFile.ioError("stat", path) }
    if info.st_mode & 0o077 != 0 {
        guard fchmod(fd, 0o600) == 0 else { throw AtomicFile.ioError("chmod", path) }
    }
}

// MARK: - The shared use cases on SQLite

extension SQLiteValue {
    /// The SQLite binding of a shared value: bytes are a BLOB, a boolean an INTEGER 0/1.
    init(_ value: StoreValue) {
        switch value {
        case .null: self = .null
        case .integer(let v): self = .integer(v)
        case .text(let s): self = .text(s)
        case .bytes(let b): self = .blob(b)
        case .boolean(let b): self = .integer(b ? 1 : 0)
        }
    }
}

/// The shared use cases (`ConnectionStore`, `StoreOperations`) on SQLite: every use case runs in a `BEGIN IMMEDIATE` transaction, whose
/// write lock serializes it against every other writer, so no lock is ever taken here.
extension SQLiteConnection: StoreConnection {
    /// Runs shared SQL, its `$N` placeholders turned into SQLite's `?N` when it is prepared.
    func query(_ sql: String, values: [StoreValue], operation: String) throws(RainError) -> [SQLiteRow] {
        try query(sharedSQL: sql, values.map(SQLiteValue.init), operation: operation)
    }

    /// Runs shared SQL, its `$N` placeholders turned into SQLite's `?N` when it is prepared.
    @discardableResult
    func execute(_ sql: String, values: [StoreValue], operation: String) throws(RainError) -> Int {
        try execute(sharedSQL: sql, values.map(SQLiteValue.init), operation: operation)
    }

    /// SQLite's implicit insertion-ordered key.
    static var insertionOrder: String { "rowid" }

    /// SQLite sorts NULLs first in ascending order by default.
    static var nullsFirst: String { "" }

    /// SQLite's `IS` is true for equal values and for two NULLs.
    static func sameBytes(_ column: String, _ placeholder: String) -> String { "\(column) IS \(placeholder)" }

    /// No row locks: the transaction holds the database's write lock.
    static func lockRows(of alias: String?) -> String { "" }

    /// No lock: the transaction holds the database's write lock.
    func lock(_ parts: String...) throws(RainError) {}

    /// No lock: the transaction holds the database's write lock.
    func lockAccount(_ accountID: String) throws(RainError) {}

    /// Reads the device's pending challenges of `purpose`, then retires them.
    func retirePendingChallenges(appID: String, deviceID: String, purpose: String) throws(RainError) -> [String] {
        let op = "find the device's pending challenges"
        let arguments: [SQLiteValue] = [.text(appID), .text(deviceID), .text(purpose)]
        var ids: [String] = []
        for row in try query(
            "SELECT id FROM challenges WHERE app_id = ? AND device_id = ? AND purpose = ? AND state = 'pending'",
            arguments, operation: op)
        {
            ids.append(try row.text(0, op))
        }
        try execute(
            """
            UPDATE challenges SET state = 'retired'
            WHERE app_id = ? AND device_id = ? AND purpose = ? AND state = 'pending'
            """,
            arguments, operation: "retire the device's pending challenges")
        return ids
    }
}
