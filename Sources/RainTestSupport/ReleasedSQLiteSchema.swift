import Foundation

/// The authority's SQLite schemas as released, for the tests that open an old database: the store's
/// migrations and the wallet backfill. Each is a frozen `.sql` file in `Tests/Fixtures`, kept
/// apart from the store's migrations so an edit of those cannot hide here.
package enum ReleasedSQLiteSchema {
    /// Schema version 1 as released, one statement an element, ending with its `schema_version` row.
    /// - Throws: when `Tests/Fixtures/released-sqlite-schema-v1.sql` cannot be read.
    package static func v1() throws -> [String] {
        try statements(inFixture: "released-sqlite-schema-v1.sql")
    }

    /// The statements of a fixture: `--` comment lines dropped, split at each `;` (the fixtures
    /// have none inside a statement).
    static func statements(inFixture name: String) throws -> [String] {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures")
        let text = try String(contentsOf: fixtures.appendingPathComponent(name), encoding: .utf8)
        let sql = text.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("--") }
            .joined(separator: "\n")
        return sql.split(separator: ";")
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .filter { !$0.isEmpty }
    }
}
