import Foundation
import RainTestSupport
import RainWallet
import Testing

/// Another uid on the machine (`OtherUser`, through `setpriv`) squats the
/// socket path, runs its own daemon, plants symbolic links and files. Each test shows the defence,
/// then that the user's own daemon still serves.
@Suite("Attacker: the client trusts only the daemon it means to")
struct AttackerTrustTests {
    static let attacker = OtherUser.uid
    static let skipReason: Comment = "needs a second uid: root and /usr/bin/setpriv (CI runs as root)"
    static var canSwitchUID: Bool { OtherUser.unavailableReason == nil }

    /// The victim's own daemon, started again after the attack, still answers its CLI.
    func expectOwnDaemonServes(_ h: DaemonHarness) async throws {
        if !h.isRunning { try await h.start() }
        let status = try await h.runCLI(["status"])
        #expect(status.status == 0, "own daemon: \(status)")
    }

    /// A directory the attacker owns under the 0755 copy of the binaries, so it can reach it.
    func attackerDirectory(_ bin: AccessibleBinaries, _ name: String, mode: mode_t = 0o711) throws -> String {
        let dir = "\(bin.directory)/\(name)"
        try OtherUser.makeDirectory(dir, mode: mode)
        return dir
    }

    /// Starts `rainwalletd` as the attacker, serving `socket` with the victim's uid allowed, and
    /// waits until it is ready.
    func startAttackerDaemon(_ bin: AccessibleBinaries, socket: String) async throws -> TestProcess {
        let home = try attackerDirectory(bin, "attacker-home", mode: 0o700)
        let config = "\(home)/config.json"
        #expect(FileManager.default.createFile(atPath: config, contents: Data(#"{"allowedUIDs": [\#(getuid())]}"#.utf8)))
        try OtherUser.chown(config)
        #expect(chmod(config, 0o600) == 0)
        let log = "\(bin.directory)/attacker-daemon.log"
        let p = try bin.launch(
            as: Self.attacker, "rainwalletd", ["--socket", socket, "--state-dir", "\(home)/state", "--config", config],
            home: home, log: log)
        let ready = await eventually(timeout: .seconds(20)) {
            DaemonHarness.readFile(log).contains("daemon.ready") || !p.isRunning
        }
        try #require(ready && p.isRunning, "attacker daemon log:\n\(DaemonHarness.readFile(log))")
        return p
    }

    /// SIGKILL; for `defer`, so it returns at once (the process is collected by `waitpid` later).
    func stop(_ p: TestProcess) {
        p.signal(SIGKILL)
    }

