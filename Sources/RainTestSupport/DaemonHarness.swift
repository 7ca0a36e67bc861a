import Foundation
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

/// A failure of the harness itself (binary missing, daemon not ready, process hung), with the
/// daemon's log attached where it helps.
public struct HarnessError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What a finished `rainwallet` run produced.
public struct CLIResult: Sendable, CustomStringConvertible {
    /// The exit status; a death by signal N reads as 128 + N.
    public var status: Int32
    public var stdout: String
    public var stderr: String

    public var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
}

/// A child process of the harness, started with `posix_spawn` (every descriptor but 0, 1 and 2
/// closed in the child), and its exit status, collected by `waitpid(WNOHANG)` when polled.
///
/// Not Foundation's `Process`: it learns of an exit when the child's copy of an exit-report
/// socket closes, on one manager thread for the whole test process that then blocks in
/// `waitpid` for that child. Under load that thread fell behind: daemons that had exited long
/// before stayed zombies for over 15 s, and tests waiting for their exit failed. Here each wait is
/// the test's own poll, and no child inherits anything but its three standard descriptors.
final class ChildProcess: Sendable {
    private let spawnedPID: pid_t
    private let status = Mutex<Int32?>(nil)

    /// Launches `executable` with the three handles as its standard descriptors. The caller closes
    /// its copies of the handles after this returns.
    convenience init(
        executable: URL, arguments: [String], environment: [String: String], standardInput: FileHandle,
        standardOutput: FileHandle, standardError: FileHandle
    ) throws {
        try self.init(
            spawning: executable, arguments: arguments, environment: environment,
            standardInput: standardInput.fileDescriptor, standardOutput: standardOutput.fileDescriptor,
            standardError: standardError.fileDescriptor)
    }

    /// Serializes every launch of the harness and of the tests' own `Process` launches. Foundation's
    /// `Process` creates descriptors without close-on-exec (the socket pair that reports the exit,
    /// pipes) and closes in the child only the descriptors it saw before spawning: two launches
    /// racing would leak one child's exit-report socket or stdin pipe into the other child, so the
    /// first child's exit (or end of input) would go unnoticed until the second one exits. Callers
    /// hold it around creating pipes and `run()`.
    static let launchLock = Mutex(())

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34), looked up at run time: Swift's
    /// Glibc module does not declare it.
    private static let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            return nil
        }
        return unsafeBitCast(
            symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32).self)
    }()

    /// Launches `executable` with `posix_spawn`, with the given descriptors as 0, 1 and 2, every
    /// other descriptor closed in the child (programs such as `systemd-socket-activate` pass on
    /// what they inherit), in a process group of its own.
    init(
        spawning executable: URL, arguments: [String], environment: [String: String], standardInput: Int32,
        standardOutput: Int32, standardError: Int32
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, standardInput, 0)
        posix_spawn_file_actions_adddup2(&actions, standardOutput, 1)
        posix_spawn_file_actions_adddup2(&actions, standardError, 2)
        if let addCloseFrom = Self.addCloseFrom {
            _ = addCloseFrom(&actions, 3)
        } else {
            let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap { Int32($0) } ?? []
            for fd in open where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Like Foundation's Process: a process group of its own, no signal blocked, every signal at
        // its default action (the test process ignores SIGPIPE; a child must not inherit that).
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable.path, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw HarnessError("cannot start \(executable.path): \(String(cString: strerror(rc)))") }
        spawnedPID = pid
    }

    var pid: Int32 { spawnedPID }

    /// The exit status once the process has been reaped.
    var exitStatus: Int32? {
        status.withLock { status in
            if status == nil {
                var raw: Int32 = 0
                if waitpid(spawnedPID, &raw, WNOHANG) == spawnedPID {
                    // WIFSIGNALED / WTERMSIG / WEXITSTATUS are macros: decode the wait status by hand.
                    status = raw & 0x7f != 0 ? 128 + (raw & 0x7f) : (raw >> 8) & 0xff
                }
            }
            return status
        }
    }

    func signal(_ sig: Int32) {
        if exitStatus == nil { _ = Foundation.kill(pid, sig) }
    }

    /// What the kernel says of the process, for a failure message: whether it really still runs
    /// (and in which state), or exited without the harness having collected its status yet.
    var kernelState: String {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return "pid \(pid): no such process (reaped)" }
        let state = stat[stat.index(after: close)...].split(separator: " ").first.map(String.init) ?? "?"
        return state == "Z" ? "pid \(pid): exited, its status not collected yet (zombie)" : "pid \(pid): running (state \(state))"
    }

    /// Polls until the process has exited (asynchronously), or nil at the deadline.
    func waitForExit(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let s = exitStatus { return s }
            if ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Polls until the process has exited (blocking the caller), or nil at the deadline.
    func waitForExitBlocking(timeout: Duration) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let s = exitStatus { return s }
            if ContinuousClock.now >= deadline { return nil }
            usleep(5_000)
        }
    }
}

