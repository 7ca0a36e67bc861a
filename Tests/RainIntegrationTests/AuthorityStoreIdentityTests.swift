import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainTestSupport
import RainWire
import Testing

/// What an authority's start checks about its state directory and store, with real
/// `rainwalletd-test authority` processes: the master key is the store's, the store is the state
/// directory's, and a start refused for an option leaves the state directory as it was.
@Suite("Authority store identity (processes)")
struct AuthorityStoreIdentityTests {
    static let app = "default"

    /// A new 0700 directory under /tmp holding `names` (each 0700), removed by `cleanup`.
    static func directories(_ names: [String]) throws -> (base: String, cleanup: () -> Void) {
        let base = "/tmp/rwk-\(UInt32.random(in: 0...UInt32.max))"
        for path in [base] + names.map({ "\(base)/\($0)" }) {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        }
        return (base, { try? FileManager.default.removeItem(atPath: base) })
    }

    /// Starts `rainwalletd-test authority` on `stateDirectory` with `arguments`, expecting it to
    /// exit without serving; returns its exit status and what it wrote to stderr.
    static func refusedStart(stateDirectory: String, log: String, _ arguments: [String]) async throws
        -> (status: Int32, log: String)
    {
        let p = try TestProcess(
            try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path,
            ["authority", "--listen", "127.0.0.1:0", "--state-dir", stateDirectory, "--dev-outbox"] + arguments,
            stderr: .file(log))
        guard let status = await p.waitForExit(timeout: .seconds(30)) else {
            await p.stop(grace: .seconds(5))
            throw HarnessError("the authority did not exit: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
        return (status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    /// Logs a device in through `authority` (a code from its outbox) and returns the session's
    /// tokens and the device's keys.
    static func logIn(_ authority: AuthorityProcess, email: String) async throws
        -> (tokens: SessionTokens, device: TestDeviceKeys)
    {
        let key = try Ed25519PrivateKey()
        let device = TestDeviceKeys(deviceID: "dev-\(email)", keys: [key])
        let remote = try RemoteAuthority(
            address: "127.0.0.1:\(authority.port)", device: device, deadlines: .forTests,
            logger: Logger(label: "test.remote", minimumLevel: .error))
        defer { remote.close() }
        let sent = try await remote.sendLoginCode(
            SendCodeRequest(appID: app, deviceID: device.deviceID, contact: .email(email)))
        let sentCode = try await remote.listOutbox().last(where: { $0.contact == email })?.code
        let code = try #require(sentCode)
        let login = try await remote.confirmLoginCode(
            ConfirmCodeRequest(
                appID: app, deviceID: device.deviceID, challengeID: sent.challengeID, code: code,
                devicePublicKey: key.publicKey.rawRepresentation))
        return (login.tokens, device)
    }

    /// Refreshes the session of `tokens` through `authority`: it still serves, and the session lives.
    static func refresh(_ authority: AuthorityProcess, _ tokens: SessionTokens, device: TestDeviceKeys) async throws
        -> SessionTokens
    {
        let remote = try RemoteAuthority(
            address: "127.0.0.1:\(authority.port)", device: device, deadlines: .forTests,
            logger: Logger(label: "test.remote", minimumLevel: .error))
        defer { remote.close() }
        return try await remote.refreshSession(
            RefreshRequest(appID: app, deviceID: device.deviceID, refreshToken: tokens.refreshToken), proof: device.proof)
    }

    static func keyID(_ stateDirectory: String) throws -> String {
        try #require(try KeyFile.load(at: "\(stateDirectory)/authority.key")).keyID
    }

    @Test(
        "a second instance with another authority.key on the same PostgreSQL database exits 78 naming both key ids; the first keeps serving its sessions"
    )
    func anotherKeyIsRefused() async throws {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "storekey")
        let (base, cleanup) = try Self.directories(["a", "b", "b/authority"])
        defer { cleanup() }
        try await AuthorityProcess.with(in: "\(base)/a", ["--listen", "127.0.0.1:0", "--store", url]) { first in
            let (tokens, device) = try await Self.logIn(first, email: "key@example.com")
            let other = try KeyFile.loadOrCreate(at: "\(base)/b/authority/authority.key")
            let storeKey = try Self.keyID("\(base)/a/authority")
            #expect(other.keyID != storeKey)
            #expect(first.log.contains("masterKey=\(storeKey)"), "each instance logs its key id when ready")

            let refused = try await Self.refusedStart(
                stateDirectory: "\(base)/b/authority", log: "\(base)/b.log", ["--store", url])
            #expect(refused.status == 78, "\(refused.log)")
            #expect(refused.log.contains("RAIN_102"))
            #expect(refused.log.contains(storeKey) && refused.log.contains(other.keyID), "\(refused.log)")
            #expect(!FileManager.default.fileExists(atPath: "\(base)/b/authority/authority.store"))
            // The refused instance changed nothing: the first one's session still refreshes.
            _ = try await Self.refresh(first, tokens, device: device)
        }
    }

    @Test(
        "an instance without authority.key on a PostgreSQL store with data exits 78 and creates no key; with the key copied it starts"
    )
    func missingKeyIsNotCreated() async throws {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "storekey")
        let (base, cleanup) = try Self.directories(["a", "b", "b/authority"])
        defer { cleanup() }
        try await AuthorityProcess.with(in: "\(base)/a", ["--listen", "127.0.0.1:0", "--store", url]) { first in
            let (tokens, device) = try await Self.logIn(first, email: "nokey@example.com")
            let refused = try await Self.refusedStart(
                stateDirectory: "\(base)/b/authority", log: "\(base)/b.log", ["--store", url])
            #expect(refused.status == 78, "\(refused.log)")
            #expect(refused.log.contains(try Self.keyID("\(base)/a/authority")), "\(refused.log)")
            #expect(!FileManager.default.fileExists(atPath: "\(base)/b/authority/authority.key"))

            // The fix the message names: the shared key, copied 0600.
            try FileManager.default.copyItem(
                atPath: "\(base)/a/authority/authority.key", toPath: "\(base)/b/authority/authority.key")
            #expect(chmod("\(base)/b/authority/authority.key", 0o600) == 0)
            try await AuthorityProcess.with(in: "\(base)/b", ["--listen", "127.0.0.1:0", "--store", url]) { second in
                _ = try await Self.refresh(second, tokens, device: device)
            }
        }
    }

    @Test(
        "a state directory made on SQLite is refused (78) on PostgreSQL and one made on PostgreSQL is refused on SQLite, without a SQLite file; --store-change moves it on purpose"
    )
    func storeSwitchIsRefused() async throws {
        let url = try await PostgresTestCluster.freshDatabaseURL(label: "storekey")
        let (base, cleanup) = try Self.directories(["lite", "pg"])
        defer { cleanup() }
        let lite = "\(base)/lite/authority"
        let pg = "\(base)/pg/authority"
        try await AuthorityProcess.with(in: "\(base)/lite", ["--listen", "127.0.0.1:0"]) { _ in }
        let identity = try PostgresURL.databaseIdentity(url)
        #expect(try String(contentsOfFile: "\(lite)/authority.store", encoding: .utf8) == "sqlite\n")

        let toPostgres = try await Self.refusedStart(stateDirectory: lite, log: "\(base)/1.log", ["--store", url])
        #expect(toPostgres.status == 78, "\(toPostgres.log)")
        #expect(toPostgres.log.contains("sqlite") && toPostgres.log.contains(identity), "\(toPostgres.log)")

        try await AuthorityProcess.with(in: "\(base)/pg", ["--listen", "127.0.0.1:0", "--store", url]) { _ in }
        #expect(try String(contentsOfFile: "\(pg)/authority.store", encoding: .utf8) == "\(identity)\n")
        let toSQLite = try await Self.refusedStart(stateDirectory: pg, log: "\(base)/2.log", [])
        #expect(toSQLite.status == 78, "\(toSQLite.log)")
        #expect(toSQLite.log.contains(identity), "\(toSQLite.log)")
        #expect(!FileManager.default.fileExists(atPath: "\(pg)/authority.sqlite3"))
        let named = try await Self.refusedStart(stateDirectory: pg, log: "\(base)/3.log", ["--store", "sqlite"])
        #expect(named.status == 78, "\(named.log)")

        // On purpose: the PostgreSQL directory moves to SQLite and records it.
        try await AuthorityProcess.with(in: "\(base)/pg", ["--listen", "127.0.0.1:0", "--store-change"]) { _ in }
        #expect(try String(contentsOfFile: "\(pg)/authority.store", encoding: .utf8) == "sqlite\n")
    }

    @Test(
        "a start refused for an option (a missing or invalid --code-sender file, a bad --store URL) exits 78 and leaves the state directory as it was",
        arguments: [
            ["--code-sender", "/nonexistent/code-sender.json"],
            ["--code-sender", "INVALID_JSON"],
            ["--store", "postgres://localhost:notaport/rain"],
        ])
    func refusedOptionTouchesNothing(arguments: [String]) async throws {
        let (base, cleanup) = try Self.directories(["empty"])
        defer { cleanup() }
        let invalidJSON = "\(base)/sender.json"
        try Data("{\"type\": ".utf8).write(to: URL(fileURLWithPath: invalidJSON))
        let resolved = arguments.map { $0 == "INVALID_JSON" ? invalidJSON : $0 }

        let absent = "\(base)/absent"
        let first = try await Self.refusedStart(stateDirectory: absent, log: "\(base)/1.log", resolved)
        #expect(first.status == 78, "\(first.log)")
        #expect(!FileManager.default.fileExists(atPath: absent))

        let empty = "\(base)/empty"
        let second = try await Self.refusedStart(stateDirectory: empty, log: "\(base)/2.log", resolved)
        #expect(second.status == 78, "\(second.log)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: "\(empty)/authority.sqlite3"))
    }

    @Test("a port already in use stops the start before the state directory or the store is touched")
    func portInUseTouchesNothing() async throws {
        let (base, cleanup) = try Self.directories(["holder"])
        defer { cleanup() }
        try await AuthorityProcess.with(in: "\(base)/holder", ["--listen", "127.0.0.1:0"]) { holder in
            let absent = "\(base)/absent"
            let log = "\(base)/busy.log"
            let p = try TestProcess(
                try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path,
                ["authority", "--listen", "127.0.0.1:\(holder.port)", "--state-dir", absent], stderr: .file(log))
            guard let status = await p.waitForExit(timeout: .seconds(30)) else {
                await p.stop(grace: .seconds(5))
                throw HarnessError("the authority did not exit on a port in use")
            }
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(status != 0, "\(text)")
            #expect(text.contains("\(holder.port)"), "\(text)")
            #expect(!FileManager.default.fileExists(atPath: absent), "\(text)")
        }
    }
}
