import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import Testing

@testable import RainStore

/// Each idempotency key is stored with the SHA-256 of its first request, on both stores, and a
/// database of the previous version gains the column without losing its rows.
@Suite("Idempotency request hash")
struct IdempotencyRequestHashTests {
    static let kinds = StoreKind.allCases

    @Test("a login's outcome keeps its request's hash, read back with the key", arguments: kinds)
    func outcomeKeepsTheRequestHash(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let challenge = try f.newChallenge()
            try await f.insert(challenge)
            let keyHash = try SecureRandom.bytes(count: 32)
            let requestHash = SHA256.hash(Array("the first request".utf8))
            let now = Date(unixMilliseconds: f.clock.now.unixMilliseconds)
            let outcome = try await f.store.completeLogin(
                LoginCompletion(
                    challengeID: challenge.id, appID: challenge.appID, deviceID: challenge.deviceID,
                    contact: challenge.contact, newAccountID: try SecureRandom.identifier(prefix: "acct"),
                    newWalletID: try SecureRandom.identifier(prefix: "wal"), newWalletKeys: nil,
                    session: try f.newSession(key: Array(repeating: 9, count: 32)), now: now,
                    idempotency: IdempotentOutcomeInput(
                        keyHash: keyHash, challengeID: challenge.id, requestHash: requestHash, sealedTokens: [1, 2, 3],
                        expiresAt: challenge.expiresAt)))
            guard case .loggedIn = outcome else {
                Issue.record("expected a login, got \(outcome)")
                return
            }
            let first = try #require(try await f.store.idempotentOutcome(keyHash: keyHash, now: now))
            #expect(first.requestHash == requestHash)
            #expect(first.challengeID == challenge.id)
        }
    }

    @Test(
        "a database of the previous version gains the request hash column; its rows read with an empty hash",
        arguments: kinds)
    func previousVersionMigrates(kind: StoreKind) async throws {
        let keyHash = try SecureRandom.bytes(count: 32)
        let now = Date().unixMilliseconds
        let legacyRow = """
            INSERT INTO idempotent_logins (key_hash, kind, challenge_id, account_id, wallet_id, account_created,
                                           sealed_tokens, expires_at)
            VALUES ($1, 'login_code', 'chl_old', 'acct_old', 'wal_old', $2, $3, $4)
            """
        let values: [StoreValue] = [.bytes(keyHash), .boolean(false), .bytes([7, 7]), .integer(now + 300_000)]
        let store: any AuthorityStore
        var cleanup: () -> Void = {}
        defer { cleanup() }
        switch kind {
        case .sqlite:
            let directory = try makeTemporaryDirectory()
            cleanup = { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/authority.sqlite3"
            do {
                let db = try SQLiteConnection(path: path)
                try db.execute(
                    "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
                    operation: "create")
                for migration in SQLiteAuthorityStore.migrations.dropLast() {
                    for statement in migration.statements { try db.execute(statement, operation: "migrate") }
                    _ = try db.execute(
                        "INSERT INTO schema_version VALUES ($1, 0)", values: [.integer(Int64(migration.version))],
                        operation: "record")
                }
                _ = try db.execute(legacyRow, values: values, operation: "insert")
            }
            store = try await SQLiteAuthorityStore.open(path: path)
            #expect(try await store.schemaVersion() == SQLiteAuthorityStore.latestSchemaVersion)
        case .postgres:
            let url = try await PostgresTestCluster.freshDatabaseURL(label: "request-hash")
            do {
                let db = try PostgresConnection(url: url)
                try db.execute(
                    "CREATE TABLE schema_version (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
                    operation: "create")
                for migration in PostgresAuthorityStore.migrations.dropLast() {
                    for statement in migration.statements { try db.execute(statement, operation: "migrate") }
                    _ = try db.execute(
                        "INSERT INTO schema_version VALUES ($1, 0)", values: [.integer(Int64(migration.version))],
                        operation: "record")
                }
                _ = try db.execute(legacyRow, values: values, operation: "insert")
            }
            store = try await PostgresAuthorityStore.open(url: url, connections: 1)
            #expect(try await store.schemaVersion() == PostgresAuthorityStore.latestSchemaVersion)
        }
        let first = try await store.idempotentOutcome(keyHash: keyHash, now: Date(unixMilliseconds: now))
        await store.close()
        #expect(first?.accountID == "acct_old")
        #expect(first?.sealedTokens == [7, 7])
        #expect(first?.requestHash == [])
    }
}