/// A `rainwallet` process started with `DaemonHarness.launchCLI`: its stdin stays open so a test
/// can answer a prompt (for example `login`, which reads the code from stdin).
public final class CLIProcess: Sendable {
    private let child: ChildProcess
    private let input: FileHandle?
    private let inputClosed = Mutex(false)
    private let stdoutPath: String
    private let stderrPath: String

    init(child: ChildProcess, input: FileHandle?, stdoutPath: String, stderrPath: String) {
        self.child = child
        self.input = input
        self.stdoutPath = stdoutPath
        self.stderrPath = stderrPath
    }

    /// Writes `text` to the process's stdin (ignored once the process has gone).
    public func send(_ text: String) {
        inputClosed.withLock { closed in
            guard !closed, let input else { return }
            try? input.write(contentsOf: Data(text.utf8))
        }
    }

    /// Closes stdin (end of input).
    public func closeInput() {
        inputClosed.withLock { closed in
            guard !closed else { return }
            closed = true
            try? input?.close()
        }
    }

    /// True until the process has exited.
    public var isRunning: Bool { child.exitStatus == nil }

    /// Its process id (to read `/proc/PID/cmdline` while it runs).
    public var pid: Int32 { child.pid }

    /// What the process has written to stderr so far (it may still be running).
    public var stderrSoFar: String { DaemonHarness.readText(stderrPath) }

    /// Closes stdin, waits for the exit and returns what the process printed.
    /// - Throws: `HarnessError` when it does not exit within `timeout` (it is then killed).
    public func finish(timeout: Duration = .seconds(30)) async throws -> CLIResult {
        closeInput()
        guard let status = await child.waitForExit(timeout: timeout) else {
            let state = child.kernelState
            child.signal(SIGKILL)
            _ = await child.waitForExit(timeout: .seconds(5))
            throw HarnessError(
                "rainwallet did not exit within \(timeout) (\(state)); stderr so far: \(DaemonHarness.readText(stderrPath))")
        }
        return CLIResult(status: status, stdout: DaemonHarness.readText(stdoutPath), stderr: DaemonHarness.readText(stderrPath))
    }
}

/// Runs the real `rainwalletd` in a fresh short temporary directory (`/tmp/rwt-XXXXXX`: socket
/// `d.sock`, state `state/`, log `daemon.log`) and the real `rainwallet` against it.
///
/// Each test owns one harness, so tests run in parallel. Swift Testing has no tear-down: always
///
/// ```swift
/// let h = try await DaemonHarness.start()
/// defer { h.shutdown() }
/// ```
public final class DaemonHarness: Sendable {
    /// The temporary directory that holds everything of this harness.
    public let directory: String
    /// `DIR/d.sock`.
    public let socketPath: String
    /// `DIR/state`.
    public let stateDirectory: String
    /// `DIR/config.json` when a config was given.
    public let configPath: String?
    /// `DIR/daemon.log`: the daemon's stderr (its log), appended across restarts.
    public let logPath: String
    /// `DIR/daemon.out`: the daemon's stdout, appended across restarts.
    public let stdoutPath: String
    /// Where `rainwalletd` and `rainwallet` were found.
    public let binaryDirectory: URL
    /// Extra `rainwalletd` flags given to `start`.
    public let extraArguments: [String]
    /// Variables set (or, when nil, removed) in the environment of the daemon and the CLI, for
    /// example the session bus of a `TestKeyring`.
    public let environment: [String: String?]

    private let daemon = Mutex<ChildProcess?>(nil)
    /// CLI processes, killed by `shutdown()` if a failed test left one waiting for input.
    private let clients = Mutex<[ChildProcess]>([])
    private let counter = Mutex(0)
    private let isShutDown = Mutex(false)

    /// Runs `body` while no other harness process launch is in progress. Tests that start their own
    /// processes with Foundation's `Process` should create their pipes and call `run()` inside it,
    /// so descriptors of one launch never leak into another test's child (see `ChildProcess`).
    public static func withProcessLaunchLock<T>(_ body: () throws -> T) rethrows -> T {
        try ChildProcess.launchLock.withLock { _ in try body() }
    }

    // MARK: binaries

    private static let located: Result<URL, HarnessError> = locateBinaries()

    /// The directory holding the built `rainwalletd` and `rainwallet`: `$RAINWALLET_BIN_DIR`, else
    /// the directory of the running test bundle (the build's product directory).
    public static func binaryDirectory() throws -> URL { try located.get() }

