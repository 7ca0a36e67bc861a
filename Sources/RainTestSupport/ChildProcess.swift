import Foundation
import Synchronization

/// A child process of the harness, started with `posix_spawn` (every descriptor but 0, 1 and 2
/// closed in the child), and its exit status, collected by `waitpid(WNOHANG)` when polled.
///
/// Not Foundation's `Process`: it learns of an exit when the child's copy of an exit-report
/// socket closes, on one manager thread for the whole test process that then blocks in
/// `waitpid` for that child; under load that thread falls behind, exited daemons stay zombies and
/// tests waiting for their exit fail. Here each wait is the test's own poll, and no child inherits
/// anything but its three standard descriptors.
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
