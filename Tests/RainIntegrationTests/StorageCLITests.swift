import Foundation
import RainCore
import RainTestSupport
import RainWallet
import Testing

/// `rainwallet storage status|backup|migrate` on a running daemon, the provider
/// in `info` and `status --json`, and `rainwalletd storage migrate --authority` against a
/// real remote authority: real binaries, a software TPM (swtpm) as the target.
@Suite struct StorageCLITests {
    static let passphrase = "a long test passphrase"

    /// A config on the `file` provider that reaches `tpm` for a migration, and allows export.
    static func config(_ provider: String, tpm: SoftwareTPM) -> String {
        #"{"storage": {"provider": "\#(provider)", "tcti": "\#(tpm.tcti)"}, "profiles": {"default": {"allowExport": true}}}"#
    }

    /// From here on the record decides (only a migration changes it), as after a first start with `auto`.
    static func useRecordedProvider(_ h: DaemonHarness, tpm: SoftwareTPM) throws {
        try Data(config("auto", tpm: tpm).utf8).write(to: URL(fileURLWithPath: "\(h.directory)/config.json"))
    }

    /// Whether a daemon started on a copy of `h`'s session file with `storageKey` (and a device key
    /// of its own) loads the session: what someone holding that key could read.
    static func sessionOpens(_ h: DaemonHarness, withStorageKey storageKey: String) async throws -> Bool {
        let other = try DaemonHarness.prepare()
        defer { other.shutdown() }
        let fm = FileManager.default
        try fm.createDirectory(
            atPath: "\(other.stateDirectory)/sessions", withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        try fm.copyItem(atPath: storageKey, toPath: "\(other.stateDirectory)/storage.key")
        try fm.copyItem(
            atPath: "\(h.stateDirectory)/sessions/default.session", toPath: "\(other.stateDirectory)/sessions/default.session")
        try await other.start()
        let provider = other.provider()
        try await provider.awaitSessionRestore()
        return try await provider.currentSession().hasActiveSession
    }

    @Test func aLiveMigrationToTPMKeepsTheSessionAndTheOldStorageKeyOpensNothing() async throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let h = try await DaemonHarness.start(config: Self.config("file", tpm: tpm))
        defer { h.shutdown() }
        let provider = h.provider()
        _ = try await h.logIn(provider, .email("migrate@example.com"))
        let account = try await provider.account()
        let phrase = try await provider.exportRecoveryPhrase()
        #expect(try await provider.daemonInfo().storageProvider == "file")
        let oldKey = "\(h.directory)/old-storage.key"
        try FileManager.default.copyItem(atPath: "\(h.stateDirectory)/storage.key", toPath: oldKey)
        // The old key opens today's file (the control for the check below).
        #expect(try await Self.sessionOpens(h, withStorageKey: oldKey))
        try Self.useRecordedProvider(h, tpm: tpm)

        let migrate = try await h.runCLI(["storage", "migrate", "--to", "tpm2"])
        #expect(migrate.status == 0, "\(migrate)")
        #expect(migrate.stdout.contains("1 session file(s) and 1 sealed record(s) re-encrypted"), "\(migrate)")
        #expect(migrate.stdout.contains("migration to tpm2 done"))
        #expect(migrate.stdout.contains("sessions restored"))

        // The same daemon serves the session from the TPM's keys: account, refresh, export.
        #expect(try await provider.account().accountID == account.accountID)
        #expect(await rainError { _ = try await provider.refreshSession() } == nil)
        #expect(try await provider.exportRecoveryPhrase() == phrase)
        let status = try await h.runCLI(["storage", "status", "--json"])
        #expect(status.status == 0, "\(status)")
        let root = try jsonObject(status.stdout)
        #expect(root["provider"] as? String == "tpm2")
        let keys = (root["keys"] as? [[String: Any]]) ?? []
        #expect(Set(keys.compactMap { $0["slot"] as? String }) == ["storage", "authority-master", "device"])
        #expect(keys.contains { $0["slot"] as? String == "device" && $0["algorithm"] as? String == "ecdsa-p256" })
        #expect(keys.allSatisfy { !(($0["keyId"] as? String) ?? "").isEmpty })
        #expect(root["migration"] == nil)
        // The provider in use, in info and status --json.
        let info = try jsonObject(try await h.runCLI(["info", "--json"]).stdout)
        #expect(info["storageProvider"] as? String == "tpm2")
        #expect(try await h.runCLI(["info"]).stdout.contains("key provider: tpm2"))
        let session = try jsonObject(try await h.runCLI(["status", "--json"]).stdout)
        #expect(session["storageProvider"] as? String == "tpm2")
        #expect(!FileManager.default.fileExists(atPath: "\(h.stateDirectory)/storage.key"))

        // A restart opens the same session from the TPM.
        _ = try await h.stop()
        try await h.start()
        let restarted = h.provider()
        try await restarted.awaitSessionRestore()
        #expect(try await restarted.account().accountID == account.accountID)
        #expect(await rainError { _ = try await restarted.refreshSession() } == nil)
        // A copy of the old storage key opens none of the new files.
        #expect(try await !Self.sessionOpens(h, withStorageKey: oldKey))
    }

