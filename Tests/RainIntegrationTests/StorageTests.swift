import Foundation
import RainCore
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// `rainwalletd storage …` with the real binaries: the recorded provider, the passphrase backup of
/// the embedded authority's master key and its restore into a fresh state directory.
@Suite struct StorageTests {
    static let passphrase = "a long test passphrase"
    /// The `file` provider named: `auto` would take a keyring or TPM the machine has.
    static let fileConfig = #"{"storage": {"provider": "file"}}"#

    /// Runs `rainwalletd ARGS…` with `stdin` as its standard input; its status and its stdout and stderr.
    func rainwalletd(_ h: DaemonHarness, _ arguments: [String], stdin: String = "") async throws -> (
        status: Int32, output: String
    ) {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_CONFIG_HOME"] = "\(h.directory)/xdg-config"
        environment["XDG_STATE_HOME"] = "\(h.directory)/xdg-state"
        // A keyring another suite of this process started (TestKeyring.shared sets the variable)
        // must not become the `auto` provider of these commands.
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        let r = try await TestProcess.run(
            try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path, arguments,
            environment: environment,
            input: stdin, timeout: .seconds(30))
        return (r.status, r.stdout + r.stderr)
    }

    @Test func aFirstStartRecordsTheFileProviderAndStatusShowsItsKeys() async throws {
        let h = try await DaemonHarness.start(config: Self.fileConfig)
        defer { h.shutdown() }
        // The provider in use, by value, in the ready line.
        let ready = h.log.split(separator: "\n").first { $0.contains("daemon.ready") }.map(String.init) ?? ""
        #expect(ready.contains(" keyProvider=file"), "\(ready)")
        #expect(ready.contains(" keyLocation="), "\(ready)")
        #expect(try String(contentsOfFile: "\(h.stateDirectory)/key-provider", encoding: .utf8) == "file\n")
        let (status, output) = try await rainwalletd(h, ["storage", "status", "--json", "--state-dir", h.stateDirectory])
        #expect(status == 0, "\(output)")
        let root = try jsonObject(output)
        #expect(root["provider"] as? String == "file")
        let slots = ((root["keys"] as? [[String: Any]]) ?? []).compactMap { $0["slot"] as? String }
        #expect(Set(slots) == ["storage", "authority-master", "device"])
        #expect(((root["keys"] as? [[String: Any]]) ?? []).contains { $0["algorithm"] as? String == "ed25519" })
    }

