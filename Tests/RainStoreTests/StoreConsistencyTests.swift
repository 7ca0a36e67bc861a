import Foundation
import RainCore
import RainTestSupport
import Testing

@testable import RainStore

/// The checker the crash-safety kill loop relies on: it must pass on a real history and name every
/// invariant when one is broken, or the kill loop proves nothing.
@Suite("SQLite store consistency check")
struct StoreConsistencyTests {
    /// Runs `body` on a fixture that already holds one account logged in on two devices in turn
    /// (so one revoked and one live session) and a pending code on a third device.
    func withHistory(_ body: (AuthorityFixture, SQLiteConnection) async throws -> Void) async throws {
        try await AuthorityFixture.with { f in
            _ = try await f.login(device: "device-a")
            f.clock.advance(by: .seconds(60))
            _ = try await f.login(device: "device-b")
            _ = try await f.send(AuthorityFixture.phone, device: "device-c")
            #expect(try await f.store.consistencyViolations() == [])
            let db = try SQLiteConnection(path: f.directory + "/" + SQLiteAuthorityStore.fileName)
            try await body(f, db)
        }
    }

    @Test("a real history of logins and sends is consistent")
    func realHistory() async throws {
        try await withHistory { f, _ async throws in
            #expect(try await f.store.consistencyViolations() == [])
        }
    }

    @Test("an account without a wallet is reported")
    func accountWithoutWallet() async throws {
        try await withHistory { f, db async throws in
            try db.execute(
                "INSERT INTO accounts (id, app_id, created_at) VALUES ('acct_orphan', 'app-one', 0)",
                operation: "plant an account")
            try db.execute(
                "INSERT INTO contacts (app_id, kind, value, account_id) VALUES ('app-one', 'email', 'o@example.com', 'acct_orphan')",
                operation: "plant its contact")
            #expect(try await f.store.consistencyViolations() == ["account without a wallet: acct_orphan"])
        }
    }

    @Test("a second pending code on one device is reported")
    func twoPendingOnOneDevice() async throws {
        try await withHistory { f, db async throws in
            try db.execute(
                """
                INSERT INTO challenges (id, app_id, device_id, contact_kind, contact_value, account_key, code_hash,
                                        created_at, expires_at, state)
                SELECT 'chl_copy', app_id, device_id, contact_kind, contact_value, account_key, code_hash,
                       created_at, expires_at, 'pending' FROM challenges WHERE device_id = 'device-c'
                """, operation: "plant a second pending challenge")
            #expect(
                try await f.store.consistencyViolations() == ["device with more than one pending challenge: app-one/device-c"])
        }
    }

    @Test("a pending code past its wrong-attempt limit is reported")
    func pendingPastLimit() async throws {
        try await withHistory { f, db async throws in
            try db.execute(
                "UPDATE challenges SET wrong_attempts = 3 WHERE device_id = 'device-c'", operation: "plant attempts")
            let violations = try await f.store.consistencyViolations()
            #expect(violations.count == 1 && violations[0].hasPrefix("pending challenge past its wrong-attempt limit"))
        }
    }

    @Test("a used login code whose contact has no account is reported")
    func usedWithoutAccount() async throws {
        try await withHistory { f, db async throws in
            try db.execute(
                "UPDATE challenges SET state = 'used' WHERE device_id = 'device-c'", operation: "plant a used code")
            let violations = try await f.store.consistencyViolations()
            #expect(violations.count == 1 && violations[0].hasPrefix("used login challenge whose contact has no account"))
        }
    }

    @Test("two live sessions for one account are reported")
    func twoLiveSessions() async throws {
        try await withHistory { f, db async throws in
            try db.execute("UPDATE sessions SET revoked_at = NULL, revoke_reason = NULL", operation: "unrevoke")
            let violations = try await f.store.consistencyViolations()
            #expect(violations.count == 1 && violations[0].hasPrefix("account with more than one live session"))
        }
    }

    @Test("a wallet without its keys is reported")
    func walletWithoutKeys() async throws {
        try await withHistory { f, db async throws in
            try db.execute("UPDATE wallets SET entropy_ciphertext = NULL", operation: "drop the keys")
            let violations = try await f.store.consistencyViolations()
            #expect(violations.count == 1 && violations[0].hasPrefix("wallet without its keys"))
        }
    }
}
