import Foundation
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

/// Runs the real `rainwalletd` in a fresh short temporary directory (`/tmp/rwt-XXXXXX`: socket
/// `d.sock`, state `state/`, log `daemon.log`) and the real `rainwallet` against it.
///
/// Each test owns one harness, so tests run in parallel. Swift Testing has no tear-down: always
/// shut the harness down in a `defer`:
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

    let daemon = Mutex<ChildProcess?>(nil)
    /// CLI processes, killed by `shutdown()` if a failed test left one waiting for input.
    let clients = Mutex<[ChildProcess]>([])
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
            fm.isExecutableFile(atPath: dir.appendingPathComponent("rainwalletd-test").path)
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

    init(
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
    /// `AuthorityDeadlines.forTests`: a test about something else must not fail because
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
                executable: binaryDirectory.appendingPathComponent("rainwalletd-test"), arguments: arguments,
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
            if let bytes = try? await call(Method.daemonGetInfo, payload: try GetInfoRequest().encode(), timeout: .seconds(5)),
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
    /// other test's tasks (a stream's first value comes late). A test that needs the
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

    // MARK: files

    func nextNumber() -> Int {
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