    @Test func aConfigNamingAnotherProviderThanTheRecordStopsTheStartWithTheCommandToRun() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        _ = try await h.stop()
        let config = "\(h.directory)/tpm.json"
        _ = FileManager.default.createFile(
            atPath: config, contents: Data(#"{"storage": {"provider": "tpm2"}}"#.utf8), attributes: [.posixPermissions: 0o600])
        let (status, output) = try await h.runDaemon(
            arguments: ["--socket", h.socketPath, "--state-dir", h.stateDirectory, "--config", config])
        #expect(status == 78)
        #expect(output.contains("storage migrate --to tpm2"))
    }

    @Test func backupThenRestoreIntoAFreshStateDirectoryOpensTheSameWallet() async throws {
        let config = #"{"profiles": {"default": {"allowExport": true}}}"#
        let a = try await DaemonHarness.start(config: config)
        defer { a.shutdown() }
        try await a.logIn(a.provider(), .email("backup@example.com"))
        let phrase = try await a.provider().exportRecoveryPhrase()
        _ = try await a.stop()

        let file = "\(a.directory)/master.rwkb"
        let backup = try await rainwalletd(
            a, ["storage", "backup", "--out", file, "--state-dir", a.stateDirectory], stdin: Self.passphrase + "\n")
        #expect(backup.status == 0, "\(backup.output)")
        #expect(fileMode(file)?.permissions == 0o600)
        // Never replaced without --force.
        let again = try await rainwalletd(
            a, ["storage", "backup", "--out", file, "--state-dir", a.stateDirectory], stdin: Self.passphrase + "\n")
        #expect(again.status == 1)

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
        // Without the key the daemon refuses to start rather than make a new key that loses every wallet.
        let refused = try await b.runDaemon(arguments: b.daemonArguments)
        #expect(refused.status == 78)
        #expect(refused.output.contains("storage restore"))

        let wrong = try await rainwalletd(
            b, ["storage", "restore", file, "--state-dir", b.stateDirectory], stdin: "not the passphrase\n")
        #expect(wrong.status == 1)
        let restore = try await rainwalletd(
            b, ["storage", "restore", file, "--state-dir", b.stateDirectory], stdin: Self.passphrase + "\n")
        #expect(restore.status == 0, "\(restore.output)")

        try await b.start()
        try await b.logIn(b.provider(), .email("backup@example.com"))
        #expect(try await b.provider().exportRecoveryPhrase() == phrase)
    }

    @Test func backupIsRefusedWhereThereIsNoMasterKey() async throws {
        let h = try await DaemonHarness.start(config: Self.fileConfig)
        defer { h.shutdown() }
        _ = try await h.stop()
        try FileManager.default.removeItem(atPath: "\(h.stateDirectory)/authority/authority.key")
        let (status, output) = try await rainwalletd(
            h, ["storage", "backup", "--out", "\(h.directory)/none.rwkb", "--state-dir", h.stateDirectory],
            stdin: Self.passphrase + "\n")
        #expect(status == 1)
        #expect(output.contains("RAIN_202"))
        #expect(!FileManager.default.fileExists(atPath: "\(h.directory)/none.rwkb"))
    }
}

/// `rainwalletd storage migrate` killed with SIGKILL at random points, back and forth
/// between the `file` provider and the one `RAIN_MIGRATE_PROVIDER` names (`tpm2` with
/// `RAIN_MIGRATE_TCTI`, e.g. a swtpm's `swtpm:path=…`, or `secret-service` in a session with an
/// unlocked keyring). After every kill the daemon starts (finishing the migration) and every
/// session of two profiles is still there and refreshes. `RAIN_KILL_ROUNDS` sets the number of
/// kills (default 30). Without `RAIN_MIGRATE_PROVIDER` the other provider is `tpm2` on a software
/// TPM (swtpm) started for the test. CI runs it in the kill-loop stage, not the integration stage.
///
/// The kills are drawn within a migration's measured span (from the journal's appearance to the
/// process's end, measured once each way before the loop and again at every uncut round), so that
/// most land half-way; after each kill the journal's step says where it landed, and the loop
/// prints the histogram. The config names a provider explicitly in two rounds of three: the old
/// one (a config never edited) or the new one (edited before migrating); a start after a kill is
/// never refused, and only the record rule refuses a start with no migration under way.
@Suite("Storage migration: SIGKILL at random points", .serialized)
struct MigrationKillLoopTests {
    static let profiles = ["default", "second"]

    /// Where a migration stands: no journal and the record unchanged (`none`), the journal's
    /// last durable step, or no journal and the record changed (`finished`).
    static func stand(_ h: DaemonHarness, from: String) -> String {
        journalStep(h) ?? (recorded(h) == from ? "none" : "finished")
    }

    /// The step the migration journal records, if there is one.
    static func journalStep(_ h: DaemonHarness) -> String? {
        guard let data = FileManager.default.contents(atPath: "\(h.stateDirectory)/storage-migration.json") else { return nil }
        let journal = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        return journal?["step"] as? String ?? "unreadable"
    }

