import Foundation
import RainCore
import RainTestSupport
import Testing

@testable import RainStore

/// What only the PostgreSQL store has: URLs, connection failures, the libpq wrapper, its schema
/// version guard. The `AuthorityStore` contract itself is `StoreConformanceTests`.
@Suite("PostgreSQL authority store")
struct PostgresAuthorityStoreTests {
    @Test("a malformed or non-PostgreSQL store URL is RAIN_102")
    func badURL() async throws {
        for url in ["mysql://u@h/db", "postgres://u:pw@[::1/db", "not a url"] {
            let error = try #require(await rainError { _ = try await PostgresAuthorityStore.open(url: url) })
            #expect(error.code == .invalidArgument, "\(url)")
            #expect(!error.message.contains("pw@"))
        }
    }

    @Test("an unreachable server is RAIN_502 naming the host and port, never the password")
    func unreachable() async throws {
        // Port 1 on loopback: nothing listens there (connection refused at once).
        let secret = "s3cret-Passw0rd"
        let error = try #require(
            await rainError {
                _ = try await PostgresAuthorityStore.open(url: "postgres://rain:\(secret)@127.0.0.1:1/rainwallet")
            })
        #expect(error.code == .internalError)
        #expect(error.message.contains("127.0.0.1:1/rainwallet"))
        #expect(!error.message.contains(secret))
        #expect(!String(describing: error.underlying.map { "\($0)" } ?? "").contains(secret))
    }

    @Test("the wrapper binds every value type and reads it back unchanged")
    func bindAndRead() async throws {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "wrapper")
        let db = try PostgresConnection(url: url)
        try db.execute("CREATE TABLE t (a BIGINT, b TEXT, c BYTEA, d BOOLEAN, e TEXT, f BYTEA)", operation: "create")
        let values: [PostgresValue] = [
            .integer(-42), .text("x'); DROP TABLE t; --é😀"), .bytes([0, 1, 2, 255]), .boolean(true), .null, .bytes([]),
        ]
        try db.execute("INSERT INTO t VALUES ($1, $2, $3, $4, $5::text, $6)", values, operation: "insert")
        let rows = try db.query("SELECT a, b, c, d, e, f FROM t", operation: "select")
        #expect(rows.count == 1)
        #expect(rows.first?.values == values)
        #expect(
            try db.query("SELECT 7::int4, 8::int2, 9::int8", operation: "ints").first?.values == [
                .integer(7), .integer(8), .integer(9),
            ])
        #expect(try db.query("SELECT (-1)::int4", operation: "negative").first?.values == [.integer(-1)])
    }

    @Test("a failing statement is RAIN_502 naming the operation and SQLSTATE, never the bound values")
    func failureMessage() async throws {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "failure")
        let db = try PostgresConnection(url: url)
        try db.execute("CREATE TABLE t (a TEXT PRIMARY KEY)", operation: "create")
        try db.execute("INSERT INTO t VALUES ($1)", [.text("secret-value")], operation: "insert")
        let error = try #require(
            throws: RainError.self,
            performing: { try db.execute("INSERT INTO t VALUES ($1)", [.text("secret-value")], operation: "insert twice") })
        #expect(error.code == .internalError)
        #expect(error.message.contains("insert twice"))
        #expect(error.message.contains("23505"))
        #expect(!error.message.contains("secret-value"))
        #expect(!"\(error.underlying.map { "\($0)" } ?? "")".contains("secret-value"))
    }

    @Test("a transaction that throws leaves nothing behind; one that loses a race runs again")
    func transactions() async throws {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "tx")
        let db = try PostgresConnection(url: url)
        try db.execute("CREATE TABLE t (a BIGINT PRIMARY KEY)", operation: "create")
        #expect(throws: RainError.self) {
            try db.transaction("test") { () throws(RainError) in
                try db.execute("INSERT INTO t VALUES (1)", operation: "insert")
                throw RainError(.internalError, "boom")
            }
        }
        #expect(try db.query("SELECT COUNT(*) FROM t", operation: "count").first?.values == [.integer(0)])
        // The first attempt hits a unique violation; the second (seeing the row) takes another path.
        try db.execute("INSERT INTO t VALUES (5)", operation: "seed")
        var attempts = 0
        try db.transaction("retry") { () throws(RainError) in
            attempts += 1
            try db.execute("INSERT INTO t VALUES ($1)", [.integer(attempts == 1 ? 5 : 6)], operation: "insert")
        }
        #expect(attempts == 2)
        #expect(try db.query("SELECT COUNT(*) FROM t", operation: "count").first?.values == [.integer(2)])
    }

    @Test("a database migrated by a newer build that records no reader version is refused with RAIN_102 schema_too_new")
    func newerSchemaRefused() async throws {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "newer")
        let store = try await PostgresAuthorityStore.open(url: url, connections: 1)
        #expect(try await store.appliedMigrations() == Array(1...PostgresAuthorityStore.latestSchemaVersion))
        await store.close()
        let db = try PostgresConnection(url: url)
        try db.execute("INSERT INTO schema_version (version, applied_at) VALUES (999, 0)", operation: "plant")
        let error = try #require(await rainError { _ = try await PostgresAuthorityStore.open(url: url) })
        #expect(error.code == .invalidArgument)
        #expect(error.details.reason == SchemaCompatibility.tooNewReason)
        #expect(error.message.contains("999"))
    }
}
