import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import Testing

@testable import RainAuthority

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

    @Test("reopening after close keeps the data and the schema version, and migrations run once")
    func reopen() async throws {
        try await AuthorityFixture.with { f in
            let login = try await f.login()
            await f.store.close()
            let closed = try #require(await rainError { _ = try await f.store.schemaVersion() })
            #expect(closed.code == .internalError)

            let reopened = try await SQLiteAuthorityStore.open(stateDirectory: f.directory)
            #expect(try await reopened.schemaVersion() == SQLiteAuthorityStore.latestSchemaVersion)
            let account = try #require(
                try await reopened.account(appID: AuthorityFixture.app, contact: AuthorityFixture.email))
            #expect(account.id == login.accountID)
            #expect(account.walletID == login.walletID)
            let versions = try #require(try await reopened.dumpAllRows()["schema_version"])
            #expect(versions.count == SQLiteAuthorityStore.latestSchemaVersion)
            #expect(try await reopened.sessions(appID: AuthorityFixture.app, accountID: login.accountID).count == 1)
            await reopened.close()
        }
    }

    @Test("a database from a newer build is refused with RAIN_502")
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
        #expect(error.code == .internalError)
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
