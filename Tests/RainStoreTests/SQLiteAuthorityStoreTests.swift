import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

@Suite("SQLite authority store")
struct SQLiteAuthorityStoreTests {
    @Test("a new store is at the latest schema version, in WAL mode, with a 0600 file")
    func freshStore() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try await SQLiteAuthorityStore.open(stateDirectory: directory)
        #expect(try await store.schemaVersion() == SQLiteAuthorityStore.latestSchemaVersion)
        #expect(SQLiteAuthorityStore.latestSchemaVersion >= 1)
        #expect(store.path == directory + "/authority.sqlite3")
        var info = stat()
        #expect(stat(store.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        for suffix in ["-wal", "-shm"] {
            var sidecar = stat()
            #expect(stat(store.path + suffix, &sidecar) == 0, "\(suffix) exists")
            #expect(sidecar.st_mode & 0o777 == 0o600, "\(suffix) mode")
        }
        await store.close()
    }

    @Test("a database from a newer build that records no reader version is refused with RAIN_102 schema_too_new")
    func newerSchemaRefused() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try await SQLiteAuthorityStore.open(stateDirectory: directory)
        await store.close()
        do {
            let connection = try SQLiteConnection(path: directory + "/authority.sqlite3")
            try connection.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", [.integer(999), .integer(0)],
                operation: "plant a future version")
        }
        let error = try #require(await rainError { _ = try await SQLiteAuthorityStore.open(stateDirectory: directory) })
        #expect(error.code == .invalidArgument)
        #expect(error.details.reason == SchemaCompatibility.tooNewReason)
    }

    @Test("a damaged or foreign database file is refused with RAIN_502 naming the file and what to do")
    func damagedFileRefused() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/authority.sqlite3"
        for contents in [
            Array("not a database at all, just text".utf8),
            Array("SQLite format 3\u{0}".utf8) + [UInt8](repeating: 0xA5, count: 4000),
        ] {
            #expect(
                FileManager.default.createFile(atPath: path, contents: Data(contents), attributes: [.posixPermissions: 0o600]))
            let error = try #require(await rainError { _ = try await SQLiteAuthorityStore.open(stateDirectory: directory) })
            #expect(error.code == .internalError)
            #expect(error.message.contains(path))
            #expect(error.message.contains("restore the file from a backup"))
            // Nothing was written over it: the file is as it was.
            #expect(FileManager.default.contents(atPath: path) == Data(contents))
        }
    }

    @Test("a version-1 database upgrades to the latest version; its sessions are unbound and never refresh")
    func migrateFromVersion1() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/authority.sqlite3"
        let clock = ManualClock()
        let keys = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 7, count: 32)))
        let now = clock.now.unixMilliseconds
        do {
            let db = try SQLiteConnection(path: path)
            for statement in try ReleasedSQLiteSchema.v1() { try db.execute(statement, operation: "create schema v1") }
            try db.execute(
                "INSERT INTO accounts (id, app_id, created_at) VALUES ('acct_old', 'app', ?)", [.integer(now)],
                operation: "insert")
            try db.execute(
                "INSERT INTO contacts VALUES ('app', 'email', 'old@example.com', 'acct_old', ?)", [.integer(now)],
                operation: "insert")
            try db.execute(
                "INSERT INTO wallets (id, account_id, created_at) VALUES ('wal_old', 'acct_old', ?)", [.integer(now)],
                operation: "insert")
            try db.execute(
                """
                INSERT INTO sessions (id, app_id, account_id, device_id, access_hash, refresh_hash, access_expires_at,
                                      created_at)
                VALUES ('ses_old', 'app', 'acct_old', 'dev', ?, ?, ?, ?)
                """,
                [
                    .blob(keys.tokenHash("rwa_old")), .blob(keys.tokenHash("rwr_old")), .integer(now + 900_000),
                    .integer(now),
                ], operation: "insert")
        }

        let store = try await SQLiteAuthorityStore.open(path: path)
        // 11: idempotent_logins, then its kind column; 12: sms_slots; 13: code_guesses; 14: the request hash;
        // 15: audit_anchors; 16: store_key_check; 17: the passkeys' kind.
        #expect(try await store.schemaVersion() == 17)
        #expect(SQLiteAuthorityStore.latestSchemaVersion == 17)
        let session = try #require(try await store.sessions(appID: "app", accountID: "acct_old").first)
        #expect(session.id == "ses_old")
        #expect(session.devicePublicKey == nil)
        #expect(session.previousRefreshHash == nil)
        #expect(session.rotatedAt == nil)
        #expect(session.refreshGeneration == 0)
        let tables = try await store.dumpAllRows()
        #expect(tables["schema_version"]?.count == SQLiteAuthorityStore.latestSchemaVersion)
        #expect(tables["retired_refresh_tokens"]?.isEmpty == true)

        let authority = EmbeddedAuthority(
            store: store, keys: keys, clock: clock, sender: CapturingCodeSender(), outbox: nil,
            logger: Logger(label: "test", sink: CapturingLogSink()))
        // A version-1 session has no device key, so no call can use its tokens.
        let unbound = await rainError { _ = try await authority.accountInfo(appID: "app", accessToken: "rwa_old") }
        #expect(unbound?.code == .sessionExpired)
        #expect(unbound?.details.reason == "device_unbound")
        let error = try #require(
            await rainError {
                _ = try await authority.refreshSession(RefreshRequest(appID: "app", deviceID: "dev", refreshToken: "rwr_old"))
            })
        #expect(error.code == .sessionExpired)
        #expect(error.details.reason == "device_unbound")
        try await authority.revokeSession(appID: "app", refreshToken: "rwr_old")
        #expect(try await store.sessions(appID: "app", accountID: "acct_old").first?.revokeReason == "logout")
        await store.close()

        // Reopening runs nothing again.
        let reopened = try await SQLiteAuthorityStore.open(path: path)
        #expect(try await reopened.dumpAllRows()["schema_version"]?.count == SQLiteAuthorityStore.latestSchemaVersion)
        await reopened.close()
    }

    @Test("the wrapper binds every value type and reads it back unchanged")
    func bindAndRead() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let db = try SQLiteConnection(path: directory + "/t.sqlite3")
        try db.execute("CREATE TABLE t (a, b, c, d, e, f)", operation: "create")
        let values: [SQLiteValue] = [
            .integer(-42), .real(1.5), .text("x'); DROP TABLE t; --\u{0}é"), .blob([0, 1, 2, 255]), .null, .blob([]),
        ]
        try db.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", values, operation: "insert")
        let rows = try db.query("SELECT a, b, c, d, e, f FROM t", operation: "select")
        #expect(rows.count == 1)
        #expect(rows.first?.values == values)
    }

    @Test("prepared statements are reused with fresh bindings, and the cache stops growing at its limit")
    func statementCache() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let db = try SQLiteConnection(path: directory + "/t.sqlite3")
        // One statement, run with and then without its parameter: a reused statement that kept its
        // old binding would answer 5 the second time instead of NULL.
        let sql = "SELECT ?1 IS NULL, ?1"
        #expect(try db.query(sql, [.integer(5)], operation: "bound").first?.values == [.integer(0), .integer(5)])
        #expect(try db.query(sql, operation: "unbound").first?.values == [.integer(1), .null])
        #expect(db.cachedStatementCount == 1)
        // Distinct statements past the limit still run (prepared and finalized each time).
        let limit = SQLiteConnection.statementCacheLimit
        for i in 0..<(limit + 20) {
            #expect(try db.query("SELECT \(i)", operation: "distinct").first?.values == [.integer(Int64(i))])
        }
        #expect(db.cachedStatementCount == limit)
        db.clearStatementCache()
        #expect(db.cachedStatementCount == 0)
        #expect(try db.query(sql, [.text("x")], operation: "after clearing").first?.values == [.integer(0), .text("x")])
    }

    @Test("shared SQL's $N placeholders become SQLite's ?N, and nothing else changes")
    func placeholderTranslation() {
        #expect(StoreSQL.sqlitePlaceholders("a = $1 AND b = $2") == "a = ?1 AND b = ?2")
        #expect(StoreSQL.sqlitePlaceholders("x IN ($10, $4, $10)") == "x IN (?10, ?4, ?10)")
        #expect(StoreSQL.sqlitePlaceholders("$1") == "?1")
        #expect(StoreSQL.sqlitePlaceholders("'$x' || $ || a$") == "'$x' || $ || a$")
        #expect(StoreSQL.sqlitePlaceholders("state = 'pending' AND b = ?") == "state = 'pending' AND b = ?")
        #expect(StoreSQL.sqlitePlaceholders("é $3 ü") == "é ?3 ü")
        #expect(StoreSQL.sqlitePlaceholders("") == "")
    }

    @Test("shared statements bind by number, map bytes and booleans, and stay prepared")
    func sharedStatements() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let db = try SQLiteConnection(path: directory + "/t.sqlite3")
        let sql = "SELECT $2, $1, $2, $3, $4, $5"
        let values: [StoreValue] = [.integer(7), .text("b"), .bytes([1, 2]), .boolean(true), .boolean(false)]
        for _ in 0..<2 {
            let rows = try db.query(sql, values: values, operation: "shared")
            #expect(
                rows.first?.values == [.text("b"), .integer(7), .text("b"), .blob([1, 2]), .integer(1), .integer(0)])
        }
        #expect(db.cachedStatementCount == 1)
    }

    @Test("the shared use cases run the same statements every time, so the cache stops growing")
    func sharedUseCasesReuseStatements() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try await SQLiteAuthorityStore.open(stateDirectory: directory)
        func round() async throws {
            _ = try await store.account(appID: "app", contact: .email("a@example.com"))
            _ = try await store.challenge(id: "ch_1")
            _ = try await store.sessions(appID: "app", accountID: "acct_1")
            _ = try await store.walletsMissingKeys()
            _ = try await store.passkeyCredentials(accountID: "acct_1")
            _ = try await store.refreshSession(appID: "app", refreshHash: [1], now: Date()) { _ in (.none, 0) }
            _ = try await store.prune(
                challengesExpiredBefore: Date(), sessionsRevokedBefore: Date(), refreshTokensRetiredBefore: Date())
        }
        try await round()
        let afterFirst = try await store.perform { db throws(RainError) in db.cachedStatementCount }
        try await round()
        #expect(afterFirst > 0)
        let afterSecond = try await store.perform { db throws(RainError) in db.cachedStatementCount }
        #expect(afterSecond == afterFirst)
        await store.close()
    }

    @Test("a new store keeps none of its migrations' statements prepared")
    func migrationsLeaveTheCacheEmpty() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try await SQLiteAuthorityStore.open(stateDirectory: directory)
        let cachedStatements = try await store.perform { db throws(RainError) in db.cachedStatementCount }
        #expect(cachedStatements == 0)
        await store.close()
    }

    @Test("a failing statement is RAIN_502 naming the operation, never the bound values")
    func failureMessage() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let db = try SQLiteConnection(path: directory + "/t.sqlite3")
        try db.execute("CREATE TABLE t (a TEXT PRIMARY KEY)", operation: "create")
        try db.execute("INSERT INTO t VALUES (?)", [.text("secret-value")], operation: "insert")
        let error = try #require(
            throws: RainError.self,
            performing: {
                try db.execute("INSERT INTO t VALUES (?)", [.text("secret-value")], operation: "insert twice")
            })
        #expect(error.code == .internalError)
        #expect(error.message.contains("insert twice"))
        #expect(!error.message.contains("secret-value"))
    }

    @Test("a transaction that throws leaves nothing behind")
    func rollback() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let db = try SQLiteConnection(path: directory + "/t.sqlite3")
        try db.execute("CREATE TABLE t (a INTEGER)", operation: "create")
        #expect(throws: RainError.self) {
            try db.transaction("test") { () throws(RainError) in
                try db.execute("INSERT INTO t VALUES (1)", operation: "insert")
                throw RainError(.internalError, "boom")
            }
        }
        #expect(try db.query("SELECT COUNT(*) FROM t", operation: "count").first?.values == [.integer(0)])
        _ = try db.transaction("test") { () throws(RainError) in
            try db.execute("INSERT INTO t VALUES (1)", operation: "insert")
        }
        #expect(try db.query("SELECT COUNT(*) FROM t", operation: "count").first?.values == [.integer(1)])
    }

    @Test("foreign keys are enforced: a wallet needs its account")
    func foreignKeys() async throws {
        try await AuthorityFixture.with { f in
            _ = try await f.login()
            await f.store.close()
            // A raw connection does not turn foreign keys on by itself: configure it like the store.
            let db = try SQLiteConnection(path: f.directory + "/authority.sqlite3")
            try db.execute("PRAGMA foreign_keys=ON", operation: "enable foreign keys")
            #expect(throws: RainError.self) {
                try db.execute(
                    "INSERT INTO wallets (id, account_id, created_at) VALUES (?, ?, ?)",
                    [.text("wal_x"), .text("acct_missing"), .integer(0)], operation: "insert an orphan wallet")
            }
        }
    }
}