    @Test func aCallDuringALiveMigrationIsRefusedAsStorageMigrating() async throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let h = try DaemonHarness.prepare(config: Self.config("file", tpm: tpm))
        defer { h.shutdown() }
        // The daemon holds the migration, after it began refusing calls, until this FIFO is written and closed.
        let hold = "\(h.directory)/migration.hold"
        #expect(mkfifo(hold, 0o600) == 0)
        try h.launch(
            executable: h.binaryDirectory.appendingPathComponent("rainwalletd-test"), arguments: h.daemonArguments,
            environment: ["RAINWALLETD_TEST_MIGRATION_HOLD": hold])
        try await h.waitUntilReady()
        let provider = h.provider()
        _ = try await h.logIn(provider, .email("held@example.com"))
        // GetState on this connection before the migration: the quick lane keeps what it found
        // (the profile's runtime) for the connection.
        #expect(try await provider.currentSession().hasActiveSession)
        try Self.useRecordedProvider(h, tpm: tpm)

        let migrate = try h.launchCLI(["storage", "migrate", "--to", "tpm2"])
        let isMigrating = await eventually {
            (try? await provider.daemonInfo().capabilities.contains("storage-migrating")) == true
        }
        #expect(isMigrating)
        let refused = await rainError { _ = try await provider.account() }
        #expect(refused?.code == .provider)
        #expect(refused?.details.reason == "storage_migrating")
        let second = await rainError { _ = try await provider.storageStatus() }
        #expect(second?.details.reason == "storage_migrating")
        let state = await rainError { _ = try await provider.currentSession() }
        #expect(state?.details.reason == "storage_migrating")
        // GetInfo still answers, with the provider.
        #expect(try await provider.daemonInfo().storageProvider == "file")

