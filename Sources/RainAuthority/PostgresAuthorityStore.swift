import Foundation
import RainCore

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
/// - the active-code limit: an advisory lock per device, contact and account key.
/// Serialization failures, deadlocks and unique violations run the transaction again (5 times at
/// most). Timestamps are `bigint` Unix milliseconds, as in SQLite, so `Date`s round-trip alike.
/// Schema migrations are numbered, recorded in `schema_version` and run under an advisory lock,
/// so two instances starting together never both migrate.
public final class PostgresAuthorityStore: AuthorityStore {
    let pool: PostgresConnectionPool

    /// `user@host:port/database` (never the password).
    public var target: String { pool.target }

    /// The newest schema version this build knows.
    public static var latestSchemaVersion: Int { migrations.last?.version ?? 0 }

    private init(pool: PostgresConnectionPool) {
        self.pool = pool
    }

    /// Connects `connections` sessions to `url` and migrates the schema to the latest version.
    /// - Parameter url: `postgres://USER[:PASSWORD]@HOST:PORT/DATABASE` (libpq's URI form).
    /// - Throws: RAIN_102 when the URL is malformed; RAIN_502 when the server cannot be reached, the
    ///   migration fails, or the database was migrated by a newer build.
    public static func open(url: String, connections: Int = 4) async throws(RainError) -> PostgresAuthorityStore {
        _ = try PostgresConnection.describe(url: url)
        let pool = try await DispatchQueue(label: "rain.authority.postgres.open").runBlocking {
            () throws(RainError) -> PostgresConnectionPool in
            var opened: [PostgresConnection] = []
            for index in 0..<max(1, connections) {
                let connection = try PostgresConnection(url: url)
                if index == 0 { try migrate(connection) }
                opened.append(connection)
            }
            // Each connection is handed to its own queue here and used only there from now on.
            return PostgresConnectionPool(connections: opened)
        }
        return PostgresAuthorityStore(pool: pool)
    }

    // MARK: - Migrations

    struct Migration {
        var version: Int
        var statements: [String]
    }