    @Test(
        "another uid squats the /tmp fallback directory and serves there: the victim's daemon refuses the directory, the victim's CLI refuses that daemon (RAIN_101 naming its uid) unless told --daemon-uid",
        .enabled(if: canSwitchUID, skipReason))
    func squattedFallbackDirectory() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }
        // A world-writable sticky directory standing in for /tmp (TMPDIR, as ssh-agent reads it).
        let tmp = "\(bin.directory)/tmp"
        #expect(mkdir(tmp, 0o777) == 0 && chmod(tmp, 0o1777) == 0)
        let squatted = "\(tmp)/rainwallet-\(getuid())"
        try OtherUser.makeDirectory(squatted, mode: 0o711)
        let socket = "\(squatted)/rainwalletd.sock"
        let attackerDaemon = try await startAttackerDaemon(bin, socket: socket)
        defer { stop(attackerDaemon) }

        // The victim's daemon, with no XDG_RUNTIME_DIR and a state home too long for a socket
        // address, falls back to TMPDIR/rainwallet-UID: it finds the squatted directory and refuses.
        let longStateHome = "\(h.directory)/" + String(repeating: "s", count: 100)
        try h.launch(
            executable: h.binaryDirectory.appendingPathComponent("rainwalletd-test"),
            arguments: ["--state-dir", h.stateDirectory],
            environment: ["XDG_RUNTIME_DIR": "", "XDG_STATE_HOME": longStateHome, "TMPDIR": tmp])
        #expect(try await h.waitForExit() != 0)
        #expect(h.log.contains(squatted) && h.log.contains("owned by uid \(Self.attacker)"), "log:\n\(h.log)")

        // The victim's CLI at that path: refused, naming the owner and what to do.
        let refused = try await h.runCLI(["status"], socketPath: socket)
        #expect(refused.status == 2 && refused.stderr.contains("RAIN_101"), "\(refused)")
        #expect(refused.stderr.contains("uid \(Self.attacker)") && refused.stderr.contains("--daemon-uid"), "\(refused)")

        // Named on purpose, the same daemon is used (the allowedUIDs setups keep working).
        let named = try await h.runCLI(["--daemon-uid", "\(Self.attacker)", "status"], socketPath: socket)
        #expect(named.status == 0, "\(named)")

        try await expectOwnDaemonServes(h)
    }

    @Test(
        "the attacker's daemon behind a socket in the victim's own directory: SO_PEERCRED names its uid (RAIN_101); --daemon-uid and RainWalletConfig.daemonUID accept it",
        .enabled(if: canSwitchUID, skipReason))
    func foreignDaemonRefusedByPeerUID() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }
        let attackerSocket = "\(try attackerDirectory(bin, "run"))/d.sock"
        let attackerDaemon = try await startAttackerDaemon(bin, socket: attackerSocket)
        defer { stop(attackerDaemon) }
        // The attacker's listening socket now sits where the victim looks for its own, in a
        // directory of the victim's that passes every directory check: only the peer's uid tells.
        let victimSocket = "\(h.directory)/own/d.sock"
        #expect(mkdir("\(h.directory)/own", 0o700) == 0)
        #expect(rename(attackerSocket, victimSocket) == 0, "\(String(cString: strerror(errno)))")

        let refused = try await h.runCLI(["status"], socketPath: victimSocket)
        #expect(refused.status == 2 && refused.stderr.contains("RAIN_101"), "\(refused)")
        #expect(refused.stderr.contains("runs as uid \(Self.attacker)"), "\(refused)")

        let named = try await h.runCLI(["--daemon-uid", "\(Self.attacker)", "status"], socketPath: victimSocket)
        #expect(named.status == 0, "\(named)")

        let provider = RainProvider(RainWalletConfig(socketPath: victimSocket))
        let error = await rainError { _ = try await provider.daemonInfo() }
        #expect(error?.code == .notInitialized, "\(String(describing: error))")
        let namedProvider = RainProvider(RainWalletConfig(socketPath: victimSocket, daemonUID: Self.attacker))
        #expect(await rainError { _ = try await namedProvider.daemonInfo() } == nil)

        try await expectOwnDaemonServes(h)
    }

    @Test(
        "a symbolic link as the socket directory is refused by the daemon and by the client",
        .enabled(if: canSwitchUID, skipReason))
    func symlinkedSocketDirectory() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        // Even a link to a directory of the victim's own: the daemon never follows one.
        let target = "\(h.directory)/real"
        #expect(mkdir(target, 0o700) == 0)
        let link = "\(h.directory)/link"
        #expect(symlink(target, link) == 0)
        try OtherUser.chown(link)
        let (status, output) = try await h.runDaemon(arguments: [
            "--socket", "\(link)/d.sock", "--state-dir", "\(h.directory)/s2",
        ])
        #expect(status == 78, "\(output)")
        #expect(output.contains("\(link) is a symbolic link"), "\(output)")
        #expect(fileMode("\(target)/d.sock") == nil)

        // The client does not follow a link to its daemon either, even to the real one.
        let ownLink = "\(h.directory)/ownlink"
        #expect(symlink(h.directory, ownLink) == 0)
        let refused = try await h.runCLI(["status"], socketPath: "\(ownLink)/d.sock")
        #expect(refused.status == 2 && refused.stderr.contains("symbolic link"), "\(refused)")

        try await expectOwnDaemonServes(h)
    }

    @Test(
        "symbolic links planted for the state directory, the config and a key file stop the daemon, naming the path",
        .enabled(if: canSwitchUID, skipReason), arguments: ["state", "config", "key"])
    func symlinkedStateConfigKey(_ what: String) async throws {
        let h = try DaemonHarness.prepare(config: "{}")
        defer { h.shutdown() }
        try await h.start()
        try await h.stop()
        let configPath = try #require(h.configPath)
        let planted: String
        switch what {
        case "state":
            // The victim's state moved aside; a link to it (a directory the victim owns) is refused.
            let real = "\(h.directory)/state-real"
            #expect(rename(h.stateDirectory, real) == 0)
            #expect(symlink(real, h.stateDirectory) == 0)
            planted = h.stateDirectory
        case "config":
            let real = "\(h.directory)/config-real.json"
            #expect(rename(configPath, real) == 0)
            #expect(symlink(real, configPath) == 0)
            planted = configPath
        default:
            let key = "\(h.stateDirectory)/storage.key"
            let real = "\(h.directory)/storage-real.key"
            #expect(rename(key, real) == 0)
            #expect(symlink(real, key) == 0)
            planted = key
        }
        try OtherUser.chown(planted)
        try h.launch()
        #expect(try await h.waitForExit() == 78)
        #expect(h.log.contains("\(planted) is a symbolic link"), "log:\n\(h.log)")

        #expect(unlink(planted) == 0)
        let realPath =
            ["state": "\(h.directory)/state-real", "config": "\(h.directory)/config-real.json"][what]
            ?? "\(h.directory)/storage-real.key"
        #expect(rename(realPath, planted) == 0)
        try await expectOwnDaemonServes(h)
    }

    @Test(
        "an outbox.jsonl planted as a symbolic link to the attacker's file receives no code",
        .enabled(if: canSwitchUID, skipReason))
    func symlinkedOutbox() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }
        let loot = "\(try attackerDirectory(bin, "loot"))/codes"
        #expect(FileManager.default.createFile(atPath: loot, contents: nil))
        try OtherUser.chown(loot)
        #expect(chmod(loot, 0o666) == 0)
        let outbox = "\(h.stateDirectory)/authority/outbox.jsonl"
        _ = unlink(outbox)
        #expect(symlink(loot, outbox) == 0)

        let sent = try await h.runCLI(["code", "send", "--email", "victim@example.com"])
        #expect(sent.status != 0, "\(sent)")
        #expect(DaemonHarness.readFile(loot).isEmpty, "the code went through the link")

        #expect(unlink(outbox) == 0)
        let again = try await h.runCLI(["code", "send", "--email", "victim@example.com"])
        #expect(again.status == 0, "\(again)")
        #expect(try await h.latestCode(for: "victim@example.com") != nil)
    }

    @Test(
        "a config owned by another uid, or writable by group or others, is refused (78) naming path, owner or mode and the fix",
        .enabled(if: canSwitchUID, skipReason), arguments: ["owner", "group-writable", "other-writable"])
    func untrustedConfig(_ how: String) async throws {
        let h = try DaemonHarness.prepare(config: #"{"allowedUIDs": [\#(Self.attacker)]}"#)
        defer { h.shutdown() }
        let config = try #require(h.configPath)
        switch how {
        case "owner": try OtherUser.chown(config)
        case "group-writable": #expect(chmod(config, 0o620) == 0)
        default: #expect(chmod(config, 0o602) == 0)
        }
        try h.launch()
        #expect(try await h.waitForExit() == 78)
        let log = h.log
        #expect(log.contains("config file \(config)"), "log:\n\(log)")
        #expect(how == "owner" ? log.contains("owned by uid \(Self.attacker)") : log.contains("chmod go-w"), "log:\n\(log)")

        #expect(lchown(config, getuid(), getgid()) == 0 && chmod(config, 0o600) == 0)
        try await expectOwnDaemonServes(h)
    }

    @Test(
        "a state directory owned by another uid, or writable by others, is refused (78) naming it",
        .enabled(if: canSwitchUID, skipReason), arguments: ["owner", "other-writable"])
    func untrustedStateDirectory(_ how: String) async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        if how == "owner" {
            try OtherUser.makeDirectory(h.stateDirectory, mode: 0o700)
        } else {
            #expect(mkdir(h.stateDirectory, 0o700) == 0 && chmod(h.stateDirectory, 0o777) == 0)
        }
        try h.launch()
        #expect(try await h.waitForExit() == 78)
        #expect(h.log.contains("state directory \(h.stateDirectory)"), "log:\n\(h.log)")
        #expect(fileMode(h.socketPath) == nil)
        // Nothing was changed in it.
        #expect(fileMode(h.stateDirectory)?.permissions == (how == "owner" ? 0o700 : 0o777))

        #expect(rmdir(h.stateDirectory) == 0)
        try await expectOwnDaemonServes(h)
    }

    @Test("a shared 1777 directory given with --socket is refused and keeps its mode")
    func sharedSocketDirectoryNotChmodded() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let shared = "\(h.directory)/shared"
        #expect(mkdir(shared, 0o777) == 0 && chmod(shared, 0o1777) == 0)
        let (status, output) = try await h.runDaemon(arguments: [
            "--socket", "\(shared)/x.sock", "--state-dir", "\(h.directory)/s2",
        ])
        #expect(status == 78, "\(output)")
        #expect(output.contains(shared) && output.contains("1777"), "\(output)")
        #expect(fileMode(shared)?.permissions == 0o1777)
        #expect(fileMode("\(shared)/x.sock") == nil)
        try await expectOwnDaemonServes(h)
    }

    @Test("a --socket directory that other allowed uids cannot traverse is refused, not chmodded")
    func explicitDirectoryModeNotRepaired() async throws {
        let h = try DaemonHarness.prepare(config: #"{"allowedUIDs": [65534]}"#)
        defer { h.shutdown() }
        let dir = "\(h.directory)/private"
        #expect(mkdir(dir, 0o700) == 0 && chmod(dir, 0o700) == 0)
        var args = h.daemonArguments
        args[1] = "\(dir)/d.sock"
        let (status, output) = try await h.runDaemon(arguments: args)
        #expect(status == 78, "\(output)")
        #expect(output.contains("chmod 711 \(dir)"), "\(output)")
        #expect(fileMode(dir)?.permissions == 0o700)
        try await expectOwnDaemonServes(h)
    }

    @Test("--daemon-uid that is not a number is a usage error (64); naming the daemon's own uid works")
    func daemonUIDOption() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let bad = try await h.runCLI(["--daemon-uid", "root", "status"])
        #expect(bad.status == 64 && bad.stderr.contains("--daemon-uid"), "\(bad)")
        let own = try await h.runCLI(["--daemon-uid", "\(getuid())", "status"])
        #expect(own.status == 0, "\(own)")
        // Naming a uid the daemon does not run as refuses it, even the user's own daemon.
        let other = try await h.runCLI(["--daemon-uid", "\(Self.attacker)", "status"])
        #expect(other.status == 2 && other.stderr.contains("runs as uid \(getuid())"), "\(other)")
    }

    @Test("a second daemon on the same state directory exits 78 naming the pid that holds it")
    func secondDaemonOnStateDirectory() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let pid = try #require(h.pid)
        let (status, output) = try await h.runDaemon(arguments: [
            "--socket", "\(h.directory)/second.sock", "--state-dir", h.stateDirectory,
        ])
        #expect(status == 78, "\(output)")
        #expect(output.contains("pid \(pid)") && output.contains(h.stateDirectory), "\(output)")
        #expect(fileMode("\(h.directory)/second.sock") == nil)
        try await expectOwnDaemonServes(h)

        // Once the first stops, the directory is free again.
        try await h.stop()
        try await h.start()
        try await expectOwnDaemonServes(h)
    }

    @Test("a second authority on the same state directory exits 78 naming the pid that holds it")
    func secondAuthorityOnStateDirectory() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        try await AuthorityProcess.with(in: h.directory, ["--listen", "127.0.0.1:0"]) { authority in
            let (status, output) = try await h.runDaemon(arguments: [
                "authority", "--listen", "127.0.0.1:0", "--state-dir", "\(h.directory)/authority", "--dev-outbox",
            ])
            #expect(status == 78, "\(output)")
            #expect(output.contains("pid \(authority.pid)"), "\(output)")
        }
    }
}
