import Foundation
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// Who may reach the daemon, and what it refuses to start with.
@Suite("Access: peer uids, socket and file modes, hardening")
struct AccessTests {
    /// The uid the config allows, and a third one it does not (neither is the daemon's own).
    static let allowedUID: UInt32 = 65534
    static let otherUID: UInt32 = 65533

    /// The cross-uid tests switch uid with `setpriv`, which only root can do (CI runs as root). On a
    /// developer's machine they are skipped; everything else here runs everywhere.
    static let canSwitchUID = getuid() == 0 && FileManager.default.isExecutableFile(atPath: setprivPath)
    static let setprivPath = "/usr/bin/setpriv"
    static let skipReason: Comment = "needs root and /usr/bin/setpriv to run clients as other uids (CI runs as root)"

    @Test(
        "allowedUIDs [65534]: directory 0711, socket 0666; uid 65534 is served, uid 65533 reaches the socket and is refused at accept (RAIN_202, its CLI says why)",
        .enabled(if: canSwitchUID, skipReason))
    func allowedUIDServedOthersRefused() async throws {
        let h = try await DaemonHarness.start(config: #"{"allowedUIDs": [\#(Self.allowedUID)]}"#)
        defer { h.shutdown() }
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }

        let dir = try #require(fileMode(h.directory))
        #expect(dir.type == S_IFDIR && dir.permissions == 0o711, "socket directory mode \(String(dir.permissions, radix: 8))")
        let sock = try #require(fileMode(h.socketPath))
        #expect(sock.type == S_IFSOCK && sock.permissions == 0o666, "socket mode \(String(sock.permissions, radix: 8))")

        // A client accepts a daemon of another uid only when told to (--daemon-uid).
        let daemonUID = ["--daemon-uid", "\(getuid())"]
        let unnamed = try await bin.runCLI(as: Self.allowedUID, socket: h.socketPath, ["status"])
        #expect(unnamed.status == 2 && unnamed.stderr.contains("RAIN_101"), "\(unnamed)")
        #expect(unnamed.stderr.contains("uid \(getuid())") && unnamed.stderr.contains("--daemon-uid"), "\(unnamed)")

        let served = try await bin.runCLI(as: Self.allowedUID, socket: h.socketPath, daemonUID + ["status"])
        #expect(served.status == 0, "\(served)")
        // The same, named through the environment instead of the option.
        let servedByEnvironment = try await bin.runCLI(
            as: Self.allowedUID, socket: h.socketPath, ["status"], environment: ["RAINWALLET_DAEMON_UID": "\(getuid())"])
        #expect(servedByEnvironment.status == 0, "\(servedByEnvironment)")
        let otherNamed = try await bin.runCLI(
            as: Self.allowedUID, socket: h.socketPath, ["status"], environment: ["RAINWALLET_DAEMON_UID": "4242"])
        #expect(otherNamed.status == 2 && otherNamed.stderr.contains("RAIN_101"), "\(otherNamed)")

        // A uid that is not allowed gets one refusal frame at accept, before any byte of its own
        // is read, and the close: its CLI says why (RAIN_202, exit 5) instead of a lost daemon.
        let refused = try await bin.runCLI(as: Self.otherUID, socket: h.socketPath, daemonUID + ["status"])
        #expect(refused.status == 5, "\(refused)")
        #expect(refused.stderr.contains("RAIN_202"), "\(refused)")
        #expect(refused.stderr.contains("uid \(Self.otherUID) may not use this daemon"), "\(refused)")
        #expect(h.log.contains("peer.refused uid=\(Self.otherUID)"), "log:\n\(h.log)")

        try await expectStillServes(h)
    }

