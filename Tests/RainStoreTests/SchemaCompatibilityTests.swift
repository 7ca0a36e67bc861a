import Foundation
import RainCore
import RainTestSupport
import Testing

@testable import RainStore

/// A store records, beside its schema version, the oldest version a build must know to share it;
/// this build runs on a store one version ahead when its own version reaches that, and never
/// migrates or records anything there. The stores ahead are made here: migrated by this build, then
/// a pretend next migration applied by SQL.
@Suite("Schema compatibility")
struct SchemaCompatibilityTests {
    static let kinds = StoreKind.allCases

    /// A store of `kind` migrated by this build, closed; returns how to reach it.
    static func migratedStore(_ kind: StoreKind) async throws -> (target: String, cleanup: () -> Void) {
        switch kind {
        case .sqlite:
            let directory = try makeTemporaryDirectory()
            let store = try await SQLiteAuthorityStore.open(stateDirectory: directory)
            await store.close()
            return (
                "\(directory)/\(SQLiteAuthorityStore.fileName)", { try? FileManager.default.removeItem(atPath: directory) }
            )
        case .postgres:
            let url = try await PostgresTestCluster.freshDatabaseURL(label: "schema")
            let store = try await PostgresAuthorityStore.open(url: url, connections: 1)
            await store.close()
            return (url, {})
        }
    }

    static func latest(_ kind: StoreKind) -> Int {
        kind == .sqlite ? SQLiteAuthorityStore.latestSchemaVersion : PostgresAuthorityStore.latestSchemaVersion
    }

    /// The oldest version that may share a store this build migrated: its last migration's reader
    /// version (older than `latest` when that migration only added what older builds never touch).
    static func latestReadable(_ kind: StoreKind) -> Int {
        (kind == .sqlite
            ? SQLiteAuthorityStore.migrations.last?.readableFrom : PostgresAuthorityStore.migrations.last?.readableFrom)
            ?? 0
    }

    /// Runs `sql` on the store at `target`, as a newer build's migration would.
    static func execute(_ kind: StoreKind, _ target: String, _ sql: String, _ values: [StoreValue] = []) throws {
        switch kind {
        case .sqlite: _ = try SQLiteConnection(path: target).execute(sql, values: values, operation: "fixture")
        case .postgres: _ = try PostgresConnection(url: target).execute(sql, values: values, operation: "fixture")
        }
    }

    /// The recorded version and reader floor, read without a store (which would migrate).
    static func recorded(_ kind: StoreKind, _ target: String) throws -> (version: Int, readableFrom: Int) {
        switch kind {
        case .sqlite: return try versions(try SQLiteConnection(path: target))
        case .postgres: return try versions(try PostgresConnection(url: target))
        }
    }

    static func versions(_ db: some StoreConnection) throws -> (version: Int, readableFrom: Int) {
        let rows = try db.query(
            "SELECT MAX(version), MAX(min_reader_version) FROM schema_version", values: [], operation: "fixture")
        let row = try #require(rows.first)
        return (Int(try row.integer(0, "fixture")), Int(try row.integer(1, "fixture")))
    }

    /// Applies a pretend next migration: a new table (which this build never touches) and the
    /// next version recorded with `readableFrom`.
    static func migrateAhead(_ kind: StoreKind, _ target: String, readableFrom: Int) throws {
        let next = latest(kind) + 1
        try execute(kind, target, "CREATE TABLE future_feature (id TEXT PRIMARY KEY, note TEXT NOT NULL DEFAULT '')")
        try execute(
            kind, target, "INSERT INTO schema_version (version, applied_at, min_reader_version) VALUES ($1, $2, $3)",
            [.integer(Int64(next)), .integer(0), .integer(Int64(readableFrom))])
    }

    @Test("every migration names a reader version no newer than itself, never lower than the one before")
    func migrationsDeclareReaderVersions() {
        for (name, list) in [
            ("sqlite", SQLiteAuthorityStore.migrations.map { ($0.version, $0.readableFrom) }),
            ("postgres", PostgresAuthorityStore.migrations.map { ($0.version, $0.readableFrom) }),
        ] {
            var floor = 0
            for (version, readableFrom) in list {
                #expect(readableFrom <= version, "\(name) migration \(version)")
                #expect(readableFrom >= floor, "\(name) migration \(version) lowers the reader version")
                floor = readableFrom
            }
        }
    }

