internal import CSystem
import Glibc
import RainCore

extension Syscall {
    /// Starts `program` in a session of its own, with a clean signal state (empty mask, every
    /// signal at its default: the daemon ignores `SIGPIPE`, the child must not), the given
    /// descriptors as its standard input, output and error, and no other descriptor of this
    /// process (all closed in the child, whatever their close-on-exec flag).
    /// - Parameters:
    ///   - program: an absolute path.
    ///   - arguments: `argv[1...]`.
    ///   - environment: the whole environment of the child (`KEY=value` pairs), nothing inherited.
    ///   - standardInput: the child's descriptor 0.
    ///   - standardOutput: the child's descriptor 1.
    ///   - standardError: the child's descriptor 2, or nil for `/dev/null`.
    /// - Returns: the child's pid; reap it with `waitForExit` or `exitStatusIfExited`.
    /// - Throws: RAIN_502 `cannot start <program>: <strerror>` (`error.errno` tells `ENOENT`, `EACCES`).
    public static func spawn(
        _ program: String, arguments: [String], environment: [String: String], standardInput: Int32,
        standardOutput: Int32, standardError: Int32? = nil
    ) throws(RainError) -> Int32 {
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        var rc = rain_spawn(program, argv, envp, standardInput, standardOutput, standardError ?? -1, &pid)
        // ETXTBSY: some process still holds the program open for writing, most often a child that
        // another thread forked just while the file was written (it closes the descriptor when it
        // execs) or a package upgrade replacing it. It passes within milliseconds: try again briefly.
        var tries = 1
        while rc == ETXTBSY, tries < spawnBusyTries {
            usleep(10_000)
            rc = rain_spawn(program, argv, envp, standardInput, standardOutput, standardError ?? -1, &pid)
            tries += 1
        }
        guard rc == 0 else { throw error("start", path: program, ErrnoError(code: rc)) }
        return pid
    }

    /// How many times `spawn` tries a program that is busy (ETXTBSY), 10 ms apart.
    static let spawnBusyTries = 20

    /// A pipe whose two ends are close-on-exec.
    /// - Returns: the end to read from and the end to write to.
    /// - Throws: RAIN_502 naming `pipe2`.
    public static func makePipe() throws(RainError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        try fds.withUnsafeMutableBufferPointer { (buffer) throws(RainError) in
            guard let base = buffer.baseAddress else { throw error("pipe2", ErrnoError(code: EINVAL)) }
            try call("pipe2") { rain_pipe(base) }
        }
        return (fds[0], fds[1])
    }

    /// Waits until the child `pid` exits and reaps it.
    /// - Returns: its wait status (as `waitpid` fills it).
    /// - Throws: RAIN_502 naming `waitpid` (`ECHILD`: not a child of this process, or reaped already).
    @discardableResult
    public static func waitForExit(_ pid: Int32) throws(RainError) -> Int32 {
        var status: Int32 = 0
        try call("waitpid") { waitpid(pid, &status, 0) }
        return status
    }

    /// Reaps the child `pid` if it has exited, without waiting.
    /// - Returns: its wait status, or nil while it runs.
    /// - Throws: RAIN_502 naming `waitpid`.
    public static func exitStatusIfExited(_ pid: Int32) throws(RainError) -> Int32? {
        var status: Int32 = 0
        let reaped = try call("waitpid") { waitpid(pid, &status, WNOHANG) }
        return reaped == pid ? status : nil
    }
}