    @Test(
        "without allowedUIDs (directory 0700, socket 0600) another uid cannot even connect: exit 2",
        .enabled(if: canSwitchUID, skipReason))
    func otherUIDCannotConnect() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }

        #expect(fileMode(h.directory)?.permissions == 0o700)
        #expect(fileMode(h.socketPath)?.permissions == 0o600)
        let result = try await bin.runCLI(as: Self.allowedUID, socket: h.socketPath, ["status"])
        #expect(result.status == 2, "\(result)")  // RAIN_101: EACCES before the daemon is involved
        #expect(!h.log.contains("peer.refused"), "the connection should never have reached the daemon; log:\n\(h.log)")
        try await expectStillServes(h)
    }

    @Test(
        "a socket directory owned by another uid is refused at start, naming the owner",
        .enabled(if: canSwitchUID, skipReason))
    func foreignSocketDirectoryRefused() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let dir = "\(h.directory)/foreign"
        #expect(mkdir(dir, 0o700) == 0)
        #expect(chown(dir, Self.allowedUID, Self.allowedUID) == 0)
        let (status, output) = try await h.runDaemon(arguments: ["--socket", "\(dir)/d.sock", "--state-dir", h.stateDirectory])
        #expect(status != 0, "\(output)")
        #expect(output.contains("owned by uid \(Self.allowedUID)"), "\(output)")
        #expect(fileMode("\(dir)/d.sock") == nil)
    }

    /// With PR_SET_DUMPABLE 0 the kernel makes the process's /proc files owned by root instead of
    /// by its uid. That is only visible for a daemon that does not run as root, so this test runs
    /// one as uid 65534 (with a plain process of the same uid as the control).
    @Test("the daemon is non-dumpable: its /proc entries belong to root, not to its uid", .enabled(if: canSwitchUID, skipReason))
    func nonDumpable() async throws {
        let bin = try await AccessibleBinaries.make()
        defer { bin.remove() }
        let home = "\(bin.directory)/home"
        #expect(mkdir(home, 0o700) == 0)
        #expect(chown(home, Self.allowedUID, Self.allowedUID) == 0)
        let daemon = try bin.launch(
            as: Self.allowedUID, "rainwalletd", ["--socket", "\(home)/d.sock", "--state-dir", "\(home)/state"], home: home,
            log: "\(bin.directory)/daemon.log")
        let control = try bin.launch(
            as: Self.allowedUID, executable: "/bin/sleep", ["30"], home: home, log: "\(bin.directory)/sleep.log")
        defer {
            for p in [daemon, control] where p.isRunning {
                p.signal(SIGKILL)
                _ = p.waitForExitBlocking(timeout: .seconds(5))
            }
        }
        let ready = await eventually {
            DaemonHarness.readFile("\(bin.directory)/daemon.log").contains("daemon.ready") || !daemon.isRunning
        }
        try #require(ready && daemon.isRunning, "daemon log:\n\(DaemonHarness.readFile("\(bin.directory)/daemon.log"))")

        func owner(_ pid: Int32) -> uid_t? {
            var st = stat()
            return stat("/proc/\(pid)/status", &st) == 0 ? st.st_uid : nil
        }
        // The control (dumpable) shows the uid, so the check below is meaningful.
        let controlReady = await eventually { owner(control.pid) == Self.allowedUID }
        #expect(controlReady, "control owner \(String(describing: owner(control.pid)))")
        #expect(
            owner(daemon.pid) == 0,
            "a dumpable daemon: /proc entries owned by \(String(describing: owner(daemon.pid)))")

        daemon.signal(SIGTERM)
        let stopped = await daemon.waitForExit(timeout: .seconds(15))
        #expect(stopped == 0, "\(daemon.kernelState)")
    }

    @Test(
        "a key file with a looser mode than 0600 stops the daemon at start, naming the file and chmod 600",
        arguments: ["storage.key", "device.key", "authority/authority.key"])
    func looseKeyFileRefused(_ file: String) async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        try await h.stop()
        let path = "\(h.stateDirectory)/\(file)"
        #expect(fileMode(path)?.permissions == 0o600, "\(path) was created with a mode other than 0600")
        try #require(chmod(path, 0o644) == 0, "\(path): \(String(cString: strerror(errno)))")

        try h.launch()
        let status = try await h.waitForExit()
        #expect(status != 0)
        let log = h.log
        #expect(log.contains(path), "log:\n\(log)")
        #expect(log.contains("chmod 600"), "log:\n\(log)")
        // Nothing serves on the socket.
        #expect(!FileManager.default.fileExists(atPath: h.socketPath) || !h.isRunning)
    }
}

extension AccessTests {
    @Test("a session file with a looser mode than 0600 stops the daemon at start; after chmod 600 the session is back")
    func looseSessionFileRefused() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let (session, _, _) = try await h.logIn(h.provider(), .email("loose@example.com"))
        try await h.stop()
        let path = "\(h.stateDirectory)/sessions/\(ProfileName.defaultName).session"
        #expect(fileMode(path)?.permissions == 0o600, "\(path) was written with a mode other than 0600")
        try #require(chmod(path, 0o640) == 0, "\(path): \(String(cString: strerror(errno)))")

        try h.launch()
        #expect(try await h.waitForExit() != 0)
        let log = h.log
        #expect(log.contains(path) && log.contains("chmod 600"), "log:\n\(log)")

        try #require(chmod(path, 0o600) == 0)
        try await h.start()
        // The daemon answers while the session is still being restored: wait for the restore, or
        // the state read can still be `loading` on a busy machine.
        let provider = h.provider()
        try await provider.awaitSessionRestore()
        #expect(try await provider.currentSession().accountID == session.accountID)
    }
}