    static func recorded(_ h: DaemonHarness) -> String {
        ((try? String(contentsOfFile: "\(h.stateDirectory)/key-provider", encoding: .utf8)) ?? "")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// One migration's course, since its process was spawned: when each step's journal write was
    /// first seen, and when the process ended.
    struct Span {
        var marks: [(step: String, at: Duration)]
        var end: Duration

        /// A kill delay: a window drawn at random (just before the journal, or one step's, from
        /// its write to the next one's or the end), then a point in it; so the kills spread over
        /// the steps, however long each takes.
        func draw() -> Duration {
            let first = marks.first?.at ?? end / 2
            var windows = [(first * 0.8, first)]
            for (i, mark) in marks.enumerated() { windows.append((mark.at, i + 1 < marks.count ? marks[i + 1].at : end)) }
            let (low, high) = windows.randomElement() ?? (.zero, end)
            return low + (high - low) * Double.random(in: 0...1)
        }
    }

    /// Watches `process` (a migration spawned at `started`) to its end, every millisecond.
    static func watch(_ process: TestProcess, _ h: DaemonHarness, since started: ContinuousClock.Instant) async throws -> Span {
        var marks: [(step: String, at: Duration)] = []
        while process.isRunning {
            if let step = journalStep(h), marks.last?.step != step { marks.append((step, .now - started)) }
            try await Task.sleep(for: .milliseconds(1))
        }
        return Span(marks: marks, end: .now - started)
    }

    @Test func everyKillLeavesEverySessionLoadableAndRefreshable() async throws {
        let environment = ProcessInfo.processInfo.environment
        let other = environment["RAIN_MIGRATE_PROVIDER"] ?? "tpm2"
        let rounds = min(Int(environment["RAIN_KILL_ROUNDS"] ?? "") ?? 30, 1000)
        var tpm: SoftwareTPM?
        if other == "tpm2" && environment["RAIN_MIGRATE_TCTI"] == nil { tpm = try SoftwareTPM() }
        defer { tpm?.stop() }
        let tcti = (environment["RAIN_MIGRATE_TCTI"] ?? tpm?.tcti).map { #", "tcti": "\#($0)""# } ?? ""
        let h = try await DaemonHarness.start(config: #"{"storage": {"provider": "file"\#(tcti)}}"#)
        defer { h.shutdown() }
        for profile in Self.profiles {
            try await h.logIn(h.provider(profile: profile), .email("\(profile)@example.com"))
        }
        _ = try await h.stop()
        let configPath = "\(h.directory)/config.json"
        func configure(_ provider: String) throws {
            try Data(#"{"storage": {"provider": "\#(provider)"\#(tcti)}}"#.utf8).write(to: URL(fileURLWithPath: configPath))
        }
        func migrate(to target: String, log: String) throws -> TestProcess {
            try TestProcess(
                try DaemonHarness.binaryDirectory().appendingPathComponent("rainwalletd-test").path,
                ["storage", "migrate", "--to", target, "--state-dir", h.stateDirectory, "--config", configPath],
                stdout: .file(log), stderr: .file(log))
        }
        /// Runs one migration to its end, timing its steps.
        func measure(to target: String) async throws -> Span {
            let started = ContinuousClock.now
            return try await Self.watch(migrate(to: target, log: "\(h.directory)/measure-\(target).log"), h, since: started)
        }
        try configure("auto")
        // One migration each way, uncut: the spans the kills are drawn in.
        var spans = ["file": try await measure(to: other)]
        spans[other] = try await measure(to: "file")
        #expect(Self.recorded(h) == "file")

        var target = other
        var kills = 0
        var switches = 0
        var refusedByTheRecordRule = 0
        var byStep: [String: Int] = [:]
        for round in 1...rounds {
            let from = Self.recorded(h)
            // Two rounds of three name a provider: the old one (never edited) or the new one (edited first).
            let configured = [0: "auto", 1: from, 2: target][round % 3] ?? "auto"
            try configure(configured)
            let log = "\(h.directory)/migrate-\(round).log"
            let span = spans[target] ?? Span(marks: [], end: .milliseconds(120))
            let started = ContinuousClock.now
            let process = try migrate(to: target, log: log)
            // Every fifth round runs to the end (and measures the steps again), so that migrations
            // also finish when a loaded machine makes every step slower than the drawn delay.
            if round % 5 != 0 {
                try await Task.sleep(until: started + span.draw())
                if process.isRunning {
                    process.signal(SIGKILL)
                    kills += 1
                    _ = await process.waitForExit(timeout: .seconds(30))
                    byStep[Self.stand(h, from: from), default: 0] += 1
                }
            } else {
                spans[target] = try await Self.watch(process, h, since: started)
            }
            _ = await process.waitForExit(timeout: .seconds(30))
            let migrateLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""

            // With no migration under way, a config naming the other provider than the record is
            // refused as always (the user changes it); with one under way, never.
            let stand = Self.stand(h, from: from)
            if configured != "auto", (stand == "none" || stand == "finished"), configured != Self.recorded(h) {
                let refused = try await h.runDaemon(arguments: h.daemonArguments)
                #expect(refused.status == 78, "round \(round) (\(stand)): \(refused.output)")
                #expect(refused.output.contains("storage migrate --to \(configured)"), "round \(round): \(refused.output)")
                refusedByTheRecordRule += 1
                try configure(Self.recorded(h))
            }

            // The daemon finishes any migration left half-way, then serves every session.
            try await h.start()
            for profile in Self.profiles {
                let provider = h.provider(profile: profile)
                try await provider.awaitSessionRestore()
                let restored = try await provider.currentSession()
                #expect(restored.accountID != nil, "round \(round): \(profile) lost its session: \(migrateLog)")
                let refused = await rainError { _ = try await provider.refreshSession() }
                #expect(refused == nil, "round \(round): \(profile) could not refresh: \(String(describing: refused))")
            }
            _ = try await h.stop()
            #expect(!FileManager.default.fileExists(atPath: "\(h.stateDirectory)/storage-migration.json"))
            // Next round goes the other way from wherever this one ended.
            let next = Self.recorded(h) == "file" ? other : "file"
            if next != target { switches += 1 }
            target = next
        }
        let order = ["none"] + ["started", "keysCreated", "rebound", "reencrypted", "recorded", "confirmed"] + ["finished"]
        let histogram = (order + byStep.keys.filter { !order.contains($0) }.sorted()).compactMap { step in
            byStep[step].map { "\(step) \($0)" }
        }
        let during = byStep.filter { !["none", "finished"].contains($0.key) }.values.reduce(0, +)
        print(
            """
            migration kill loop: \(rounds) rounds, \(kills) SIGKILLs, \(during) during a migration, \(switches) migrations \
            finished, \(refusedByTheRecordRule) starts refused by the record rule (no migration under way)
            kills by step: \(histogram.joined(separator: ", "))
            steps seen (ms since spawn): \(spans.map { span in
                "to \(span.key): " + (span.value.marks.map { "\($0.step) \(($0.at / .milliseconds(1)).rounded())" } + ["end \((span.value.end / .milliseconds(1)).rounded())"]).joined(separator: " ")
            }.sorted().joined(separator: "; "))
            """)
        // A loop whose kills all came before the first step would prove nothing.
        #expect(rounds < 5 || switches > 0, "no migration ever finished in \(rounds) rounds")
        #expect(kills < 10 || during >= 3, "only \(during) of \(kills) kills landed during a migration: \(histogram)")
    }
}

/// A lost or cleared TPM (here: the state directory's keys sealed on one swtpm,
/// the daemon started against another). The daemon serves and says what to do (RAIN_501
/// `tpm_key_lost` naming `storage reset`), `rainwalletd storage reset` moves the keys it cannot open
/// and their files into `lost-…` (kept), refusing to touch the wallets' master key without its
/// backup or `--lose-wallets`, and the next start lets the user log in again.
@Suite struct LostTPMTests {
    static func config(_ tpm: SoftwareTPM) -> String {
        #"{"storage": {"provider": "tpm2", "tcti": "\#(tpm.tcti)"}, "profiles": {"default": {"allowExport": true}}}"#
    }

    static func isLoading(_ h: DaemonHarness) async throws -> Bool {
        let bytes = try await h.call(Method.daemonGetInfo, payload: try GetInfoRequest().encode(), timeout: .seconds(5))
        return try GetInfoResponse.decode(bytes).capabilities.contains("storage-loading")
    }

    /// Starts a daemon on TPM `a`, logs in, stops it (writes a master-key backup to `backup`) and
    /// points its config at TPM `b`: a new motherboard.
    static func moveToAnotherTPM(
        _ a: SoftwareTPM, _ b: SoftwareTPM, email: String, backup: String? = nil
    ) async throws -> (h: DaemonHarness, account: String, phrase: [String]) {
        let h = try await DaemonHarness.start(config: config(a))
        try await h.logIn(h.provider(), .email(email))
        let account = try await h.provider().account().accountID
        let phrase = try await h.provider().exportRecoveryPhrase()
        _ = try await h.stop()
        if let backup {
            let made = try await StorageTests().rainwalletd(
                h,
                [
                    "storage", "backup", "--out", backup, "--state-dir", h.stateDirectory, "--config",
                    "\(h.directory)/config.json",
                ],
                stdin: StorageTests.passphrase + "\n")
            #expect(made.status == 0, "\(made.output)")
        }
        // The harness's config (relaxed send limits merged in; its slashes escaped), with the other TPM.
        let path = "\(h.directory)/config.json"
        let written = try String(contentsOfFile: path, encoding: .utf8)
        try Data(
            written.replacingOccurrences(
                of: a.directory.split(separator: "/").last.map(String.init) ?? "",
                with: b.directory.split(separator: "/").last.map(String.init) ?? ""
            ).utf8
        ).write(to: URL(fileURLWithPath: path))
        return (h, account, phrase)
    }

    @Test func onAnotherTPMTheDaemonSaysWhatToDoAndResetThenRestoreLetsTheUserBackIntoTheSameWallet() async throws {
        let (a, b) = (try SoftwareTPM(), try SoftwareTPM())
        defer {
            a.stop()
            b.stop()
        }
        let backup = "/tmp/rain-lost-tpm-\(UUID().uuidString.prefix(8)).rwkb"
        defer { try? FileManager.default.removeItem(atPath: backup) }
        let (h, account, phrase) = try await Self.moveToAnotherTPM(a, b, email: "lost-tpm@example.com", backup: backup)
        defer { h.shutdown() }
        let config = "\(h.directory)/config.json"
        let runner = StorageTests()
        try await h.start()
        #expect(try await Self.isLoading(h))
        let refused = await rainError { try await h.logIn(h.provider(), .email("lost-tpm@example.com")) }
        #expect(refused?.code == .provider)
        #expect(refused?.details.reason == "tpm_key_lost")
        #expect(refused?.message.contains("rainwalletd storage reset") == true, "\(String(describing: refused))")
        #expect(refused?.message.contains("storage restore") == true)
        #expect(try await h.provider().daemonInfo().storageProvider == "tpm2")
        // `storage status` answers while loading, with the reason.
        let status = try await h.runCLI(["storage", "status", "--json"])
        #expect(status.status == 0, "\(status)")
        let loading = try jsonObject(status.stdout)
        #expect(loading["provider"] as? String == "tpm2")
        #expect((loading["unavailable"] as? String)?.contains("RAIN_501 tpm_key_lost") == true, "\(loading)")
        _ = try await h.stop()

        // Reset will not move the wallets' master key: nothing moves, and it says what to do.
        let blobs = ["tpm2/storage.sealed", "tpm2/device-key.blob", "tpm2/authority-master.sealed"]
        let refusedReset = try await runner.rainwalletd(
            h, ["storage", "reset", "--state-dir", h.stateDirectory, "--config", config])
        #expect(refusedReset.status == 1)
        #expect(refusedReset.output.contains("storage restore"), "\(refusedReset.output)")
        #expect(refusedReset.output.contains("--lose-wallets"))
        #expect(blobs.allSatisfy { FileManager.default.fileExists(atPath: "\(h.stateDirectory)/\($0)") })

        // The backup replaces the master key TPM B cannot open (kept aside), then reset moves the rest.
        let restore = try await runner.rainwalletd(
            h, ["storage", "restore", backup, "--state-dir", h.stateDirectory, "--config", config],
            stdin: StorageTests.passphrase + "\n")
        #expect(restore.status == 0, "\(restore.output)")
        // A registered prompt terminal's record, sealed under the lost storage key: a start would
        // refuse it as tampered if it stayed.
        try Data("{}\n".utf8).write(to: URL(fileURLWithPath: "\(h.stateDirectory)/prompt-place.json"))
        let reset = try await runner.rainwalletd(
            h, ["storage", "reset", "--json", "--state-dir", h.stateDirectory, "--config", config])
        #expect(reset.status == 0, "\(reset.output)")
        let root = try jsonObject(reset.output)
        let directory = try #require(root["directory"] as? String)
        #expect(directory.hasPrefix("lost-"))
        let moved = Set((root["moved"] as? [String]) ?? [])
        #expect(
            moved.isSuperset(of: ["tpm2/storage.sealed", "tpm2/device-key.blob", "sessions", "device-id", "prompt-place.json"]),
            "\(moved)")
        #expect(!moved.contains("authority"))
        #expect(root["authorityReset"] as? Bool == false)
        // Kept, never deleted.
        for path in moved {
            #expect(FileManager.default.fileExists(atPath: "\(h.stateDirectory)/\(directory)/\(path)"), "\(path)")
            #expect(!FileManager.default.fileExists(atPath: "\(h.stateDirectory)/\(path)"), "\(path)")
        }
        #expect(FileManager.default.fileExists(atPath: "\(h.stateDirectory)/\(directory)/sessions/default.session"))
        let lostMaster = try FileManager.default.contentsOfDirectory(atPath: h.stateDirectory).filter {
            $0.hasPrefix("lost-")
                && FileManager.default.fileExists(atPath: "\(h.stateDirectory)/\($0)/tpm2/authority-master.sealed")
        }
        #expect(lostMaster.count == 1)

        // New keys on TPM B; the user logs in again, to the same account and wallet.
        try await h.start()
        #expect(try await !Self.isLoading(h))
        try await h.logIn(h.provider(), .email("lost-tpm@example.com"))
        #expect(try await h.provider().account().accountID == account)
        #expect(try await h.provider().exportRecoveryPhrase() == phrase)
    }

    @Test func withoutABackupLoseWalletsMovesTheDatabaseAsideAndANewAuthorityStarts() async throws {
        let (a, b) = (try SoftwareTPM(), try SoftwareTPM())
        defer {
            a.stop()
            b.stop()
        }
        let (h, account, _) = try await Self.moveToAnotherTPM(a, b, email: "no-backup@example.com")
        defer { h.shutdown() }
        let config = "\(h.directory)/config.json"
        let reset = try await StorageTests().rainwalletd(
            h, ["storage", "reset", "--lose-wallets", "--state-dir", h.stateDirectory, "--config", config])
        #expect(reset.status == 0, "\(reset.output)")
        #expect(reset.output.contains("new, empty authority"))
        let lost = try FileManager.default.contentsOfDirectory(atPath: h.stateDirectory).filter { $0.hasPrefix("lost-") }
        #expect(lost.count == 1)
        let kept = "\(h.stateDirectory)/\(lost.first ?? "")"
        #expect(FileManager.default.fileExists(atPath: "\(kept)/authority/authority.sqlite3"))
        #expect(FileManager.default.fileExists(atPath: "\(kept)/tpm2/authority-master.sealed"))

        try await h.start()
        #expect(try await !Self.isLoading(h))
        try await h.logIn(h.provider(), .email("no-backup@example.com"))
        #expect(try await h.provider().account().accountID != account)
        // A second reset finds nothing lost.
        _ = try await h.stop()
        let again = try await StorageTests().rainwalletd(
            h, ["storage", "reset", "--state-dir", h.stateDirectory, "--config", config])
        #expect(again.status == 1)
        #expect(again.output.contains("nothing to reset"))
    }
}