        // Let it go on.
        let writer = open(hold, O_WRONLY | O_CLOEXEC)
        #expect(writer >= 0)
        close(writer)
        let done = try await migrate.finish()
        #expect(done.status == 0, "\(done)")
        #expect(try await provider.account().contacts.isEmpty == false)
        #expect(try await provider.daemonInfo().storageProvider == "tpm2")
        // The keys were opened anew with a new service: what the quick lane kept for this
        // connection belongs to the old one, and must not answer for the new.
        #expect(try await provider.currentSession().hasActiveSession)
        _ = try await provider.logout()
        #expect(try await provider.currentSession().authState == .unauthenticated)
    }

    @Test func backupThroughTheDaemonRestoresIntoAStateDirectoryWithoutAMasterKey() async throws {
        let config = #"{"profiles": {"default": {"allowExport": true}}}"#
        let a = try await DaemonHarness.start(config: config)
        defer { a.shutdown() }
        _ = try await a.logIn(a.provider(), .email("cli-backup@example.com"))
        let phrase = try await a.provider().exportRecoveryPhrase()

        let file = "\(a.directory)/master.rwkb"
        let backup = try await a.runCLI(["storage", "backup", "--out", file], stdin: Self.passphrase + "\n")
        #expect(backup.status == 0, "\(backup)")
        #expect(fileMode(file)?.permissions == 0o600)
        // The passphrase never reaches the daemon's log.
        #expect(!a.log.contains(Self.passphrase))
        // Never replaced without --force; replaced with it.
        let again = try await a.runCLI(["storage", "backup", "--out", file], stdin: Self.passphrase + "\n")
        #expect(again.status == 3, "\(again)")
        let forced = try await a.runCLI(["storage", "backup", "--out", file, "--force"], stdin: Self.passphrase + "\n")
        #expect(forced.status == 0, "\(forced)")
        _ = try await a.stop()

        // A new machine: the database copied over, the master key not (a lost TPM).
        let b = try DaemonHarness.prepare(config: config)
        defer { b.shutdown() }
        try FileManager.default.createDirectory(
            atPath: "\(b.stateDirectory)/authority", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for name in try FileManager.default.contentsOfDirectory(atPath: "\(a.stateDirectory)/authority")
        where name.hasPrefix("authority.sqlite3") {
            try FileManager.default.copyItem(
                atPath: "\(a.stateDirectory)/authority/\(name)", toPath: "\(b.stateDirectory)/authority/\(name)")
        }
        let restore = try await StorageTests().rainwalletd(
            b, ["storage", "restore", file, "--state-dir", b.stateDirectory], stdin: Self.passphrase + "\n")
        #expect(restore.status == 0, "\(restore.output)")
        try await b.start()
        _ = try await b.logIn(b.provider(), .email("cli-backup@example.com"))
        #expect(try await b.provider().exportRecoveryPhrase() == phrase)
    }

    @Test(arguments: ["", "\n", "short\n"])
    func backupWithoutAUsablePassphraseIsAClearErrorAndWritesNothing(stdin: String) async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let file = "\(h.directory)/none.rwkb"
        let result = try await h.runCLI(["storage", "backup", "--out", file, "--json"], stdin: stdin)
        #expect(result.status == 3, "\(result)")
        #expect(result.stderr.contains("RAIN_102"))
        #expect(result.stderr.contains("passphrase"))
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    @Test(.enabled(if: OtherUser.unavailableReason == nil, "needs root and setpriv for a second uid"))
    func aUIDAllowedToUseTheDaemonMayNotReachItsKeys() async throws {
        let h = try await DaemonHarness.start(config: #"{"allowedUIDs": [\#(AccessTests.allowedUID)]}"#)
        defer { h.shutdown() }
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }
        let daemonUID = ["--daemon-uid", "\(getuid())"]
        // The control: that uid is served.
        let served = try await bin.runCLI(as: AccessTests.allowedUID, socket: h.socketPath, daemonUID + ["info"])
        #expect(served.status == 0, "\(served)")
        // Nor its audit log.
        for arguments in [["storage", "status"], ["storage", "migrate", "--to", "tpm2"], ["audit"]] {
            let refused = try await bin.runCLI(as: AccessTests.allowedUID, socket: h.socketPath, daemonUID + arguments)
            #expect(refused.status == 5, "\(arguments): \(refused)")
            #expect(refused.stderr.contains("RAIN_202") && refused.stderr.contains("only this daemon's own user"), "\(refused)")
        }
        // Its own user may.
        #expect(try await h.runCLI(["storage", "status"]).status == 0)
    }

    @Test(.enabled(if: OtherUser.unavailableReason == nil, "needs root and setpriv for a second uid"))
    func whileTheKeysLoadStorageStatusIsStillTheDaemonUsersAlone() async throws {
        // A keyring that cannot be reached (no session bus): the daemon serves, loading.
        let config = #"{"allowedUIDs": [\#(AccessTests.allowedUID)], "storage": {"provider": "secret-service"}}"#
        let h = try await DaemonHarness.start(config: config, environment: ["DBUS_SESSION_BUS_ADDRESS": nil])
        defer { h.shutdown() }
        #expect(try await SecretServiceDaemonTests.isLoading(h))
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }
        let refused = try await bin.runCLI(
            as: AccessTests.allowedUID, socket: h.socketPath, ["--daemon-uid", "\(getuid())", "storage", "status"])
        #expect(refused.status == 5, "\(refused)")
        #expect(refused.stderr.contains("RAIN_202") && refused.stderr.contains("only this daemon's own user"), "\(refused)")
        let own = try await h.runCLI(["storage", "status", "--json"])
        #expect(own.status == 0, "\(own)")
        #expect(own.stdout.contains("no_secret_service"), "\(own)")
    }
}