/// Copies of `rainwallet` and `rainwalletd` in a 0755 directory, so another uid can run them
/// whatever the modes of the build directory.
struct AccessibleBinaries {
    /// What a finished run printed.
    struct Result: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
    }

    let directory: String

    private init() throws {
        var template = Array("/tmp/rwbin-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buf in buf.baseAddress.flatMap { mkdtemp($0) } }
        guard let made else { throw HarnessError("mkdtemp: \(String(cString: strerror(errno)))") }
        directory = String(cString: made)
        chmod(directory, 0o755)
    }

    /// A directory with copies of the binaries, made by `cp`, a process of its own: a copy written
    /// by this process is open for writing here, and a child another test forks in that moment
    /// holds that descriptor until its exec, so an exec of the copy meets ETXTBSY ("Text file busy").
    static func make() async throws -> AccessibleBinaries {
        let bin = try AccessibleBinaries()
        let source = try DaemonHarness.binaryDirectory()
        let names = ["rainwallet", "rainwalletd", "rainwalletd-test", "rainwallet-tpm-probe"]
        let copied = try await TestProcess.run(
            "/bin/cp", names.map { source.appendingPathComponent($0).path } + [bin.directory], timeout: .seconds(60))
        guard copied.status == 0 else { throw HarnessError("cp of the binaries failed: \(copied)") }
        for name in names { chmod("\(bin.directory)/\(name)", 0o755) }
        return bin
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// Starts `executable` (a name in this directory, or an absolute path) as `uid` through setpriv.
    func launch(as uid: UInt32, _ name: String, _ arguments: [String], home: String, log: String) throws -> TestProcess {
        try launch(as: uid, executable: "\(directory)/\(name)", arguments, home: home, log: log)
    }

    func launch(
        as uid: UInt32, executable: String, _ arguments: [String], home: String, log: String, stdout: String? = nil,
        environment: [String: String] = [:], stdin: TestProcess.Input = .null
    ) throws -> TestProcess {
        let environment = [
            "PATH": "/usr/bin:/bin", "HOME": home, "XDG_CONFIG_HOME": "\(home)/xdg-config", "XDG_STATE_HOME": "\(home)/xdg-state",
            "XDG_RUNTIME_DIR": "\(home)/xdg-run",
        ].merging(environment) { _, given in given }
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        if let stdout { _ = FileManager.default.createFile(atPath: stdout, contents: nil) }
        return try TestProcess(
            AccessTests.setprivPath, ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable] + arguments,
            environment: environment, stdin: stdin, stdout: .file(stdout ?? log), stderr: .file(log))
    }

    /// Runs `rainwallet --socket SOCKET ARGS…` as `uid` and waits for it (at most 30 s).
    func runCLI(
        as uid: UInt32, socket: String, _ arguments: [String], environment: [String: String] = [:]
    ) async throws -> Result {
        // A child another test spawned while these copies were written holds the copy's write
        // descriptor between its fork and the close of everything past 2 before its exec: an exec
        // of the copy in that instant fails with ETXTBSY ("Text file busy", exit 126), and again
        // an instant later succeeds.
        for _ in 0..<5 {
            let result = try await runCLIOnce(as: uid, socket: socket, arguments, environment: environment)
            guard result.status == 126, result.stderr.contains("Text file busy") else { return result }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await runCLIOnce(as: uid, socket: socket, arguments, environment: environment)
    }

    private func runCLIOnce(
        as uid: UInt32, socket: String, _ arguments: [String], environment: [String: String]
    ) async throws -> Result {
        let n = UUID().uuidString.prefix(8)
        let out = "\(directory)/cli-\(n).out"
        let err = "\(directory)/cli-\(n).err"
        // HOME is this (root-owned, 0755) directory: readable, not writable, by the other uid.
        let p = try launch(
            as: uid, executable: "\(directory)/rainwallet", ["--socket", socket] + arguments, home: directory, log: err,
            stdout: out, environment: environment)
        guard let status = await p.waitForExit(timeout: .seconds(30)) else {
            let state = p.kernelState
            p.signal(SIGKILL)
            _ = await p.waitForExit(timeout: .seconds(5))
            throw HarnessError("rainwallet as uid \(uid) did not exit within 30 s (\(state))")
        }
        return Result(status: status, stdout: DaemonHarness.readFile(out), stderr: DaemonHarness.readFile(err))
    }
}

extension DaemonHarness {
    /// A file's text, or "" when it cannot be read.
    static func readFile(_ path: String) -> String {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }
}
