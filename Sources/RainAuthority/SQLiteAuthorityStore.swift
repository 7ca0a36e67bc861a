import Dispatch
import Foundation
import RainCore

/// The embedded authority store: one SQLite file (`authority.sqlite3`) in the state directory.
///
/// WAL journal, `synchronous=FULL`, a busy timeout and foreign keys. Numbered migrations run in one
/// transaction when the store opens and are recorded in `schema_version`. Every SQLite call of the
/// async API runs on one private serial queue, never on the Swift concurrency pool; the async API
/// waits for it. A second, read-only connection on a queue of its own serves `directReader`.
public final class SQLiteAuthorityStore: AuthorityStore, @unchecked Sendable {
    // @unchecked: `connection` is read and written only on `queue` (a serial queue); every other
    // stored property is immutable and Sendable.
    private var connection: SQLiteConnection?
    private let queue: DispatchQueue
    /// The second connection, for the hot session reads (`directReader`).
    private let reader: SQLiteDirectReader
    /// The database file.
    public let path: String

    /// The file name inside the state directory.
    public static let fileName = "authority.sqlite3"

    /// The newest schema version this build knows.
    public static var latestSchemaVersion: Int { migrations.last?.version ?? 0 }

    private init(path: String, queue: DispatchQueue) {
        self.path = path
        self.queue = queue
        self.reader = SQLiteDirectReader(path: path)
    }

    /// A second connection to the same file on its own queue, for reads only: Account/Get and
    /// Wallet/Get read there without waiting for the writer (WAL) or for the Swift pool.
    public var directReader: (any DirectStoreReader)? { reader }

    /// Opens (creating if needed) `authority.sqlite3` in `stateDirectory` (created 0700 if missing)
    /// and migrates it to the latest schema.
    /// - Throws: RAIN_502 when the file cannot be opened or migrated, or was written by a newer build.
    public static func open(stateDirectory: String) async throws(RainError) -> SQLiteAuthorityStore {
        try await open(path: (stateDirectory as NSString).appendingPathComponent(fileName), createDirectory: true)
    }

    /// Opens (creating if needed, mode 0600) the database at `path` and migrates it.
    /// - Throws: RAIN_502 when the file cannot be opened or migrated, or was written by a newer build.
    public static func open(path: String) async throws(RainError) -> SQLiteAuthorityStore {
        try await open(path: path, createDirectory: false)
    }

    private static func open(path: String, createDirectory: Bool) async throws(RainError) -> SQLiteAuthorityStore {
        let store = SQLiteAuthorityStore(path: path, queue: DispatchQueue(label: "rain.authority.sqlite"))
        try await store.queue.runBlocking { () throws(RainError) in
            if createDirectory {
                try AtomicFile.makeDirectory((path as NSString).deletingLastPathComponent)
            }
            try createPrivateFile(path)
            let connection = try SQLiteConnection(path: path)
            try configure(connection)
            try migrate(connection)
            connection.clearStatementCache()
            store.connection = connection
        }
        return store
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
    }