    private static func locateBinaries() -> Result<URL, HarnessError> {
        let fm = FileManager.default
        func hasBinaries(_ dir: URL) -> Bool {
            fm.isExecutableFile(atPath: dir.appendingPathComponent("rainwalletd").path)
                && fm.isExecutableFile(atPath: dir.appendingPathComponent("rainwallet").path)
        }
        if let env = ProcessInfo.processInfo.environment["RAINWALLET_BIN_DIR"], !env.isEmpty {
            let dir = URL(fileURLWithPath: env, isDirectory: true)
            return hasBinaries(dir)
                ? .success(dir)
                : .failure(HarnessError("RAINWALLET_BIN_DIR=\(env) holds no executable rainwalletd and rainwallet"))
        }
        var candidates: [URL] = []
        if let exe = try? fm.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        if let arg0 = CommandLine.arguments.first, !arg0.isEmpty {
            let url = URL(fileURLWithPath: arg0).standardizedFileURL.resolvingSymlinksInPath()
            candidates.append(url.deletingLastPathComponent())
        }
        if let exe = Bundle.main.executableURL { candidates.append(exe.deletingLastPathComponent()) }
        candidates.append(Bundle.main.bundleURL)
        candidates.append(Bundle.main.bundleURL.deletingLastPathComponent())
        if let found = candidates.first(where: hasBinaries) { return .success(found) }
        return .failure(
            HarnessError(
                "cannot find the rainwalletd and rainwallet binaries next to the test bundle (looked in "
                    + candidates.map(\.path).joined(separator: ", ")
                    + "); build them (swift build) or set RAINWALLET_BIN_DIR"))
    }

    // MARK: life cycle

    private init(
        directory: String, configPath: String?, extraArguments: [String], environment: [String: String?],
        binaryDirectory: URL
    ) {
        self.directory = directory
        self.socketPath = "\(directory)/d.sock"
        self.stateDirectory = "\(directory)/state"
        self.configPath = configPath
        self.logPath = "\(directory)/daemon.log"
        self.stdoutPath = "\(directory)/daemon.out"
        self.extraArguments = extraArguments
        self.environment = environment
        self.binaryDirectory = binaryDirectory
    }

    /// The code send limits a harness daemon runs with.
    public enum SendLimits: Sendable {
        /// No cooldown and a million sends per window, written into the config's
        /// `authority.sendLimits` unless it sets them itself: tests log in again and again.
        case relaxed
        /// The daemon's defaults (README "Sessions: refresh, expiry, one device at a time"), for tests of the limits themselves.
        case defaults
    }

    /// `authority.sendLimits` of `SendLimits.relaxed`.
    public static let relaxedSendLimits: [String: Int] = [
        "contactCooldownSeconds": 0, "contactMaxSends": 1_000_000, "accountMaxSends": 1_000_000,
        "contactAllAppsMaxSends": 1_000_000, "sourceMaxSends": 1_000_000,
    ]

