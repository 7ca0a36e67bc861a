import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// The `secret-service` provider under the real daemon: each test has its own private
/// session bus with a real `gnome-keyring-daemon` (`TestKeyring`), and the daemon gets that bus's
/// `DBUS_SESSION_BUS_ADDRESS` (and nothing of the machine's own session).
@Suite("Secret Service provider (processes)", .serialized)
struct SecretServiceDaemonTests {
    static let config = #"{"storage": {"provider": "secret-service"}, "profiles": {"default": {"allowExport": true}}}"#
    /// How long a test waits for the daemon to load once the keyring can be used: it tries again at
    /// the next call (at most once a second), so this is not the 3 s round.
    static let loadTimeout: Duration = .seconds(2)

    /// The environment of a daemon on `keyring`'s bus.
    static func bus(_ keyring: TestKeyring) -> [String: String?] {
        ["DBUS_SESSION_BUS_ADDRESS": keyring.address]
    }

    /// The attributes of a daemon's key item (as `SecretServiceKeyProvider` stores it).
    static func item(_ key: String, stateDirectory: String) -> [String: String] {
        ["xdg:schema": "org.rainwallet.Key", "state-directory": stateDirectory, "key": key]
    }

    /// Whether the daemon answers GetInfo with the capability `storage-loading`.
    static func isLoading(_ h: DaemonHarness) async throws -> Bool {
        let bytes = try await h.call(Method.daemonGetInfo, payload: try GetInfoRequest().encode(), timeout: .seconds(5))
        return try GetInfoResponse.decode(bytes).capabilities.contains("storage-loading")
    }

    /// The key files the `file` provider would write: none of them may appear under another provider.
    static func keyFiles(_ h: DaemonHarness) -> [String] {
        ["storage.key", "device.key", "authority/authority.key"].filter {
            FileManager.default.fileExists(atPath: "\(h.stateDirectory)/\($0)")
        }
    }

    static func recordedProvider(_ h: DaemonHarness) -> String? {
        try? String(contentsOfFile: "\(h.stateDirectory)/key-provider", encoding: .utf8)
    }

    @Test func aSessionKeptInTheKeyringSurvivesARestartRefreshesAndStatusShowsTheKeys() async throws {
        let keyring = try TestKeyring()
        defer { keyring.stop() }
        let h = try await DaemonHarness.start(config: Self.config, environment: Self.bus(keyring))
        defer { h.shutdown() }
        let provider = h.provider()
        let (session, _, _) = try await h.logIn(provider, .email("keyring@example.com"))

        try await h.restart()
        #expect(try await !Self.isLoading(h))
        try await provider.awaitSessionRestore()
        let restored = try await provider.currentSession()
        #expect(restored.accountID == session.accountID)
        #expect(try await provider.refreshSession().hasActiveSession)
        _ = try await provider.account()
        _ = try await provider.exportRecoveryPhrase()

        // The keys are items of the keyring, not files beside the sessions.
        #expect(Self.recordedProvider(h) == "secret-service\n")
        #expect(Self.keyFiles(h).isEmpty)
        #expect(try keyring.lookupItem(attributes: Self.item("storage", stateDirectory: h.stateDirectory)) != nil)
        #expect(try keyring.lookupItem(attributes: Self.item("device-key", stateDirectory: h.stateDirectory)) != nil)

        var arguments = ["storage", "status", "--json", "--state-dir", h.stateDirectory]
        if let configPath = h.configPath { arguments += ["--config", configPath] }
        let (status, output) = try await h.runDaemon(arguments: arguments)
        #expect(status == 0, "\(output)")
        let json = output.split(separator: "\n").first { $0.hasPrefix("{") }.map(String.init) ?? ""
        let root = try jsonObject(json)
        #expect(root["provider"] as? String == "secret-service")
        #expect(root["unavailable"] == nil)
        let keys = (root["keys"] as? [[String: Any]]) ?? []
        #expect(Set(keys.compactMap { $0["slot"] as? String }) == ["storage", "authority-master", "device"])
        #expect(keys.allSatisfy { !(($0["keyId"] as? String) ?? "").isEmpty })
    }