    /// Numbered migrations, applied in order, each exactly once. Never edit a released one: add
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
        // Device-bound, rotating sessions (issue 3). Rows from version 1 keep a NULL device key:
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
        // Wallet keys (issue 5): the encrypted BIP-39 entropy, the id of the master key it is
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
        // Passkeys (issue 4): ceremonies (single-use challenges bound to app, device, kind and
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
        // Backup contacts (issue 4): a challenge is a login code or a contact verification bound
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
        // Send limits (issue 6): recent codes are counted per contact and per account key by
        // creation time, inside the insert's transaction.
        Migration(
            version: 6,
            statements: [
                "CREATE INDEX challenges_contact_sent ON challenges(app_id, contact_kind, contact_value, created_at)",
                "CREATE INDEX challenges_account_sent ON challenges(app_id, account_key, created_at)",
            ]),
    ]

    static func migrate(_ db: SQLiteConnection) throws(RainError) {
        try db.transaction("migrate the schema") { () throws(RainError) in
            try db.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
                operation: "create the schema_version table")
            let current = try currentVersion(db)
            if current > latestSchemaVersion {
                throw RainError(
                    .internalError,
                    "authority store: \(db.path) has schema version \(current), newer than this build supports "
                        + "(\(latestSchemaVersion)); run a newer rainwalletd")
            }
            let now = Date().unixMilliseconds
            for migration in migrations where migration.version > current {
                for statement in migration.statements {
                    try db.execute(statement, operation: "apply schema migration \(migration.version)")
                }
                try db.execute(
                    "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                    [.integer(Int64(migration.version)), .integer(now)],
                    operation: "record schema migration \(migration.version)")
            }
        }
    }

    private static func currentVersion(_ db: SQLiteConnection) throws(RainError) -> Int {
        let op = "read the schema version"
        let rows = try db.query("SELECT COALESCE(MAX(version), 0) FROM schema_version", operation: op)
        guard let row = rows.first else { return 0 }
        return Int(try row.integer(0, op))
    }

    // MARK: - Running on the queue

    /// Runs `body` with the open connection on the store's queue.
    func perform<T: Sendable>(
        _ body: @escaping @Sendable (SQLiteConnection) throws(RainError) -> T
    ) async throws(RainError) -> T {
        try await queue.runBlocking { () throws(RainError) -> T in
            guard let connection = self.connection else {
                throw RainError(.internalError, "authority store: the database is closed")
            }
            return try body(connection)
        }
    }

    // MARK: - AuthorityStore

    /// The highest migration recorded in `schema_version`.
    public func schemaVersion() async throws(RainError) -> Int {
        try await perform { db throws(RainError) in try Self.currentVersion(db) }
    }

    /// The account that owns `contact` in `appID`, with its wallet.
    public func account(appID: String, contact: RainWalletContact) async throws(RainError) -> AccountRecord? {
        try await perform { db throws(RainError) in
            let op = "look up an account by contact"
            let rows = try db.query(
                """
                SELECT a.id, a.app_id, w.id, a.created_at
                FROM contacts c JOIN accounts a ON a.id = c.account_id JOIN wallets w ON w.account_id = a.id
                WHERE c.app_id = ? AND c.kind = ? AND c.value = ?
                """,
                [.text(appID), .text(contact.kindName), .text(contact.value)], operation: op)
            guard let row = rows.first else { return nil }
            return AccountRecord(
                id: try row.text(0, op), appID: try row.text(1, op), walletID: try row.text(2, op),
                createdAt: Date(unixMilliseconds: try row.integer(3, op)))
        }
    }

    /// Records a pending challenge unless a send limit refuses it (see
    /// `AuthorityStore.insertChallenge`), in one write transaction.
    public func insertChallenge(_ challenge: NewChallenge, maxActivePerAccount: Int, limits: CodeSendLimits)
        async throws(RainError) -> ChallengeInsertionOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("record a login challenge") { () throws(RainError) -> ChallengeInsertionOutcome in
                // A verification counts against the account it attaches the contact to.
                let accountKey: String
                if let target = challenge.targetAccountID {
                    accountKey = target
                } else {
                    accountKey =
                        try Self.accountID(db, appID: challenge.appID, contact: challenge.contact)
                        ?? Self.contactKey(challenge.contact)
                }
                // BEGIN IMMEDIATE holds the write lock from this count to the insert below.
                if let refusal = try Self.sendLimitRefusal(db, challenge, accountKey: accountKey, limits: limits) {
                    return .limited(refusal.limit, retryAfter: refusal.retryAfter)
                }
                var retired: [String] = []

                // Resend replaces; another contact on the same device retires the pending one (of
                // the same purpose: a verification does not retire a pending login, nor the reverse).
                let deviceOp = "find the device's pending challenges"
                let deviceArguments: [SQLiteValue] = [
                    .text(challenge.appID), .text(challenge.deviceID), .text(challenge.purpose.rawValue),
                ]
                for row in try db.query(
                    "SELECT id FROM challenges WHERE app_id = ? AND device_id = ? AND purpose = ? AND state = 'pending'",
                    deviceArguments, operation: deviceOp)
                {
                    retired.append(try row.text(0, deviceOp))
                }
                try db.execute(
                    """
                    UPDATE challenges SET state = 'retired'
                    WHERE app_id = ? AND device_id = ? AND purpose = ? AND state = 'pending'
                    """,
                    deviceArguments, operation: "retire the device's pending challenges")

                // At most `maxActivePerAccount` live codes per account, across devices: oldest goes.
                let activeOp = "count the account's active challenges"
                let active = try db.query(
                    """
                    SELECT id FROM challenges
                    WHERE app_id = ? AND account_key = ? AND state = 'pending' AND expires_at > ?
                    ORDER BY created_at, rowid
                    """,
                    [.text(challenge.appID), .text(accountKey), .integer(challenge.createdAt.unixMilliseconds)],
                    operation: activeOp)
                let excess = active.count - max(1, maxActivePerAccount) + 1
                if excess > 0 {
                    for row in active.prefix(excess) {
                        let id = try row.text(0, activeOp)
                        try db.execute(
                            "UPDATE challenges SET state = 'retired' WHERE id = ? AND state = 'pending'", [.text(id)],
                            operation: "retire the account's oldest challenge")
                        retired.append(id)
                    }
                }

                try db.execute(
                    """
                    INSERT INTO challenges (id, app_id, device_id, contact_kind, contact_value, account_key, code_hash,
                                            created_at, expires_at, wrong_attempts, state, purpose, target_account_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 'pending', ?, ?)
                    """,
                    [
                        .text(challenge.id), .text(challenge.appID), .text(challenge.deviceID),
                        .text(challenge.contact.kindName), .text(challenge.contact.value), .text(accountKey),
                        .blob(challenge.codeHash), .integer(challenge.createdAt.unixMilliseconds),
                        .integer(challenge.expiresAt.unixMilliseconds), .text(challenge.purpose.rawValue),
                        challenge.targetAccountID.map { .text($0) } ?? .null,
                    ], operation: "insert a login challenge")
                return .inserted(ChallengeInsertion(accountKey: accountKey, retiredChallengeIDs: retired))
            }
        }
    }

    /// The send limit a new challenge would break, with the earliest time it would pass, or nil.
    /// When several are broken, the one that clears last. Counts every stored challenge of the app
    /// created within each window (up to the new one's time), whatever its purpose or state.
    static func sendLimitRefusal(
        _ db: SQLiteConnection, _ challenge: NewChallenge, accountKey: String, limits: CodeSendLimits
    ) throws(RainError) -> (limit: CodeSendLimit, retryAfter: Date)? {
        let now = challenge.createdAt.unixMilliseconds
        var refusals: [(limit: CodeSendLimit, retryAfter: Int64)] = []
        let contactFilter = "app_id = ? AND contact_kind = ? AND contact_value = ?"
        let contactArguments: [SQLiteValue] = [
            .text(challenge.appID), .text(challenge.contact.kindName), .text(challenge.contact.value),
        ]

        if limits.contactCooldown > .zero {
            let op = "find the contact's last code"
            let rows = try db.query(
                "SELECT MAX(created_at) FROM challenges WHERE \(contactFilter) AND created_at <= ?",
                contactArguments + [.integer(now)], operation: op)
            if let last = try rows.first?.optionalInteger(0, op) {
                let clears = last + limits.contactCooldown.milliseconds
                if clears > now { refusals.append((.contactCooldown, clears)) }
            }
        }
        if let clears = try windowClearance(
            db, filter: contactFilter, arguments: contactArguments, now: now, window: limits.contactWindow,
            maxSends: limits.contactMaxSends, operation: "count the contact's recent codes")
        {
            refusals.append((.contactWindow, clears))
        }
        if let clears = try windowClearance(
            db, filter: "app_id = ? AND account_key = ?", arguments: [.text(challenge.appID), .text(accountKey)],
            now: now, window: limits.accountWindow, maxSends: limits.accountMaxSends,
            operation: "count the account's recent codes")
        {
            refusals.append((.accountWindow, clears))
        }
        guard let latest = refusals.max(by: { $0.retryAfter < $1.retryAfter }) else { return nil }
        return (latest.limit, Date(unixMilliseconds: latest.retryAfter))
    }

    /// When enough of the sends matching `filter` within `window` before `now` have left it for one
    /// more to fit under `maxSends` (Unix ms), or nil when one more fits now.
    private static func windowClearance(
        _ db: SQLiteConnection, filter: String, arguments: [SQLiteValue], now: Int64, window: Duration, maxSends: Int,
        operation op: String
    ) throws(RainError) -> Int64? {
        guard window > .zero, maxSends < Int.max else { return nil }
        let windowMilliseconds = window.milliseconds
        // A send at `t` counts while `now < t + window`.
        let rows = try db.query(
            "SELECT created_at FROM challenges WHERE \(filter) AND created_at > ? AND created_at <= ? ORDER BY created_at",
            arguments + [.integer(now - windowMilliseconds), .integer(now)], operation: op)
        let allowed = max(0, maxSends)
        guard rows.count >= allowed else { return nil }
        // One more fits once all but `allowed - 1` of the counted sends have left the window.
        guard allowed > 0 else { return now + windowMilliseconds }
        return try rows[rows.count - allowed].integer(0, op) + windowMilliseconds
    }

    /// The challenge with this id, whatever its state.
    public func challenge(id: String) async throws(RainError) -> ChallengeRecord? {
        try await perform { db throws(RainError) in try Self.challenge(db, id: id) }
    }

    /// Retires a challenge if it is still pending.
    public func retireChallenge(id: String) async throws(RainError) {
        _ = try await perform { db throws(RainError) in
            try db.execute(
                "UPDATE challenges SET state = 'retired' WHERE id = ? AND state = 'pending'", [.text(id)],
                operation: "retire a challenge")
        }
    }

    /// Counts a wrong code, locking at `maxWrongAttempts`, in one transaction.
    public func recordWrongAttempt(challengeID: String, maxWrongAttempts: Int, now: Date) async throws(RainError)
        -> ChallengeRecord?
    {
        try await perform { db throws(RainError) in
            try db.transaction("count a wrong code") { () throws(RainError) -> ChallengeRecord? in
                try db.execute(
                    """
                    UPDATE challenges
                    SET wrong_attempts = wrong_attempts + 1,
                        state = CASE WHEN wrong_attempts + 1 >= ? THEN 'locked' ELSE state END
                    WHERE id = ? AND state = 'pending' AND expires_at > ?
                    """,
                    [.integer(Int64(max(1, maxWrongAttempts))), .text(challengeID), .integer(now.unixMilliseconds)],
                    operation: "count a wrong code")
                return try Self.challenge(db, id: challengeID)
            }
        }
    }

    /// Completes a login (see `AuthorityStore.completeLogin`), in one transaction.
    public func completeLogin(_ login: LoginCompletion) async throws(RainError) -> LoginCompletionOutcome {
        try await perform { db throws(RainError) in
            try db.transaction("complete a login") { () throws(RainError) -> LoginCompletionOutcome in
                let now = login.now.unixMilliseconds
                let used = try db.execute(
                    """
                    UPDATE challenges SET state = 'used'
                    WHERE id = ? AND app_id = ? AND device_id = ? AND purpose = 'login' AND state = 'pending'
                      AND expires_at > ?
                    """,
                    [.text(login.challengeID), .text(login.appID), .text(login.deviceID), .integer(now)],
                    operation: "mark the challenge used")
                guard used == 1 else {
                    return .challengeUnavailable(try Self.challenge(db, id: login.challengeID))
                }

                let accountID: String
                let walletID: String
                let created: Bool
                if let existing = try Self.accountID(db, appID: login.appID, contact: login.contact) {
                    let op = "find the account's wallet"
                    let rows = try db.query(
                        "SELECT id FROM wallets WHERE account_id = ?", [.text(existing)], operation: op)
                    guard let row = rows.first else {
                        throw RainError(.unavailable, "the account's wallet is unavailable")
                    }
                    accountID = existing
                    walletID = try row.text(0, op)
                    created = false
                    try db.execute(
                        """
                        UPDATE contacts SET verified_at = COALESCE(verified_at, ?)
                        WHERE app_id = ? AND kind = ? AND value = ?
                        """,
                        [.integer(now), .text(login.appID), .text(login.contact.kindName), .text(login.contact.value)],
                        operation: "mark the contact verified")
                } else {
                    accountID = login.newAccountID
                    walletID = login.newWalletID
                    created = true
                    try db.execute(
                        "INSERT INTO accounts (id, app_id, created_at) VALUES (?, ?, ?)",
                        [.text(accountID), .text(login.appID), .integer(now)], operation: "create the account")
                    try db.execute(
                        "INSERT INTO contacts (app_id, kind, value, account_id, verified_at) VALUES (?, ?, ?, ?, ?)",
                        [
                            .text(login.appID), .text(login.contact.kindName), .text(login.contact.value),
                            .text(accountID), .integer(now),
                        ], operation: "attach the contact to the account")
                    let keys = login.newWalletKeys
                    try db.execute(
                        """
                        INSERT INTO wallets (id, account_id, created_at, entropy_ciphertext, entropy_key_id,
                                             ethereum_address, solana_address)
                        VALUES (?, ?, ?, ?, ?, ?, ?)
                        """,
                        [
                            .text(walletID), .text(accountID), .integer(now),
                            keys.map { .blob($0.entropyCiphertext) } ?? .null,
                            keys.map { .text($0.entropyKeyID) } ?? .null,
                            keys.flatMap { $0.ethereumAddress }.map { .text($0) } ?? .null,
                            keys.flatMap { $0.solanaAddress }.map { .text($0) } ?? .null,
                        ], operation: "create the wallet")
                    // Codes sent before the account existed now count against it.
                    try db.execute(
                        """
                        UPDATE challenges SET account_key = ?
                        WHERE app_id = ? AND account_key = ? AND state = 'pending'
                        """,
                        [.text(accountID), .text(login.appID), .text(Self.contactKey(login.contact))],
                        operation: "move pending challenges to the new account")
                }

                let revokedElsewhere = try Self.storeLoginSession(
                    db, appID: login.appID, accountID: accountID, deviceID: login.deviceID, session: login.session,
                    now: login.now)
                return .loggedIn(
                    LoginRecord(
                        accountID: accountID, walletID: walletID, accountCreated: created,
                        revokedElsewhereCount: revokedElsewhere))
            }
        }
    }

    /// Revokes the unrevoked session holding this refresh-token hash as its current or previous one.
    @discardableResult
    public func revokeSession(appID: String, refreshHash: [UInt8], reason: String, now: Date) async throws(RainError)
        -> Bool
    {
        try await perform { db throws(RainError) in
            let changed = try db.execute(
                """
                UPDATE sessions SET revoked_at = ?, revoke_reason = ?
                WHERE app_id = ? AND (refresh_hash = ? OR previous_refresh_hash = ?) AND revoked_at IS NULL
                """,
                [.integer(now.unixMilliseconds), .text(reason), .text(appID), .blob(refreshHash), .blob(refreshHash)],
                operation: "revoke a session")
            return changed > 0
        }
    }

    /// Runs one refresh (see `AuthorityStore.refreshSession`) in one `BEGIN IMMEDIATE` transaction.
    public func refreshSession<Verdict: Sendable>(
        appID: String, refreshHash: [UInt8], now: Date,
        decide: @escaping @Sendable (RefreshCandidate?) -> (change: SessionRefreshChange, verdict: Verdict)
    ) async throws(RainError) -> Verdict {
        try await perform { db throws(RainError) in
            try db.transaction("refresh a session") { () throws(RainError) -> Verdict in
                let candidate = try Self.refreshCandidate(db, appID: appID, refreshHash: refreshHash)
                let (change, verdict) = decide(candidate)
                switch change {
                case .none:
                    break
                case .rotate(let rotation):
                    guard let candidate, candidate.generation == .current, candidate.session.revokedAt == nil else {
                        throw RainError(.internalError, "authority store: only a live current token can be rotated")
                    }
                    try Self.rotate(db, session: candidate.session, rotation: rotation)
                case .revoke(let reason):
                    guard let candidate else { break }
                    try db.execute(
                        "UPDATE sessions SET revoked_at = ?, revoke_reason = ? WHERE id = ? AND revoked_at IS NULL",
                        [.integer(now.unixMilliseconds), .text(reason), .text(candidate.session.id)],
                        operation: "revoke a session family")
                }
                return verdict
            }
        }
    }

    /// The session holding this access-token hash, with its account, wallet and contacts.
    public func accountAccess(appID: String, accessHash: [UInt8]) async throws(RainError) -> AccountAccess? {
        try await perform { db throws(RainError) in try Self.accountAccess(db, appID: appID, accessHash: accessHash) }
    }

    /// The session by access hash and the account's passkeys, in one trip to the store's queue.
    public func accountAccessWithPasskeys(appID: String, accessHash: [UInt8]) async throws(RainError)
        -> (access: AccountAccess, passkeys: [PasskeyCredentialRecord])?
    {
        try await perform { db throws(RainError) in try Self.accountAccessWithPasskeys(db, appID: appID, accessHash: accessHash) }
    }

    /// The session by access hash and the account's wallet, in one trip to the store's queue.
    public func accountAccessWithWallet(appID: String, accessHash: [UInt8]) async throws(RainError)
        -> (access: AccountAccess, wallet: WalletRecord?)?
    {
        try await perform { db throws(RainError) in try Self.accountAccessWithWallet(db, appID: appID, accessHash: accessHash) }
    }

    /// The reads of Account/Get, on either connection.
    static func accountAccessWithPasskeys(_ db: SQLiteConnection, appID: String, accessHash: [UInt8]) throws(RainError)
        -> (access: AccountAccess, passkeys: [PasskeyCredentialRecord])?
    {
        guard let access = try accountAccess(db, appID: appID, accessHash: accessHash) else { return nil }
        return (access, try passkeyCredentials(db, accountID: access.account.id))
    }

    /// The reads of Wallet/Get, on either connection.
    static func accountAccessWithWallet(_ db: SQLiteConnection, appID: String, accessHash: [UInt8]) throws(RainError)
        -> (access: AccountAccess, wallet: WalletRecord?)?
    {
        guard let access = try accountAccess(db, appID: appID, accessHash: accessHash) else { return nil }
        return (access, try wallet(db, accountID: access.account.id))
    }

    static func accountAccess(_ db: SQLiteConnection, appID: String, accessHash: [UInt8]) throws(RainError)
        -> AccountAccess?
    {
        let op = "look up a session by access token"
        let rows = try db.query(
            """
            SELECT \(StoreRecords.sessionColumns("s")), a.created_at, COALESCE(w.id, '')
            FROM sessions s JOIN accounts a ON a.id = s.account_id LEFT JOIN wallets w ON w.account_id = a.id
            WHERE s.app_id = ? AND s.access_hash = ?
            """,
            [.text(appID), .blob(accessHash)], operation: op)
        guard let row = rows.first else { return nil }
        let session = try StoreRecords.session(row, op)
        let account = AccountRecord(
            id: session.accountID, appID: session.appID,
            walletID: try row.text(StoreRecords.sessionColumnCount + 1, op),
            createdAt: Date(unixMilliseconds: try row.integer(StoreRecords.sessionColumnCount, op)))
        let contactsOp = "list the account's contacts"
        var contacts: [RainWalletContact] = []
        for contactRow in try db.query(
            """
            SELECT kind, value FROM contacts WHERE app_id = ? AND account_id = ?
            ORDER BY kind, verified_at, rowid
            """,
            [.text(session.appID), .text(session.accountID)], operation: contactsOp)
        {
            let kind = try contactRow.text(0, contactsOp)
            let value = try contactRow.text(1, contactsOp)
            contacts.append(try Self.contact(kind: kind, value: value, contactsOp))
        }
        return AccountAccess(session: session, account: account, contacts: contacts)
    }

    /// The account's sessions, oldest first.
    public func sessions(appID: String, accountID: String) async throws(RainError) -> [SessionRecord] {
        try await perform { db throws(RainError) in
            let op = "list the account's sessions"
            let rows = try db.query(
                """
                SELECT \(StoreRecords.sessionColumns("s")) FROM sessions s
                WHERE s.app_id = ? AND s.account_id = ? ORDER BY s.created_at, s.rowid
                """,
                [.text(appID), .text(accountID)], operation: op)
            var out: [SessionRecord] = []
            for row in rows { out.append(try StoreRecords.session(row, op)) }
            return out
        }
    }

    /// The wallet of `accountID`, with its key material, or nil when the account has none.
    public func wallet(accountID: String) async throws(RainError) -> WalletRecord? {
        try await perform { db throws(RainError) in try Self.wallet(db, accountID: accountID) }
    }

    static func wallet(_ db: SQLiteConnection, accountID: String) throws(RainError) -> WalletRecord? {
        let op = "read the account's wallet"
        let rows = try db.query(
            "SELECT \(StoreRecords.walletColumns) FROM wallets WHERE account_id = ?", [.text(accountID)], operation: op)
        guard let row = rows.first else { return nil }
        return try StoreRecords.wallet(row, op)
    }

    /// Every wallet that lacks its entropy or an address, oldest first.
    public func walletsMissingKeys() async throws(RainError) -> [WalletRecord] {
        try await perform { db throws(RainError) in
            let op = "find wallets without keys"
            var out: [WalletRecord] = []
            for row in try db.query(
                """
                SELECT \(StoreRecords.walletColumns) FROM wallets
                WHERE entropy_ciphertext IS NULL OR entropy_key_id IS NULL OR ethereum_address IS NULL
                   OR solana_address IS NULL
                ORDER BY created_at, rowid
                """, operation: op)
            {
                out.append(try StoreRecords.wallet(row, op))
            }
            return out
        }
    }

    /// Stores a wallet's keys in one statement, only if its entropy ciphertext is still
    /// `expectedCiphertext` (nil: still none), so two backfills never replace each other's entropy.
    @discardableResult
    public func storeWalletKeys(walletID: String, keys: WalletKeyMaterial, expectedCiphertext: [UInt8]?)
        async throws(RainError) -> Bool
    {
        try await perform { db throws(RainError) in
            let changed = try db.execute(
                """
                UPDATE wallets
                SET entropy_ciphertext = ?, entropy_key_id = ?, ethereum_address = ?, solana_address = ?
                WHERE id = ? AND entropy_ciphertext IS ?
                """,
                [
                    .blob(keys.entropyCiphertext), .text(keys.entropyKeyID),
                    keys.ethereumAddress.map { .text($0) } ?? .null, keys.solanaAddress.map { .text($0) } ?? .null,
                    .text(walletID), expectedCiphertext.map { .blob($0) } ?? .null,
                ], operation: "store a wallet's keys")
            return changed == 1
        }
    }

    /// Deletes old challenges, revoked sessions and old rotated-out refresh hashes, in one transaction.
    @discardableResult
    public func prune(challengesExpiredBefore: Date, sessionsRevokedBefore: Date, refreshTokensRetiredBefore: Date)
        async throws(RainError) -> PruneResult
    {
        try await perform { db throws(RainError) in
            try db.transaction("prune old challenges and sessions") { () throws(RainError) -> PruneResult in
                let challenges = try db.execute(
                    "DELETE FROM challenges WHERE expires_at < ?", [.integer(challengesExpiredBefore.unixMilliseconds)],
                    operation: "delete expired challenges")
                let ceremonies = try db.execute(
                    "DELETE FROM passkey_ceremonies WHERE expires_at < ?",
                    [.integer(challengesExpiredBefore.unixMilliseconds)], operation: "delete expired passkey ceremonies")
                // Counted before the sessions go: their retired hashes go with them (ON DELETE CASCADE).
                let retired = try db.execute(
                    "DELETE FROM retired_refresh_tokens WHERE retired_at < ?",
                    [.integer(refreshTokensRetiredBefore.unixMilliseconds)],
                    operation: "delete old rotated-out refresh hashes")
                let sessions = try db.execute(
                    "DELETE FROM sessions WHERE revoked_at IS NOT NULL AND revoked_at < ?",
                    [.integer(sessionsRevokedBefore.unixMilliseconds)], operation: "delete revoked sessions")
                return PruneResult(
                    challengesDeleted: challenges, sessionsDeleted: sessions, retiredRefreshTokensDeleted: retired,
                    passkeyCeremoniesDeleted: ceremonies)
            }
        }
    }

    /// Closes the database handle on the store's queue; later calls throw RAIN_502.
    public func close() async {
        // Dropping the connection on its queue closes the handle (SQLiteConnection.deinit).
        _ = try? await queue.runBlocking { () throws(RainError) in self.connection = nil }
        await reader.close()
    }

    // MARK: - Shared queries (called on the queue)

    static func contactKey(_ contact: RainWalletContact) -> String { "contact:\(contact.kindName):\(contact.value)" }

    static func accountID(_ db: SQLiteConnection, appID: String, contact: RainWalletContact) throws(RainError)
        -> String?
    {
        let op = "look up the contact's account"
        let rows = try db.query(
            "SELECT account_id FROM contacts WHERE app_id = ? AND kind = ? AND value = ?",
            [.text(appID), .text(contact.kindName), .text(contact.value)], operation: op)
        return try rows.first?.text(0, op)
    }

    /// The session holding `refreshHash` as its current, previous or an older refresh hash.
    private static func refreshCandidate(_ db: SQLiteConnection, appID: String, refreshHash: [UInt8])
        throws(RainError) -> RefreshCandidate?
    {
        let op = "look up a session by refresh token"
        let lookups: [(RefreshTokenGeneration, String)] = [
            (.current, "SELECT \(StoreRecords.sessionColumns("s")) FROM sessions s WHERE s.app_id = ? AND s.refresh_hash = ?"),
            (
                .previous,
                "SELECT \(StoreRecords.sessionColumns("s")) FROM sessions s WHERE s.app_id = ? AND s.previous_refresh_hash = ?"
            ),
            (
                .older,
                """
                SELECT \(StoreRecords.sessionColumns("s")) FROM retired_refresh_tokens r JOIN sessions s ON s.id = r.session_id
                WHERE s.app_id = ? AND r.refresh_hash = ?
                """
            ),
        ]
        for (generation, sql) in lookups {
            if let row = try db.query(sql, [.text(appID), .blob(refreshHash)], operation: op).first {
                return RefreshCandidate(session: try StoreRecords.session(row, op), generation: generation)
            }
        }
        return nil
    }

    /// Stores a rotation: previous → retired, current → previous, new hashes current.
    private static func rotate(_ db: SQLiteConnection, session: SessionRecord, rotation: SessionRotation)
        throws(RainError)
    {
        if let previous = session.previousRefreshHash {
            try db.execute(
                "INSERT INTO retired_refresh_tokens (refresh_hash, session_id, generation, retired_at) VALUES (?, ?, ?, ?)",
                [
                    .blob(previous), .text(session.id), .integer(Int64(session.refreshGeneration - 1)),
                    .integer((session.rotatedAt ?? session.createdAt).unixMilliseconds),
                ], operation: "keep the rotated-out refresh hash")
        }
        let changed = try db.execute(
            """
            UPDATE sessions
            SET previous_refresh_hash = refresh_hash, refresh_hash = ?, access_hash = ?, access_expires_at = ?,
                rotated_at = ?, refresh_generation = refresh_generation + 1
            WHERE id = ? AND refresh_hash = ? AND revoked_at IS NULL
            """,
            [
                .blob(rotation.refreshHash), .blob(rotation.accessHash),
                .integer(rotation.accessExpiresAt.unixMilliseconds), .integer(rotation.rotatedAt.unixMilliseconds),
                .text(session.id), .blob(session.refreshHash),
            ], operation: "rotate a session's tokens")
        guard changed == 1 else {
            throw RainError(.internalError, "authority store: cannot rotate a session's tokens: the session changed")
        }
    }

    static func contact(kind: String, value: String, _ op: String) throws(RainError) -> RainWalletContact {
        switch kind {
        case "email": return .email(value)
        case "phone": return .phone(value)
        default: throw RainError(.internalError, "authority store: cannot \(op): unknown contact kind")
        }
    }

    static func challenge(_ db: SQLiteConnection, id: String) throws(RainError) -> ChallengeRecord? {
        let op = "read a challenge"
        let rows = try db.query(
            """
            SELECT id, app_id, device_id, contact_kind, contact_value, account_key, code_hash, created_at, expires_at,
                   wrong_attempts, state, purpose, target_account_id
            FROM challenges WHERE id = ?
            """,
            [.text(id)], operation: op)
        guard let row = rows.first else { return nil }
        let contact = try Self.contact(kind: try row.text(3, op), value: try row.text(4, op), op)
        guard let state = ChallengeState(rawValue: try row.text(10, op)) else {
            throw RainError(.internalError, "authority store: cannot \(op): unknown challenge state")
        }
        guard let purpose = ChallengePurpose(rawValue: try row.text(11, op)) else {
            throw RainError(.internalError, "authority store: cannot \(op): unknown challenge purpose")
        }
        return ChallengeRecord(
            id: try row.text(0, op), appID: try row.text(1, op), deviceID: try row.text(2, op), contact: contact,
            accountKey: try row.text(5, op), codeHash: try row.blob(6, op),
            createdAt: Date(unixMilliseconds: try row.integer(7, op)),
            expiresAt: Date(unixMilliseconds: try row.integer(8, op)), wrongAttempts: Int(try row.integer(9, op)),
            state: state, purpose: purpose, targetAccountID: try row.optionalText(12, op))
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
    defer { close(fd) }
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

/// `StoreOperations` on SQLite: every use case runs in a `BEGIN IMMEDIATE` transaction, whose
/// write lock serializes it against every other writer, so no lock is ever taken here.
extension SQLiteConnection: StoreConnection {
    /// Runs shared SQL, its `$N` placeholders turned into SQLite's `?N`.
    func query(_ sql: String, values: [StoreValue], operation: String) throws(RainError) -> [SQLiteRow] {
        try query(StoreSQL.sqlitePlaceholders(sql), values.map(SQLiteValue.init), operation: operation)
    }

    /// Runs shared SQL, its `$N` placeholders turned into SQLite's `?N`.
    @discardableResult
    func execute(_ sql: String, values: [StoreValue], operation: String) throws(RainError) -> Int {
        try execute(StoreSQL.sqlitePlaceholders(sql), values.map(SQLiteValue.init), operation: operation)
    }

    /// SQLite's implicit insertion-ordered key.
    static var insertionOrder: String { "rowid" }

    /// SQLite sorts NULLs first in ascending order by default.
    static var nullsFirst: String { "" }

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