    /// Numbered migrations, applied in order, each exactly once. Never edit a released one: add
    /// the next number. Version 1 is the schema of SQLite version 6 (issues 1–6), with `seq`
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
            ])
    ]

    /// The advisory lock key every migration runs under (any fixed number; "rainmigr").
    static let migrationLockKey: Int64 = 0x7261_696E_6D69_6772

    static func migrate(_ db: PostgresConnection) throws(RainError) {
        try db.transaction("migrate the schema", attempts: 1) { () throws(RainError) in
            // Held until COMMIT: a second instance starting now waits here, then finds the
            // migrations recorded and applies nothing.
            _ = try db.query(
                "SELECT pg_advisory_xact_lock($1)", [.integer(migrationLockKey)], operation: "lock the schema")
            try db.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
                operation: "create the schema_version table")
            let current = try currentVersion(db)
            if current > latestSchemaVersion {
                throw RainError(
                    .internalError,
                    "authority store: the PostgreSQL database \(db.target) has schema version \(current), newer than "
                        + "this build supports (\(latestSchemaVersion)); run a newer rainwalletd")
            }
            let now = Date().unixMilliseconds
            for migration in migrations where migration.version > current {
                for statement in migration.statements {
                    try db.execute(statement, operation: "apply schema migration \(migration.version)")
                }
                try db.execute(
                    "INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)",
                    [.integer(Int64(migration.version)), .integer(now)],
                    operation: "record schema migration \(migration.version)")
            }
        }
    }

    static func currentVersion(_ db: PostgresConnection) throws(RainError) -> Int {
        let op = "read the schema version"
        let rows = try db.query("SELECT COALESCE(MAX(version), 0)::bigint FROM schema_version", operation: op)
        guard let row = rows.first else { return 0 }
        return Int(try row.integer(0, op))
    }

    // MARK: - Running on a connection

    /// Runs `body` with a pooled connection on that connection's queue.
    func perform<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) throws(RainError) -> T
    ) async throws(RainError) -> T {
        try await pool.withConnection(body)
    }

    /// Takes a transaction-scoped advisory lock named by `parts` (hashed to 64 bits by the server).
    static func lock(_ db: PostgresConnection, _ parts: String...) throws(RainError) {
        _ = try db.query(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [.text(parts.joined(separator: "\u{1F}"))],
            operation: "take a lock")
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
                WHERE c.app_id = $1 AND c.kind = $2 AND c.value = $3
                """,
                [.text(appID), .text(contact.kindName), .text(contact.value)], operation: op)
            guard let row = rows.first else { return nil }
            return AccountRecord(
                id: try row.text(0, op), appID: try row.text(1, op), walletID: try row.text(2, op),
                createdAt: Date(unixMilliseconds: try row.integer(3, op)))
        }
    }

    /// Records a pending challenge unless a send limit refuses it (see
    /// `AuthorityStore.insertChallenge`), in one transaction holding the device's, the contact's
    /// and the account key's advisory locks from the count to the insert, so concurrent sends on
    /// any instance never both take the last free slot.
    public func insertChallenge(_ challenge: NewChallenge, maxActivePerAccount: Int, limits: CodeSendLimits)
        async throws(RainError) -> ChallengeInsertionOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("record a login challenge") { () throws(RainError) -> ChallengeInsertionOutcome in
                // Always in this order (device, contact, account key), so two sends never deadlock.
                try Self.lock(db, "device", challenge.appID, challenge.deviceID)
                try Self.lock(db, "contact", challenge.appID, Self.contactKey(challenge.contact))
                let accountKey: String
                if let target = challenge.targetAccountID {
                    accountKey = target
                } else {
                    accountKey =
                        try Self.accountID(db, appID: challenge.appID, contact: challenge.contact)
                        ?? Self.contactKey(challenge.contact)
                }
                try Self.lock(db, "account", challenge.appID, accountKey)
                if let refusal = try Self.sendLimitRefusal(db, challenge, accountKey: accountKey, limits: limits) {
                    return .limited(refusal.limit, retryAfter: refusal.retryAfter)
                }
                var retired: [String] = []

                let deviceOp = "retire the device's pending challenges"
                for row in try db.query(
                    """
                    UPDATE challenges SET state = 'retired'
                    WHERE app_id = $1 AND device_id = $2 AND purpose = $3 AND state = 'pending'
                    RETURNING id
                    """,
                    [.text(challenge.appID), .text(challenge.deviceID), .text(challenge.purpose.rawValue)],
                    operation: deviceOp)
                {
                    retired.append(try row.text(0, deviceOp))
                }

                let activeOp = "count the account's active challenges"
                let active = try db.query(
                    """
                    SELECT id FROM challenges
                    WHERE app_id = $1 AND account_key = $2 AND state = 'pending' AND expires_at > $3
                    ORDER BY created_at, seq
                    FOR UPDATE
                    """,
                    [.text(challenge.appID), .text(accountKey), .integer(challenge.createdAt.unixMilliseconds)],
                    operation: activeOp)
                let excess = active.count - max(1, maxActivePerAccount) + 1
                if excess > 0 {
                    for row in active.prefix(excess) {
                        let id = try row.text(0, activeOp)
                        try db.execute(
                            "UPDATE challenges SET state = 'retired' WHERE id = $1 AND state = 'pending'", [.text(id)],
                            operation: "retire the account's oldest challenge")
                        retired.append(id)
                    }
                }

                try db.execute(
                    """
                    INSERT INTO challenges (id, app_id, device_id, contact_kind, contact_value, account_key, code_hash,
                                            created_at, expires_at, wrong_attempts, state, purpose, target_account_id)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, 'pending', $10, $11)
                    """,
                    [
                        .text(challenge.id), .text(challenge.appID), .text(challenge.deviceID),
                        .text(challenge.contact.kindName), .text(challenge.contact.value), .text(accountKey),
                        .bytes(challenge.codeHash), .integer(challenge.createdAt.unixMilliseconds),
                        .integer(challenge.expiresAt.unixMilliseconds), .text(challenge.purpose.rawValue),
                        challenge.targetAccountID.map { .text($0) } ?? .null,
                    ], operation: "insert a login challenge")
                return .inserted(ChallengeInsertion(accountKey: accountKey, retiredChallengeIDs: retired))
            }
        }
    }

    /// The send limit a new challenge would break, with the earliest time it would pass, or nil
    /// (the same counting as `SQLiteAuthorityStore.sendLimitRefusal`).
    static func sendLimitRefusal(
        _ db: PostgresConnection, _ challenge: NewChallenge, accountKey: String, limits: CodeSendLimits
    ) throws(RainError) -> (limit: CodeSendLimit, retryAfter: Date)? {
        let now = challenge.createdAt.unixMilliseconds
        var refusals: [(limit: CodeSendLimit, retryAfter: Int64)] = []
        let contactFilter = "app_id = $1 AND contact_kind = $2 AND contact_value = $3"
        let contactArguments: [PostgresValue] = [
            .text(challenge.appID), .text(challenge.contact.kindName), .text(challenge.contact.value),
        ]
        if limits.contactCooldown > .zero {
            let op = "find the contact's last code"
            let rows = try db.query(
                "SELECT MAX(created_at) FROM challenges WHERE \(contactFilter) AND created_at <= $4",
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
            db, filter: "app_id = $1 AND account_key = $2", arguments: [.text(challenge.appID), .text(accountKey)],
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
        _ db: PostgresConnection, filter: String, arguments: [PostgresValue], now: Int64, window: Duration,
        maxSends: Int, operation op: String
    ) throws(RainError) -> Int64? {
        guard window > .zero, maxSends < Int.max else { return nil }
        let windowMilliseconds = window.milliseconds
        let next = arguments.count + 1
        let rows = try db.query(
            """
            SELECT created_at FROM challenges WHERE \(filter) AND created_at > $\(next) AND created_at <= $\(next + 1)
            ORDER BY created_at
            """,
            arguments + [.integer(now - windowMilliseconds), .integer(now)], operation: op)
        let allowed = max(0, maxSends)
        guard rows.count >= allowed else { return nil }
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
                "UPDATE challenges SET state = 'retired' WHERE id = $1 AND state = 'pending'", [.text(id)],
                operation: "retire a challenge")
        }
    }

    /// Counts a wrong code, locking at `maxWrongAttempts`: one conditional `UPDATE`, which the
    /// challenge's row lock serializes, so concurrent wrong guesses are all counted.
    public func recordWrongAttempt(challengeID: String, maxWrongAttempts: Int, now: Date) async throws(RainError)
        -> ChallengeRecord?
    {
        try await perform { db throws(RainError) in
            try db.transaction("count a wrong code") { () throws(RainError) -> ChallengeRecord? in
                try db.execute(
                    """
                    UPDATE challenges
                    SET wrong_attempts = wrong_attempts + 1,
                        state = CASE WHEN wrong_attempts + 1 >= $1 THEN 'locked' ELSE state END
                    WHERE id = $2 AND state = 'pending' AND expires_at > $3
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
                // Logins of one contact run one at a time: two first logins would otherwise lock
                // each other's challenge rows and contact key (a deadlock, not just a retry).
                try Self.lock(db, "contact", login.appID, Self.contactKey(login.contact))
                let now = login.now.unixMilliseconds
                let used = try db.execute(
                    """
                    UPDATE challenges SET state = 'used'
                    WHERE id = $1 AND app_id = $2 AND device_id = $3 AND purpose = 'login' AND state = 'pending'
                      AND expires_at > $4
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
                        "SELECT id FROM wallets WHERE account_id = $1", [.text(existing)], operation: op)
                    guard let row = rows.first else {
                        throw RainError(.unavailable, "the account's wallet is unavailable")
                    }
                    accountID = existing
                    walletID = try row.text(0, op)
                    created = false
                    try db.execute(
                        """
                        UPDATE contacts SET verified_at = COALESCE(verified_at, $1)
                        WHERE app_id = $2 AND kind = $3 AND value = $4
                        """,
                        [.integer(now), .text(login.appID), .text(login.contact.kindName), .text(login.contact.value)],
                        operation: "mark the contact verified")
                } else {
                    accountID = login.newAccountID
                    walletID = login.newWalletID
                    created = true
                    try db.execute(
                        "INSERT INTO accounts (id, app_id, created_at) VALUES ($1, $2, $3)",
                        [.text(accountID), .text(login.appID), .integer(now)], operation: "create the account")
                    // A concurrent first login of the same contact makes this a unique violation:
                    // the transaction runs again and takes the branch above.
                    try db.execute(
                        "INSERT INTO contacts (app_id, kind, value, account_id, verified_at) VALUES ($1, $2, $3, $4, $5)",
                        [
                            .text(login.appID), .text(login.contact.kindName), .text(login.contact.value),
                            .text(accountID), .integer(now),
                        ], operation: "attach the contact to the account")
                    let keys = login.newWalletKeys
                    try db.execute(
                        """
                        INSERT INTO wallets (id, account_id, created_at, entropy_ciphertext, entropy_key_id,
                                             ethereum_address, solana_address)
                        VALUES ($1, $2, $3, $4, $5, $6, $7)
                        """,
                        [
                            .text(walletID), .text(accountID), .integer(now),
                            keys.map { .bytes($0.entropyCiphertext) } ?? .null,
                            keys.map { .text($0.entropyKeyID) } ?? .null,
                            keys.flatMap { $0.ethereumAddress }.map { .text($0) } ?? .null,
                            keys.flatMap { $0.solanaAddress }.map { .text($0) } ?? .null,
                        ], operation: "create the wallet")
                    try db.execute(
                        """
                        UPDATE challenges SET account_key = $1
                        WHERE app_id = $2 AND account_key = $3 AND state = 'pending'
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
                UPDATE sessions SET revoked_at = $1, revoke_reason = $2
                WHERE app_id = $3 AND (refresh_hash = $4 OR previous_refresh_hash = $4) AND revoked_at IS NULL
                """,
                [.integer(now.unixMilliseconds), .text(reason), .text(appID), .bytes(refreshHash)],
                operation: "revoke a session")
            return changed > 0
        }
    }

    /// Runs one refresh (see `AuthorityStore.refreshSession`) in one transaction that holds the
    /// session row's lock (`FOR UPDATE`) from the lookup to the commit.
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
                        "UPDATE sessions SET revoked_at = $1, revoke_reason = $2 WHERE id = $3 AND revoked_at IS NULL",
                        [.integer(now.unixMilliseconds), .text(reason), .text(candidate.session.id)],
                        operation: "revoke a session family")
                }
                return verdict
            }
        }
    }

    /// The session holding this access-token hash, with its account, wallet and contacts.
    public func accountAccess(appID: String, accessHash: [UInt8]) async throws(RainError) -> AccountAccess? {
        try await perform { db throws(RainError) in
            let op = "look up a session by access token"
            let rows = try db.query(
                """
                SELECT \(StoreRecords.sessionColumns("s")), a.created_at, COALESCE(w.id, '')
                FROM sessions s JOIN accounts a ON a.id = s.account_id LEFT JOIN wallets w ON w.account_id = a.id
                WHERE s.app_id = $1 AND s.access_hash = $2
                """,
                [.text(appID), .bytes(accessHash)], operation: op)
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
                SELECT kind, value FROM contacts WHERE app_id = $1 AND account_id = $2
                ORDER BY kind, verified_at NULLS FIRST, seq
                """,
                [.text(session.appID), .text(session.accountID)], operation: contactsOp)
            {
                let kind = try contactRow.text(0, contactsOp)
                let value = try contactRow.text(1, contactsOp)
                contacts.append(try SQLiteAuthorityStore.contact(kind: kind, value: value, contactsOp))
            }
            return AccountAccess(session: session, account: account, contacts: contacts)
        }
    }

    /// The account's sessions, oldest first.
    public func sessions(appID: String, accountID: String) async throws(RainError) -> [SessionRecord] {
        try await perform { db throws(RainError) in
            let op = "list the account's sessions"
            let rows = try db.query(
                """
                SELECT \(StoreRecords.sessionColumns("s")) FROM sessions s
                WHERE s.app_id = $1 AND s.account_id = $2 ORDER BY s.created_at, s.seq
                """,
                [.text(appID), .text(accountID)], operation: op)
            var out: [SessionRecord] = []
            for row in rows { out.append(try StoreRecords.session(row, op)) }
            return out
        }
    }

    /// The wallet of `accountID`, with its key material, or nil when the account has none.
    public func wallet(accountID: String) async throws(RainError) -> WalletRecord? {
        try await perform { db throws(RainError) in
            let op = "read the account's wallet"
            let rows = try db.query(
                "SELECT \(StoreRecords.walletColumns) FROM wallets WHERE account_id = $1", [.text(accountID)], operation: op)
            guard let row = rows.first else { return nil }
            return try StoreRecords.wallet(row, op)
        }
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
                ORDER BY created_at, seq
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
                SET entropy_ciphertext = $1, entropy_key_id = $2, ethereum_address = $3, solana_address = $4
                WHERE id = $5 AND entropy_ciphertext IS NOT DISTINCT FROM $6::bytea
                """,
                [
                    .bytes(keys.entropyCiphertext), .text(keys.entropyKeyID),
                    keys.ethereumAddress.map { .text($0) } ?? .null, keys.solanaAddress.map { .text($0) } ?? .null,
                    .text(walletID), expectedCiphertext.map { .bytes($0) } ?? .null,
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
                    "DELETE FROM challenges WHERE expires_at < $1",
                    [.integer(challengesExpiredBefore.unixMilliseconds)], operation: "delete expired challenges")
                let ceremonies = try db.execute(
                    "DELETE FROM passkey_ceremonies WHERE expires_at < $1",
                    [.integer(challengesExpiredBefore.unixMilliseconds)], operation: "delete expired passkey ceremonies")
                let retired = try db.execute(
                    "DELETE FROM retired_refresh_tokens WHERE retired_at < $1",
                    [.integer(refreshTokensRetiredBefore.unixMilliseconds)],
                    operation: "delete old rotated-out refresh hashes")
                let sessions = try db.execute(
                    "DELETE FROM sessions WHERE revoked_at IS NOT NULL AND revoked_at < $1",
                    [.integer(sessionsRevokedBefore.unixMilliseconds)], operation: "delete revoked sessions")
                return PruneResult(
                    challengesDeleted: challenges, sessionsDeleted: sessions, retiredRefreshTokensDeleted: retired,
                    passkeyCeremoniesDeleted: ceremonies)
            }
        }
    }

    /// Closes every connection; later calls throw RAIN_502.
    public func close() async {
        await pool.close()
    }

    // MARK: - Shared queries (called on a connection's queue)

    static func contactKey(_ contact: RainWalletContact) -> String { SQLiteAuthorityStore.contactKey(contact) }

    static func accountID(_ db: PostgresConnection, appID: String, contact: RainWalletContact) throws(RainError)
        -> String?
    {
        let op = "look up the contact's account"
        let rows = try db.query(
            "SELECT account_id FROM contacts WHERE app_id = $1 AND kind = $2 AND value = $3",
            [.text(appID), .text(contact.kindName), .text(contact.value)], operation: op)
        return try rows.first?.text(0, op)
    }

    /// The session holding `refreshHash` as its current, previous or an older refresh hash, its row
    /// locked until the transaction ends. A refresh that waited for another one's lock re-reads the
    /// row as committed: a token rotated meanwhile no longer matches as current, and the next
    /// lookup finds it as the previous one.
    private static func refreshCandidate(_ db: PostgresConnection, appID: String, refreshHash: [UInt8])
        throws(RainError) -> RefreshCandidate?
    {
        let op = "look up a session by refresh token"
        let lookups: [(RefreshTokenGeneration, String)] = [
            (
                .current,
                "SELECT \(StoreRecords.sessionColumns("s")) FROM sessions s WHERE s.app_id = $1 AND s.refresh_hash = $2 FOR UPDATE"
            ),
            (
                .previous,
                """
                SELECT \(StoreRecords.sessionColumns("s")) FROM sessions s WHERE s.app_id = $1 AND s.previous_refresh_hash = $2
                FOR UPDATE
                """
            ),
            (
                .older,
                """
                SELECT \(StoreRecords.sessionColumns("s")) FROM retired_refresh_tokens r JOIN sessions s ON s.id = r.session_id
                WHERE s.app_id = $1 AND r.refresh_hash = $2 FOR UPDATE OF s
                """
            ),
        ]
        for (generation, sql) in lookups {
            if let row = try db.query(sql, [.text(appID), .bytes(refreshHash)], operation: op).first {
                return RefreshCandidate(session: try StoreRecords.session(row, op), generation: generation)
            }
        }
        return nil
    }

    private static func rotate(_ db: PostgresConnection, session: SessionRecord, rotation: SessionRotation)
        throws(RainError)
    {
        if let previous = session.previousRefreshHash {
            try db.execute(
                """
                INSERT INTO retired_refresh_tokens (refresh_hash, session_id, generation, retired_at)
                VALUES ($1, $2, $3, $4)
                """,
                [
                    .bytes(previous), .text(session.id), .integer(Int64(session.refreshGeneration - 1)),
                    .integer((session.rotatedAt ?? session.createdAt).unixMilliseconds),
                ], operation: "keep the rotated-out refresh hash")
        }
        let changed = try db.execute(
            """
            UPDATE sessions
            SET previous_refresh_hash = refresh_hash, refresh_hash = $1, access_hash = $2, access_expires_at = $3,
                rotated_at = $4, refresh_generation = refresh_generation + 1
            WHERE id = $5 AND refresh_hash = $6 AND revoked_at IS NULL
            """,
            [
                .bytes(rotation.refreshHash), .bytes(rotation.accessHash),
                .integer(rotation.accessExpiresAt.unixMilliseconds), .integer(rotation.rotatedAt.unixMilliseconds),
                .text(session.id), .bytes(session.refreshHash),
            ], operation: "rotate a session's tokens")
        guard changed == 1 else {
            throw RainError(.internalError, "authority store: cannot rotate a session's tokens: the session changed")
        }
    }

    static func challenge(_ db: PostgresConnection, id: String) throws(RainError) -> ChallengeRecord? {
        let op = "read a challenge"
        let rows = try db.query(
            """
            SELECT id, app_id, device_id, contact_kind, contact_value, account_key, code_hash, created_at, expires_at,
                   wrong_attempts, state, purpose, target_account_id
            FROM challenges WHERE id = $1
            """,
            [.text(id)], operation: op)
        guard let row = rows.first else { return nil }
        let contact = try SQLiteAuthorityStore.contact(kind: try row.text(3, op), value: try row.text(4, op), op)
        guard let state = ChallengeState(rawValue: try row.text(10, op)) else {
            throw RainError(.internalError, "authority store: cannot \(op): unknown challenge state")
        }
        guard let purpose = ChallengePurpose(rawValue: try row.text(11, op)) else {
            throw RainError(.internalError, "authority store: cannot \(op): unknown challenge purpose")
        }
        return ChallengeRecord(
            id: try row.text(0, op), appID: try row.text(1, op), deviceID: try row.text(2, op), contact: contact,
            accountKey: try row.text(5, op), codeHash: try row.bytes(6, op),
            createdAt: Date(unixMilliseconds: try row.integer(7, op)),
            expiresAt: Date(unixMilliseconds: try row.integer(8, op)), wrongAttempts: Int(try row.integer(9, op)),
            state: state, purpose: purpose, targetAccountID: try row.optionalText(12, op))
    }

    /// A login's session: locks the account row (so logins of one account run one at a time and
    /// exactly one device ends up live), revokes the account's sessions on other devices
    /// (`revoked_elsewhere`) and this device's older ones (`replaced`), then stores the new one.
    /// - Returns: how many sessions on other devices were revoked.
    static func storeLoginSession(
        _ db: PostgresConnection, appID: String, accountID: String, deviceID: String, session: NewSession,
        now date: Date
    ) throws(RainError) -> Int {
        let now = date.unixMilliseconds
        _ = try db.query(
            "SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [.text(accountID)], operation: "lock the account")
        let revokedElsewhere = try db.execute(
            """
            UPDATE sessions SET revoked_at = $1, revoke_reason = $2
            WHERE app_id = $3 AND account_id = $4 AND device_id <> $5 AND revoked_at IS NULL
            """,
            [
                .integer(now), .text(SessionRevokeReason.revokedElsewhere), .text(appID), .text(accountID),
                .text(deviceID),
            ], operation: "revoke the account's sessions on other devices")
        try db.execute(
            """
            UPDATE sessions SET revoked_at = $1, revoke_reason = $2
            WHERE app_id = $3 AND account_id = $4 AND device_id = $5 AND revoked_at IS NULL
            """,
            [.integer(now), .text(SessionRevokeReason.replaced), .text(appID), .text(accountID), .text(deviceID)],
            operation: "replace the device's older sessions")
        try db.execute(
            """
            INSERT INTO sessions (id, app_id, account_id, device_id, access_hash, refresh_hash,
                                  access_expires_at, created_at, device_public_key)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            """,
            [
                .text(session.id), .text(appID), .text(accountID), .text(deviceID), .bytes(session.accessHash),
                .bytes(session.refreshHash), .integer(session.accessExpiresAt.unixMilliseconds), .integer(now),
                session.devicePublicKey.map { .bytes($0) } ?? .null,
            ], operation: "store the session")
        return revokedElsewhere
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

/// `StoreOperations` on PostgreSQL: the row locks and advisory locks that give each use case's
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