    @Test func aSessionFileAndTheStorageKeyItemCopiedToAnotherDaemonCannotReadOrExport() async throws {
        let ownerKeyring = try TestKeyring()
        defer { ownerKeyring.stop() }
        // The thief's own machine: its own keyring, where it puts the copied item.
        let thiefKeyring = try TestKeyring()
        defer { thiefKeyring.stop() }
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let flags = ["--authority", "127.0.0.1:\(authority.port)"]
            let owner = try await DaemonHarness.start(
                config: Self.config, extraArguments: flags, environment: Self.bus(ownerKeyring))
            defer { owner.shutdown() }
            let provider = owner.provider()
            try await owner.logIn(provider, .email("keyring-thief@example.com"))
            _ = try await provider.account()

            let thief = try DaemonHarness.prepare(config: Self.config, extraArguments: flags, environment: Self.bus(thiefKeyring))
            defer { thief.shutdown() }
            try FileManager.default.createDirectory(
                atPath: "\(thief.stateDirectory)/sessions", withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            // The session, and the confirmed settings sealed under the same key (they name the
            // authority, which a start must match).
            for file in ["sessions/default.session", "confirmed-settings.json"] {
                try FileManager.default.copyItem(
                    atPath: "\(owner.stateDirectory)/\(file)", toPath: "\(thief.stateDirectory)/\(file)")
            }
            let storageKey = try #require(
                try ownerKeyring.lookupItem(attributes: Self.item("storage", stateDirectory: owner.stateDirectory)))
            try thiefKeyring.storeItem(
                label: "copied storage key", attributes: Self.item("storage", stateDirectory: thief.stateDirectory),
                secret: storageKey.trimmingCharacters(in: .whitespacesAndNewlines))
            try await thief.start()
            let stolen = thief.provider()
            // The copied storage key opens the copied session…
            try await stolen.awaitSessionRestore()
            // …(the daemon's revocation stream checks the session once it connects, a call
            // with its token that the authority refuses: the copy may already have ended then)…
            let loaded = try await stolen.currentSession()
            #expect(loaded.hasActiveSession || loaded.sessionState == .expired)
            // …but the thief's device key is not the session's: the authority refuses its tokens.
            let read = await rainError { _ = try await stolen.account() }
            #expect(read?.code == .sessionExpired)
            let export = await rainError { _ = try await stolen.exportRecoveryPhrase() }
            #expect(export?.code == .sessionExpired)
            #expect(await eventually { authority.log.contains("stolen_token") })
        }
    }

    @Test func aLockedKeyringIsALoadingStateUntilUnlockedThenTheStoredSessionComesBack() async throws {
        let keyring = try TestKeyring()
        defer { keyring.stop() }
        let h = try await DaemonHarness.start(config: Self.config, environment: Self.bus(keyring))
        defer { h.shutdown() }
        let provider = h.provider()
        let (session, _, _) = try await h.logIn(provider, .email("locked@example.com"))
        _ = try await h.stop()

        try keyring.lock()
        try await h.start()
        #expect(try await Self.isLoading(h))
        #expect(h.log.contains("storage.unavailable"))
        let login = await rainError { try await provider.sendLoginCode(to: .email("locked@example.com")) }
        #expect(login?.code == .provider)
        #expect(login?.details.reason == "keyring_locked")
        #expect(login?.message.isEmpty == false)
        let read = await rainError { _ = try await provider.currentSession() }
        #expect(read?.details.reason == "keyring_locked")
        // The CLI exits with the provider status (11) and says so.
        let cli = try await h.runCLI(["login", "--email", "locked@example.com"])
        #expect(cli.status == 11, "\(cli)")
        #expect(cli.stderr.contains("RAIN_501"), "\(cli)")
        // Never a weaker provider instead, never a crash.
        #expect(h.isRunning)
        #expect(Self.recordedProvider(h) == "secret-service\n")
        #expect(Self.keyFiles(h).isEmpty)

        try keyring.restartUnlocked()
        // Each call while loading tries again (at most once a second): no 3 s round to wait for.
        #expect(await eventually(timeout: Self.loadTimeout) { (try? await Self.isLoading(h)) == false }, "\(h.log)")
        try await provider.awaitSessionRestore()
        #expect(try await provider.currentSession().accountID == session.accountID)
        _ = try await provider.account()
        #expect(h.log.contains("storage.ready"))
    }

    @Test func withoutASessionBusTheDaemonWaitsAndNeverFallsBackToFiles() async throws {
        // No DBUS_SESSION_BUS_ADDRESS, and the harness's XDG_RUNTIME_DIR holds no bus.
        let h = try await DaemonHarness.start(config: Self.config, environment: ["DBUS_SESSION_BUS_ADDRESS": nil])
        defer { h.shutdown() }
        let provider = h.provider()
        #expect(try await Self.isLoading(h))
        for _ in 0..<3 {
            let login = await rainError { try await provider.sendLoginCode(to: .email("nobus@example.com")) }
            #expect(login?.code == .provider)
            #expect(login?.details.reason == "no_secret_service")
            #expect(login?.message.isEmpty == false)
        }
        let cli = try await h.runCLI(["login", "--email", "nobus@example.com"])
        #expect(cli.status == 11, "\(cli)")
        #expect(h.isRunning)
        #expect(Self.keyFiles(h).isEmpty)
        let record = Self.recordedProvider(h) ?? ""
        #expect(!record.hasPrefix("file"))
        #expect(try await Self.isLoading(h))
    }

    @Test func aBusWithoutTheSecretServiceWaitsUntilTheKeyringStartsThenServes() async throws {
        let keyring = try TestKeyring()
        defer { keyring.stop() }
        try keyring.stopKeyringOnly()
        let h = try await DaemonHarness.start(config: Self.config, environment: Self.bus(keyring))
        defer { h.shutdown() }
        let provider = h.provider()
        #expect(try await Self.isLoading(h))
        let login = await rainError { try await provider.sendLoginCode(to: .email("late@example.com")) }
        #expect(login?.code == .provider)
        #expect(login?.details.reason == "no_secret_service")
        #expect(Self.keyFiles(h).isEmpty)

        try keyring.restartUnlocked()
        // The keyring answers another program's lookup first (it owns its bus name a moment
        // before it serves the collection): the bound below is the daemon's, not its start's.
        _ = try keyring.lookupItem(attributes: ["rain-test": "is-serving"])
        #expect(await eventually(timeout: Self.loadTimeout) { (try? await Self.isLoading(h)) == false }, "\(h.log)")
        try await h.logIn(provider, .email("late@example.com"))
        _ = try await provider.account()
        #expect(Self.keyFiles(h).isEmpty)
    }
}