/// `rainwalletd storage migrate --authority`: the offline migration of a
/// device of a remote authority proves its device keys on the connection, so the authority
/// rebinds the sessions to the new key.
@Suite struct RemoteStorageMigrationTests {
    @Test func anOfflineMigrationWithARemoteAuthorityRebindsTheDeviceKey() async throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let address = "127.0.0.1:\(authority.port)"
            let h = try await DaemonHarness.start(
                config: StorageCLITests.config("file", tpm: tpm), extraArguments: ["--authority", address])
            defer { h.shutdown() }
            let provider = h.provider()
            _ = try await h.logIn(provider, .email("remote-migrate@example.com"))
            let account = try await provider.account()
            // A remote authority's master key is not this device's to back up, and the user is
            // not asked to confirm a backup that cannot be written.
            let backup = try await h.runCLI(
                ["storage", "backup", "--out", "\(h.directory)/none.rwkb"], stdin: StorageCLITests.passphrase + "\n")
            #expect(backup.status == 5, "\(backup)")
            #expect(backup.stderr.contains("uses a remote authority"), "\(backup)")
            #expect(!h.answeredPrompts.contains { $0.contains("passphrase backup") }, "asked: \(h.answeredPrompts)")
            _ = try await h.stop()
            try StorageCLITests.useRecordedProvider(h, tpm: tpm)

            let migrate = try await StorageTests().rainwalletd(
                h,
                [
                    "storage", "migrate", "--to", "tpm2", "--authority", address, "--state-dir", h.stateDirectory,
                    "--config", "\(h.directory)/config.json",
                ])
            #expect(migrate.status == 0, "\(migrate.output)")
            #expect(migrate.output.contains("the authority confirmed the new device key"))
            #expect(!FileManager.default.fileExists(atPath: "\(h.stateDirectory)/storage-migration.json"))
            #expect(authority.log.contains("device.key_confirmed"))

            try await h.start()
            let restarted = h.provider()
            try await restarted.awaitSessionRestore()
            #expect(try await restarted.account().accountID == account.accountID)
            #expect(await rainError { _ = try await restarted.refreshSession() } == nil)
            #expect(try await restarted.daemonInfo().storageProvider == "tpm2")
        }
    }

    @Test func aLiveMigrationWithARemoteAuthorityRebindsTheRunningDevice() async throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let setup = try DaemonHarness.prepare()
        defer { setup.shutdown() }
        try await AuthorityProcess.with(in: setup.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let h = try await DaemonHarness.start(
                config: StorageCLITests.config("file", tpm: tpm), extraArguments: ["--authority", "127.0.0.1:\(authority.port)"])
            defer { h.shutdown() }
            let provider = h.provider()
            _ = try await h.logIn(provider, .email("remote-live@example.com"))
            let account = try await provider.account()
            try StorageCLITests.useRecordedProvider(h, tpm: tpm)

            let migrate = try await h.runCLI(["storage", "migrate", "--to", "tpm2"])
            #expect(migrate.status == 0, "\(migrate)")
            #expect(authority.log.contains("device.key_confirmed"))
            #expect(try await provider.account().accountID == account.accountID)
            #expect(await rainError { _ = try await provider.refreshSession() } == nil)

            _ = try await h.stop()
            try await h.start()
            let restarted = h.provider()
            try await restarted.awaitSessionRestore()
            #expect(try await restarted.account().accountID == account.accountID)
            #expect(try await restarted.daemonInfo().storageProvider == "tpm2")
        }
    }
}