    /// `config` with relaxed send limits merged in (a new config when there is none). A config
    /// that is not a JSON object, whose `authority` is not an object, or that sets
    /// `authority.sendLimits` itself is left as it is.
    static func relaxingSendLimits(in config: String?) -> String? {
        var root: [String: Any] = [:]
        if let config {
            guard let parsed = try? JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any] else {
                return config
            }
            root = parsed
        }
        var authority: [String: Any] = [:]
        if let existing = root["authority"] {
            guard let object = existing as? [String: Any], object["sendLimits"] == nil else { return config }
            authority = object
        }
        authority["sendLimits"] = relaxedSendLimits
        root["authority"] = authority
        guard let data = try? JSONSerialization.data(withJSONObject: root, options: [.sortedKeys]) else { return config }
        return String(decoding: data, as: UTF8.self)
    }

    /// `config` with `storage.provider` set to `file` unless it names a provider itself, so a
    /// harness daemon keeps its keys in its own state directory whatever this machine offers (a
    /// TPM, a keyring on the session bus): `auto` would pick those. Tests of the other providers
    /// name them. A config that is not a JSON object is left as it is.
    static func pinningFileProvider(in config: String?) -> String? {
        var root: [String: Any] = [:]
        if let config {
            guard let parsed = try? JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any] else {
                return config
            }
            root = parsed
        }
        var storage: [String: Any] = [:]
        if let existing = root["storage"] {
            guard let object = existing as? [String: Any], object["provider"] == nil else { return config }
            storage = object
        }
        storage["provider"] = "file"
        root["storage"] = storage
        guard let data = try? JSONSerialization.data(withJSONObject: root, options: [.sortedKeys]) else { return config }
        return String(decoding: data, as: UTF8.self)
    }

    /// True when `config` (JSON) allows uids besides the daemon's own, at the top or in a profile.
    static func allowsOtherUIDs(_ config: String) -> Bool {
        guard let root = try? JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any] else { return false }
        func allows(_ object: [String: Any]) -> Bool { !((object["allowedUIDs"] as? [Any]) ?? []).isEmpty }
        let profiles = (root["profiles"] as? [String: Any])?.values.compactMap { $0 as? [String: Any] } ?? []
        return allows(root) || profiles.contains(where: allows)
    }

    /// Creates the directory (and writes the config) without starting the daemon: for tests that
    /// set things up first, or expect the daemon to fail. Call `launch()` / `start()` next.
    /// - Parameters:
    ///   - sendLimits: `.relaxed` (the default) merges relaxed send limits into the config.
    ///   - environment: variables to set, or with nil to remove, for the daemon and the CLI.
    ///   - access: the policy the daemon runs with (`--policy DIR/policy.json`).
    public static func prepare(
        config: String? = nil, extraArguments: [String] = [], sendLimits: SendLimits = .relaxed,
        environment: [String: String?] = [:], access: HarnessAccess = .testRunnerApproved
    ) throws -> DaemonHarness {
        let config = pinningFileProvider(in: sendLimits == .relaxed ? relaxingSendLimits(in: config) : config)
        let bin = try binaryDirectory()
        // Writing to a CLI's stdin after it exited must fail with EPIPE, not kill the test runner.
        signal(SIGPIPE, SIG_IGN)
        var template = Array("/tmp/rwt-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buf in buf.baseAddress.flatMap { mkdtemp($0) } }
        guard let made else { throw HarnessError("mkdtemp failed: \(String(cString: strerror(errno)))") }
        let dir = String(cString: made)
        // The daemon never changes the mode of a --socket directory it did not create (issue 13):
        // when other uids are allowed, make this one traversable (0711) as a user would.
        if let config, allowsOtherUIDs(config) {
            guard chmod(dir, 0o711) == 0 else { throw HarnessError("chmod \(dir): \(String(cString: strerror(errno)))") }
        }
        var configPath: String?
        if let config {
            let path = "\(dir)/config.json"
            // 0600 whatever the umask: the daemon refuses a config that others can write.
            guard
                FileManager.default.createFile(
                    atPath: path, contents: Data(config.utf8), attributes: [.posixPermissions: 0o600])
            else {
                try? FileManager.default.removeItem(atPath: dir)
                throw HarnessError("cannot write \(path)")
            }
            configPath = path
        }
        do {
            try writeAccessFiles(access, config: config, directory: dir, binaryDirectory: bin)
        } catch {
            try? FileManager.default.removeItem(atPath: dir)
            throw error
        }
        return DaemonHarness(
            directory: dir, configPath: configPath, extraArguments: extraArguments, environment: environment,
            binaryDirectory: bin)
    }

    /// Prepares a fresh directory, starts `rainwalletd --enable-test-methods` there and waits until
    /// it answers GetInfo.
    /// - Parameters:
    ///   - config: the daemon's `config.json` text, if any.
    ///   - sendLimits: `.relaxed` (the default) merges relaxed send limits into the config.
    ///   - environment: variables to set, or with nil to remove, for the daemon and the CLI.
    ///   - access: the policy the daemon runs with (`--policy DIR/policy.json`).
    public static func start(
        config: String? = nil, extraArguments: [String] = [], sendLimits: SendLimits = .relaxed,
        environment: [String: String?] = [:], access: HarnessAccess = .testRunnerApproved
    ) async throws -> DaemonHarness {
        let h = try prepare(
            config: config, extraArguments: extraArguments, sendLimits: sendLimits, environment: environment,
            access: access)
        do {
            try await h.start()
        } catch {
            h.shutdown()
            throw error
        }
        return h
    }

    /// Starts the daemon again on the same directory (after `stop()` or `kill()`) and waits until it
    /// is ready.
    public func start(timeout: Duration = .seconds(15)) async throws {
        try launch()
        try await waitUntilReady(timeout: timeout)
    }

    /// The `rainwalletd` arguments this harness uses.
    public var daemonArguments: [String] {
        var args = ["--socket", socketPath, "--state-dir", stateDirectory]
        if let configPath { args += ["--config", configPath] }
        args += ["--policy", policyPath]
        return args + ["--enable-test-methods"] + Self.relaxedDeadlines(for: extraArguments) + extraArguments
    }

    /// With `--authority` and no deadline of its own, a remote authority's calls get the bounds of
    /// `AuthorityDeadlines.forTests` (issue 20): a test about something else must not fail because
    /// a loaded machine answers slower than the production bounds. Tests of the bounds set them.
    static func relaxedDeadlines(for arguments: [String]) -> [String] {
        guard arguments.contains("--authority"), !arguments.contains(where: { $0.hasSuffix("-deadline") }) else { return [] }
        let ms = String(AuthorityDeadlines.forTests.read.milliseconds)
        return [
            "--authority-read-deadline", ms, "--authority-send-deadline", ms, "--authority-refresh-deadline", ms,
        ]
    }

    /// Launches the daemon without waiting for it to be ready.
    /// - Throws: `HarnessError` when this harness's daemon is already running.
    public func launch() throws {
        try daemon.withLock { current in
            if let c = current, c.exitStatus == nil { throw HarnessError("rainwalletd is already running (pid \(c.pid))") }
            current = try launchDaemon(arguments: daemonArguments, stdoutPath: stdoutPath, stderrPath: logPath)
        }
    }

    /// Launches another program in the daemon's place, so `stop()`, `kill()`, `pid`,
    /// `waitUntilReady()` and `shutdown()` apply to it: for a program that becomes `rainwalletd`
    /// by `exec`, keeping its pid (`systemd-socket-activate`, a shell that sets up descriptors).
    /// It is started with `posix_spawn` (see `ChildProcess.init(spawning:…)`); its stdout and
    /// stderr go to this harness's files.
    /// - Parameters:
    ///   - executable: the program to start.
    ///   - environment: variables added to the daemon's usual environment.
    ///   - standardInput: its stdin (`/dev/null` when nil), for example a socket to hand over.
    /// - Throws: `HarnessError` when this harness's daemon is already running.
    public func launch(
        executable: URL, arguments: [String], environment: [String: String] = [:], standardInput: FileHandle? = nil
    ) throws {
        let out = try Self.openForAppending(stdoutPath)
        defer { try? out.close() }
        let log = try Self.openForAppending(logPath)
        defer { try? log.close() }
        let devNull = try Self.openForReading("/dev/null")
        defer { try? devNull.close() }
        let env = daemonEnvironment.merging(environment) { $1 }
        try daemon.withLock { current in
            if let c = current, c.exitStatus == nil { throw HarnessError("rainwalletd is already running (pid \(c.pid))") }
            current = try ChildProcess.launchLock.withLock { _ in
                try ChildProcess(
                    spawning: executable, arguments: arguments, environment: env,
                    standardInput: (standardInput ?? devNull).fileDescriptor, standardOutput: out.fileDescriptor,
                    standardError: log.fileDescriptor)
            }
        }
    }

    private func launchDaemon(arguments: [String], stdoutPath: String, stderrPath: String) throws -> ChildProcess {
        let out = try Self.openForAppending(stdoutPath)
        defer { try? out.close() }
        let log = stderrPath == stdoutPath ? out : try Self.openForAppending(stderrPath)
        defer { if log !== out { try? log.close() } }
        let devNull = try Self.openForReading("/dev/null")
        defer { try? devNull.close() }
        let environment = daemonEnvironment
        return try ChildProcess.launchLock.withLock { _ in
            try ChildProcess(
                executable: binaryDirectory.appendingPathComponent("rainwalletd"), arguments: arguments,
                environment: environment, standardInput: devNull, standardOutput: out, standardError: log)
        }
    }

    /// The environment of every child: no `RAINWALLET_SOCKET`, no service-manager variables (a test
    /// run under systemd must not hand its sockets or readiness to a daemon), and XDG directories
    /// inside this harness so nothing on the machine (a user's config, a running daemon) leaks in,
    /// no session bus (the machine's, or the keyring another suite of this process started with
    /// `TestKeyring.shared`, must not become an `auto` provider); then this harness's `environment`.
    public var daemonEnvironment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["RAINWALLET_SOCKET"] = nil
        env["DBUS_SESSION_BUS_ADDRESS"] = nil
        for key in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET"] { env[key] = nil }
        env["XDG_CONFIG_HOME"] = "\(directory)/xdg-config"
        env["XDG_STATE_HOME"] = "\(directory)/xdg-state"
        env["XDG_RUNTIME_DIR"] = "\(directory)/xdg-run"
        // A display name for the daemon's prompts: the auto pinentry shows nothing, and tests of
        // terminal prompts remove it (`environment: ["DISPLAY": nil]`).
        env["DISPLAY"] = ":rainwallet-test"
        env["WAYLAND_DISPLAY"] = nil
        for (key, value) in environment { env[key] = value }
        return env
    }

    /// Polls until the daemon answers GetInfo on `socketPath`.
    /// - Throws: `HarnessError` (with the log) when it exits first or is not ready by the deadline.
    public func waitUntilReady(timeout: Duration = .seconds(15)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            guard let child = daemon.withLock({ $0 }) else { throw HarnessError("rainwalletd was not launched") }
            if let status = child.exitStatus {
                throw HarnessError("rainwalletd exited with status \(status) before it was ready; log:\n\(log)")
            }
            if let bytes = try? await call(Method.getInfo, payload: try GetInfoRequest().encode(), timeout: .seconds(5)),
                (try? GetInfoResponse.decode(bytes)) != nil
            {
                return
            }
            if ContinuousClock.now >= deadline {
                throw HarnessError("rainwalletd was not ready within \(timeout); log:\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits for the daemon to exit on its own (for example after a bad config).
    /// - Returns: its exit status (128 + N for signal N).
    /// - Throws: `HarnessError` when it is still running at the deadline.
    public func waitForExit(timeout: Duration = .seconds(15)) async throws -> Int32 {
        guard let child = daemon.withLock({ $0 }) else { throw HarnessError("rainwalletd was not launched") }
        guard let status = await child.waitForExit(timeout: timeout) else {
            throw HarnessError("rainwalletd did not exit within \(timeout) (\(child.kernelState)); log:\n\(log)")
        }
        return status
    }

    /// The exit status of the last daemon process, once it has exited (128 + N for signal N).
    public var exitStatus: Int32? { daemon.withLock { $0?.exitStatus } }

    /// True while the daemon process is alive.
    public var isRunning: Bool { daemon.withLock { $0?.exitStatus == nil && $0 != nil } }

    /// The daemon's pid, while it runs.
    public var pid: Int32? { daemon.withLock { c in c.flatMap { $0.exitStatus == nil ? $0.pid : nil } } }

    /// Sends SIGTERM and waits for the daemon to exit.
    /// - Returns: its exit status (0 for a clean stop; 128 + N for signal N).
    /// - Throws: `HarnessError` when it was not running or did not exit within `timeout` (it is
    ///   then killed).
    @discardableResult
    public func stop(timeout: Duration = .seconds(20)) async throws -> Int32 {
        guard let child = daemon.withLock({ $0 }) else { throw HarnessError("rainwalletd was not launched") }
        if let status = child.exitStatus { throw HarnessError("rainwalletd was not running (it exited with \(status))") }
        child.signal(SIGTERM)
        guard let status = await child.waitForExit(timeout: timeout) else {
            let state = child.kernelState
            child.signal(SIGKILL)
            _ = await child.waitForExit(timeout: .seconds(5))
            throw HarnessError("rainwalletd did not exit within \(timeout) of SIGTERM (\(state)); log:\n\(log)")
        }
        return status
    }

    /// Sends SIGKILL and waits until the process is gone. Its socket file stays behind (stale).
    public func kill() async {
        guard let child = daemon.withLock({ $0 }) else { return }
        child.signal(SIGKILL)
        _ = await child.waitForExit(timeout: .seconds(10))
    }

    /// `stop()`, then `start()` on the same directory.
    public func restart() async throws {
        let status = try await stop()
        guard status == 0 else { throw HarnessError("rainwalletd exited with status \(status) on SIGTERM; log:\n\(log)") }
        try await start()
    }

    /// Kills any CLI still running, stops the daemon if it runs (SIGTERM, then SIGKILL after 10 s)
    /// and removes the directory. Synchronous, for `defer`, and safe to call more than once.
    ///
    /// The signals are sent before it returns; the wait for the processes to exit and the removal
    /// of the directory happen on a thread of their own. Tests run on Swift concurrency's pool,
    /// which has one thread per core: a test blocked there while its daemon drains stalls every
    /// other test's tasks (a 10 s stall made a stream's first value late). A test that needs the
    /// processes gone before it goes on (to unmount their directory) awaits `shutdownAsync()`.
    public func shutdown() {
        guard let (clients, daemon) = beginShutdown() else { return }
        let directory = self.directory
        Thread { Self.finishShutdown(clients: clients, daemon: daemon, directory: directory) }.start()
    }

    /// `shutdown()` that returns once the processes have exited and the directory is removed,
    /// waiting without holding a thread of the concurrency pool (so a daemon that drains for
    /// seconds stalls no other test).
    /// Call it at the end of the test (and on its error path) where the processes must be gone
    /// before it goes on (a tmpfs to unmount).
    public func shutdownAsync() async {
        guard let (clients, daemon) = beginShutdown() else { return }
        for c in clients { _ = await c.waitForExit(timeout: .seconds(5)) }
        if let daemon, await daemon.waitForExit(timeout: .seconds(10)) == nil {
            daemon.signal(SIGKILL)
            _ = await daemon.waitForExit(timeout: .seconds(5))
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Signals the CLIs (SIGKILL) and the daemon (SIGTERM) once; nil when already shut down.
    private func beginShutdown() -> (clients: [ChildProcess], daemon: ChildProcess?)? {
        let first = isShutDown.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return nil }
        let running = clients.withLock { $0 }.filter { $0.exitStatus == nil }
        for c in running { c.signal(SIGKILL) }
        let child = daemon.withLock { $0 }.flatMap { $0.exitStatus == nil ? $0 : nil }
        child?.signal(SIGTERM)
        return (running, child)
    }

    /// Reaps what `beginShutdown` signalled (SIGKILL for a daemon still running after 10 s) and
    /// removes the directory. Blocks its thread.
    private static func finishShutdown(clients: [ChildProcess], daemon: ChildProcess?, directory: String) {
        for c in clients { _ = c.waitForExitBlocking(timeout: .seconds(5)) }
        if let daemon, daemon.waitForExitBlocking(timeout: .seconds(10)) == nil {
            daemon.signal(SIGKILL)
            _ = daemon.waitForExitBlocking(timeout: .seconds(5))
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The daemon's log so far: its stderr, across restarts.
    public var log: String { Self.readText(logPath) }

    // MARK: other daemon processes

    /// Runs `rainwalletd` with exactly `arguments` (no defaults added) until it exits: for a second
    /// daemon that is expected to refuse to start.
    /// - Returns: its exit status and what it wrote to stdout and stderr.
    /// - Throws: `HarnessError` when it is still running after `timeout` (it is then killed).
    public func runDaemon(arguments: [String], timeout: Duration = .seconds(15)) async throws -> (status: Int32, output: String) {
        let path = "\(directory)/daemon-\(nextNumber()).log"
        let child = try launchDaemon(arguments: arguments, stdoutPath: path, stderrPath: path)
        guard let status = await child.waitForExit(timeout: timeout) else {
            let state = child.kernelState
            child.signal(SIGKILL)
            _ = await child.waitForExit(timeout: .seconds(5))
            throw HarnessError("rainwalletd \(arguments) was still running after \(timeout) (\(state)): \(Self.readText(path))")
        }
        return (status, Self.readText(path))
    }

    // MARK: the CLI

    /// Runs `rainwallet --socket DIR/d.sock ARGS…` (or `--socket socketPath`) with `RAINWALLET_SOCKET`
    /// unset and waits for it to exit.
    /// - Parameters:
    ///   - stdin: text for its standard input (empty input when nil).
    ///   - socketPath: another socket to point it at (for example one nothing listens on).
    public func runCLI(
        _ arguments: [String], stdin: String? = nil, socketPath: String? = nil, timeout: Duration = .seconds(30)
    ) async throws -> CLIResult {
        // Input from a file, not a pipe: the CLI sees end of input however the test goes on.
        let n = nextNumber()
        let inputPath = "\(directory)/cli-\(n).in"
        guard FileManager.default.createFile(atPath: inputPath, contents: Data((stdin ?? "").utf8)) else {
            throw HarnessError("cannot write \(inputPath)")
        }
        let input = try Self.openForReading(inputPath)
        defer { try? input.close() }
        let p = try launchCLI(arguments, socketPath: socketPath, number: n, input: input)
        return try await p.finish(timeout: timeout)
    }

    /// Starts `rainwallet` like `runCLI` but returns at once, with stdin open for `send(_:)`.
    /// - Parameters:
    ///   - program: another copy of the CLI to run (per-app access tests: two apps of one uid).
    ///   - environment: variables added to the CLI's environment (`LD_PRELOAD`).
    ///   - standardInput: the CLI's stdin (a terminal for `prompt here`); a pipe when nil.
    public func launchCLI(
        _ arguments: [String], socketPath: String? = nil, program: URL? = nil, environment: [String: String] = [:],
        standardInput: FileHandle? = nil
    ) throws -> CLIProcess {
        try launchCLI(
            arguments, socketPath: socketPath, number: nextNumber(), input: standardInput, program: program,
            extraEnvironment: environment)
    }

    /// Runs `program` (a copy of the CLI) like `runCLI`, with `environment` added to its own.
    public func runCLI(
        _ arguments: [String], program: URL, environment: [String: String] = [:], standardInput: FileHandle? = nil,
        timeout: Duration = .seconds(30)
    ) async throws -> CLIResult {
        let n = nextNumber()
        let input = try standardInput ?? Self.openForReading("/dev/null")
        let p = try launchCLI(
            arguments, socketPath: nil, number: n, input: input, program: program, extraEnvironment: environment)
        return try await p.finish(timeout: timeout)
    }

    /// Launches the CLI with `input` as stdin, or a pipe the returned process writes to when nil.
    private func launchCLI(
        _ arguments: [String], socketPath: String?, number n: Int, input: FileHandle?, program: URL? = nil,
        extraEnvironment: [String: String] = [:]
    ) throws -> CLIProcess {
        let out = "\(directory)/cli-\(n).out"
        let err = "\(directory)/cli-\(n).err"
        let outHandle = try Self.openForAppending(out)
        defer { try? outHandle.close() }
        let errHandle = try Self.openForAppending(err)
        defer { try? errHandle.close() }
        let environment = daemonEnvironment.merging(extraEnvironment) { $1 }
        let executable = program ?? binaryDirectory.appendingPathComponent("rainwallet")
        let allArguments = ["--socket", socketPath ?? self.socketPath] + arguments
        let (child, writer) = try ChildProcess.launchLock.withLock { _ -> (ChildProcess, FileHandle?) in
            // The pipe is made under the lock too, so no other child inherits its write end.
            let pipe = input == nil ? Pipe() : nil
            let stdin: FileHandle
            if let input {
                stdin = input
            } else if let pipe {
                stdin = pipe.fileHandleForReading
            } else {
                stdin = FileHandle.nullDevice
            }
            let child = try ChildProcess(
                executable: executable, arguments: allArguments, environment: environment, standardInput: stdin,
                standardOutput: outHandle, standardError: errHandle)
            if let pipe { try? pipe.fileHandleForReading.close() }
            return (child, pipe?.fileHandleForWriting)
        }
        clients.withLock { $0.append(child) }
        return CLIProcess(child: child, input: writer, stdoutPath: out, stderrPath: err)
    }

    // MARK: talking to the daemon directly

    /// One unary call on a fresh connection, closed afterwards. A call not answered within
    /// `timeout` fails with RAIN_101 (the connection is closed under it).
    public func call(
        _ method: String, payload: [UInt8], profile: String = ProfileName.defaultName, timeout: Duration = .seconds(30)
    ) async throws(RainError) -> [UInt8] {
        let connection = try ClientConnection(path: socketPath)
        let watchdog = Task {
            try await Task.sleep(for: timeout)
            connection.close()
        }
        defer {
            watchdog.cancel()
            connection.close()
        }
        return try await connection.call(
            method: method, payload: payload, metadata: [MetadataEntry(key: profileMetadataKey, value: profile)])
    }

    /// The development outbox of one profile's app, oldest first (the `ListOutbox` RPC that
    /// `RainProvider.devOutbox()` makes).
    public func outbox(profile: String = ProfileName.defaultName) async throws(RainError) -> [OutboxEntry] {
        let bytes = try await call(Method.listOutbox, payload: try ListOutboxRequest().encode(), profile: profile)
        // A profile's app id is its name unless the config says otherwise; keep only that app's codes.
        return try ListOutboxResponse.decode(bytes).entries.filter { $0.appID == profile }
    }

    /// Every code in the profile's outbox, oldest first.
    public func outboxCodes(profile: String = ProfileName.defaultName) async throws(RainError) -> [String] {
        try await outbox(profile: profile).map(\.code)
    }

    /// The newest code sent to `contact` (its normalized value, like `a@b.co` or `+15551234567`)
    /// for the profile's app.
    public func latestCode(for contact: String, profile: String = ProfileName.defaultName) async throws(RainError) -> String? {
        try await outbox(profile: profile).last { $0.contact?.value == contact }?.code
    }

    /// Polls until `contact` has at least `count` deliveries for the profile's app and returns the
    /// newest code.
    /// - Throws: `HarnessError` at the deadline (20 s: only a failing run waits for it). A CLI's
    ///   first call was once seen to reach the daemon 22–25 s after `start()` returned: with 237
    ///   integration tests in flight at once, the test's own continuation waited that long for one
    ///   of the two threads of the concurrency pool. scripts/test now runs at most 6 at a time.
    public func waitForCode(
        for contact: String, count: Int = 1, profile: String = ProfileName.defaultName, timeout: Duration = .seconds(20)
    ) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        // One connection for the whole wait, polled every 50 ms: a new connection per poll made the
        // daemon read this process's identity (per-app access) 50 times a second, which on a
        // loaded machine held the CLI's own first call back past the deadline (seen: 22 s).
        let connection = try ClientConnection(path: socketPath)
        defer { connection.close() }
        let metadata = [MetadataEntry(key: profileMetadataKey, value: profile)]
        let request = try ListOutboxRequest().encode()
        while true {
            let bytes = try await connection.call(method: Method.listOutbox, payload: request, metadata: metadata)
            let matching = try ListOutboxResponse.decode(bytes).entries.filter {
                $0.appID == profile && $0.contact?.value == contact
            }
            if matching.count >= count, let last = matching.last { return last.code }
            if ContinuousClock.now >= deadline {
                throw HarnessError("no code #\(count) for \(contact) in the outbox within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    // MARK: files

    private func nextNumber() -> Int {
        counter.withLock {
            $0 += 1
            return $0
        }
    }

    static func openForAppending(_ path: String) throws -> FileHandle {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw HarnessError("cannot open \(path): \(String(cString: strerror(errno)))") }
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    static func openForReading(_ path: String) throws -> FileHandle {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw HarnessError("cannot open \(path): \(String(cString: strerror(errno)))") }
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    static func readText(_ path: String) -> String {
        guard let data = FileManager.default.contents(atPath: path) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }
}
