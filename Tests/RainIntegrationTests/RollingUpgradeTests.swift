import Foundation
import RainCore
import RainTestSupport
import RainWire
import Testing

@testable import RainStore

/// This build's `rainwalletd-test authority` on a store migrated one schema version ahead, as in a
/// rolling upgrade where a newer instance migrated first: the store is migrated by this build, then
/// a pretend next migration (a new table) is applied by SQL with the oldest reader version it allows.
@Suite("Rolling upgrade (processes)")
struct RollingUpgradeTests {
    static func latest(_ kind: StoreKind) -> Int {
        kind == .sqlite ? SQLiteAuthorityStore.latestSchemaVersion : PostgresAuthorityStore.latestSchemaVersion
    }

    /// Applies a pretend migration `version` (a new table) to the stopped authority's store,
    /// recorded with `readableFrom`.
    static func migrateAhead(_ kind: StoreKind, sqlite path: String, url: String?, version: Int, readableFrom: Int)
        throws
    {
        let statements: [(String, [StoreValue])] = [
            ("CREATE TABLE future_feature_\(version) (id TEXT PRIMARY KEY, note TEXT NOT NULL DEFAULT '')", []),
            (
                "INSERT INTO schema_version (version, applied_at, min_reader_version) VALUES ($1, $2, $3)",
                [.integer(Int64(version)), .integer(0), .integer(Int64(readableFrom))]
            ),
        ]
        for (sql, values) in statements {
            if let url {
                _ = try PostgresConnection(url: url).execute(sql, values: values, operation: "fixture")
            } else {
                _ = try SQLiteConnection(path: path).execute(sql, values: values, operation: "fixture")
            }
        }
    }

    @Test(
        "on a store one version ahead that allows it, this build starts with store.schema_newer, keeps the sessions and serves a login; on one that does not, it exits 78 naming both versions",
        arguments: StoreKind.allCases)
    func olderInstanceBesideNewerSchema(kind: StoreKind) async throws {
        let url = kind == .postgres ? try await PostgresTestCluster.freshDatabaseURL(label: "upgrade") : nil
        let store = url.map { ["--store", $0] } ?? []
        let (base, cleanup) = try AuthorityStoreIdentityTests.directories(["a"])
        defer { cleanup() }
        let state = "\(base)/a/authority"
        let latest = Self.latest(kind)

        var session: (tokens: SessionTokens, device: TestDeviceKeys)?
        try await AuthorityProcess.with(in: "\(base)/a", ["--listen", "127.0.0.1:0"] + store) { authority in
            session = try await AuthorityStoreIdentityTests.logIn(authority, email: "before@example.com")
        }
        try Self.migrateAhead(kind, sqlite: "\(state)/authority.sqlite3", url: url, version: latest + 1, readableFrom: latest)
        try FileManager.default.removeItem(atPath: "\(base)/a/authority.log")

        let (tokens, device) = try #require(session)
        try await AuthorityProcess.with(in: "\(base)/a", ["--listen", "127.0.0.1:0"] + store) { authority in
            let warning = authority.log.split(separator: "\n").first { $0.contains("store.schema_newer") } ?? ""
            #expect(
                warning.contains("storeVersion=\(latest + 1)") && warning.contains("buildVersion=\(latest)"), "\(authority.log)")
            #expect(authority.log.contains("schemaVersion=\(latest + 1)"), "the schema is never recorded down")
            _ = try await AuthorityStoreIdentityTests.refresh(authority, tokens, device: device)
            _ = try await AuthorityStoreIdentityTests.logIn(authority, email: "after@example.com")
        }

        // A later migration that older builds cannot live beside.
        try Self.migrateAhead(
            kind, sqlite: "\(state)/authority.sqlite3", url: url, version: latest + 2, readableFrom: latest + 2)
        let refused = try await AuthorityStoreIdentityTests.refusedStart(
            stateDirectory: state, log: "\(base)/refused.log", store)
        #expect(refused.status == 78, "\(refused.log)")
        #expect(refused.log.contains("RAIN_102"), "\(refused.log)")
        #expect(
            refused.log.contains("schema version \(latest + 2)") && refused.log.contains("schema version \(latest)"),
            "\(refused.log)")
        #expect(refused.log.contains("Upgrade this instance"), "\(refused.log)")
    }
}