    @Test("a new store records this build's version and the oldest that may share it", arguments: kinds)
    func newStoreRecordsItsReaderVersion(kind: StoreKind) async throws {
        let (target, cleanup) = try await Self.migratedStore(kind)
        defer { cleanup() }
        let found = try Self.recorded(kind, target)
        #expect(found.version == Self.latest(kind))
        #expect(found.readableFrom == Self.latestReadable(kind))
    }

    @Test(
        "a store one version ahead whose reader version this build reaches opens, says it is newer, and keeps its version",
        arguments: kinds)
    func compatibleNewerStoreOpens(kind: StoreKind) async throws {
        let (target, cleanup) = try await Self.migratedStore(kind)
        defer { cleanup() }
        let latest = Self.latest(kind)
        try Self.migrateAhead(kind, target, readableFrom: latest)

        let store: any AuthorityStore =
            switch kind {
            case .sqlite: try await SQLiteAuthorityStore.open(path: target)
            case .postgres: try await PostgresAuthorityStore.open(url: target, connections: 1)
            }
        #expect(
            store.schemaCompatibility
                == SchemaCompatibility(storeVersion: latest + 1, readableFrom: latest, buildVersion: latest))
        #expect(store.schemaCompatibility?.isStoreNewer == true)
        #expect(try await store.schemaVersion() == latest + 1)
        // It serves: a use case reads and writes the tables it knows.
        #expect(try await store.holdsKeyedData() == false)
        await store.close()
        // Nothing was migrated back or recorded down.
        #expect(try Self.recorded(kind, target) == (latest + 1, latest))
    }

    @Test(
        "a store ahead whose reader version this build does not reach is refused with RAIN_102 schema_too_new naming both versions, and left as it was",
        arguments: kinds)
    func incompatibleNewerStoreIsRefused(kind: StoreKind) async throws {
        let (target, cleanup) = try await Self.migratedStore(kind)
        defer { cleanup() }
        let latest = Self.latest(kind)
        try Self.migrateAhead(kind, target, readableFrom: latest + 1)

        let error = await #expect(throws: RainError.self) {
            switch kind {
            case .sqlite: await (try await SQLiteAuthorityStore.open(path: target)).close()
            case .postgres: await (try await PostgresAuthorityStore.open(url: target, connections: 1)).close()
            }
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == SchemaCompatibility.tooNewReason)
        #expect(error?.message.contains("\(latest + 1)") == true && error?.message.contains("\(latest)") == true)
        #expect(try Self.recorded(kind, target) == (latest + 1, latest + 1))
    }

    @Test("a store made before the reader record gains it, each known migration with its reader version", arguments: kinds)
    func legacyStoreGainsTheRecord(kind: StoreKind) async throws {
        let (target, cleanup) = try await Self.migratedStore(kind)
        defer { cleanup() }
        // As a build before the record left it: no column.
        try Self.execute(kind, target, "ALTER TABLE schema_version DROP COLUMN min_reader_version")
        let store: any AuthorityStore =
            switch kind {
            case .sqlite: try await SQLiteAuthorityStore.open(path: target)
            case .postgres: try await PostgresAuthorityStore.open(url: target, connections: 1)
            }
        await store.close()
        #expect(try Self.recorded(kind, target) == (Self.latest(kind), Self.latestReadable(kind)))
    }

    @Test(
        "the rule: a newer store is shared only from its reader version on; an older or equal one always",
        arguments: [
            (16, 16, 16, true), (17, 16, 16, true), (17, 17, 16, false), (18, 15, 16, true), (12, 12, 16, true),
        ])
    func rule(store: Int, readableFrom: Int, build: Int, isAllowed: Bool) {
        let compatibility = SchemaCompatibility(storeVersion: store, readableFrom: readableFrom, buildVersion: build)
        #expect(((try? compatibility.check(store: "s")) != nil) == isAllowed)
    }
}
