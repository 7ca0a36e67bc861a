import Foundation
import Synchronization

/// A program a test runs (`openssl`, `script`, `bash scripts/harness`, `rainwalletd authority`,
/// …), started with `posix_spawn` like the harness's own children: only its three standard
/// descriptors are inherited, and its exit is collected by the test's own `waitpid(WNOHANG)`
/// polls. Use it instead of Foundation's `Process`, whose exit notices all go through one manager
/// thread that fell more than 15 s behind on a loaded machine (exited programs stayed zombies and
/// tests waiting for them failed).
///
/// Waiting is asynchronous (`waitForExit`, `run`): a test never blocks one of the concurrency
/// pool's threads (one per core) while a program runs, which would stall every other test.
public final class TestProcess: Sendable {
    /// Where standard input comes from.
    public enum Input: Sendable {
        /// `/dev/null`.
        case null
        /// A file, read from its start.
        case file(String)
        /// This text (kept in a file beside the process's other files), then end of input.
        case text(String)
        /// A pipe: `TestProcess.input` is its write end, for the test to write to and close.
        case pipe
        /// A copy of this open descriptor, which the caller keeps and closes (a pseudo-terminal's
        /// master for a program that stands in for a terminal multiplexer).
        case descriptor(Int32)
    }

    /// Where standard output or standard error goes.
    public enum Output: Sendable {
        /// `/dev/null`.
        case null
        /// Appended to this file, created (0600) when missing.
        case file(String)
    }

    private let child: ChildProcess
    /// The write end of standard input when launched with `.pipe`, else nil.
    public let input: FileHandle?

    /// Starts `executable` (a full path) with `arguments`.
    /// - Parameters:
    ///   - environment: its whole environment; this process's own when nil.
    ///   - stdin, stdout, stderr: its standard descriptors.
    /// - Throws: `HarnessError` when a file cannot be opened or the program cannot start.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: Input = .null,
        stdout: Output = .null, stderr: Output = .null
    ) throws {
        var opened: [Int32] = []
        defer { for fd in opened { close(fd) } }
        func open(_ output: Output) throws -> Int32 {
            let fd: Int32
            switch output {
            case .null: fd = Glibc.open("/dev/null", O_WRONLY | O_CLOEXEC)
            case .file(let path): fd = Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            }
            guard fd >= 0 else { throw HarnessError("cannot open \(output) for \(executable): errno \(errno)") }
            opened.append(fd)
            return fd
        }
        let out = try open(stdout)
        let err = try open(stderr)
        let environment = environment ?? ProcessInfo.processInfo.environment
        let url = URL(fileURLWithPath: executable)
        switch stdin {
        case .pipe:
            // Made and handed over under the launch lock, both ends close-on-exec, so no other
            // child (a Foundation `Process` a test starts) inherits either end.
            (child, input) = try ChildProcess.launchLock.withLock { _ throws -> (ChildProcess, FileHandle?) in
                var ends: [Int32] = [-1, -1]
                guard pipe(&ends) == 0 else { throw HarnessError("pipe: errno \(errno)") }
                for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
                defer { close(ends[0]) }
                do {
                    let child = try ChildProcess(
                        spawning: url, arguments: arguments, environment: environment, standardInput: ends[0],
                        standardOutput: out, standardError: err)
                    return (child, FileHandle(fileDescriptor: ends[1], closeOnDealloc: true))
                } catch {
                    close(ends[1])
                    throw error
                }
            }
        case .descriptor(let fd):
            child = try ChildProcess(
                spawning: url, arguments: arguments, environment: environment, standardInput: fd, standardOutput: out,
                standardError: err)
            input = nil
        case .null, .file, .text:
            let path: String
            switch stdin {
            case .file(let file): path = file
            case .text(let text):
                path = try Self.temporaryFile(containing: text)
            default: path = "/dev/null"
            }
            let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            if case .text = stdin { unlink(path) }
            guard fd >= 0 else { throw HarnessError("cannot open \(path) for \(executable)'s input: errno \(errno)") }
            opened.append(fd)
            child = try ChildProcess(
                spawning: url, arguments: arguments, environment: environment, standardInput: fd, standardOutput: out,
                standardError: err)
            input = nil
        }
    }

    /// Its process id.
    public var pid: Int32 { child.pid }

    /// The exit status once it has exited (128 + N for a death by signal N), else nil.
    public var exitStatus: Int32? { child.exitStatus }

    /// True until it has exited.
    public var isRunning: Bool { child.exitStatus == nil }

    /// Sends `signal` while it runs.
    public func signal(_ signal: Int32) { child.signal(signal) }

    /// Polls (asynchronously) until it has exited; nil at the deadline.
    public func waitForExit(timeout: Duration) async -> Int32? { await child.waitForExit(timeout: timeout) }

    /// Polls, blocking the calling thread, until it has exited; nil at the deadline. Only off the
    /// concurrency pool (a thread of its own, a `defer` that must not return before).
    public func waitForExitBlocking(timeout: Duration) -> Int32? { child.waitForExitBlocking(timeout: timeout) }

    /// SIGTERM, then SIGKILL if it is still running after `grace`; waits for the exit.
    public func stop(grace: Duration = .seconds(10)) async {
        signal(SIGTERM)
        if await waitForExit(timeout: grace) == nil {
            signal(SIGKILL)
            _ = await waitForExit(timeout: .seconds(5))
        }
    }

    /// What the kernel says of it (running, or exited and not collected yet), for failure messages.
    public var kernelState: String { child.kernelState }

    /// Runs `executable` to completion and returns its status and what it printed.
    /// - Throws: `HarnessError` when it cannot start, or is still running after `timeout` (it is
    ///   then killed).
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, input: String = "",
        timeout: Duration = .seconds(60)
    ) async throws -> CLIResult {
        let (process, files) = try start(executable, arguments, environment: environment, input: input)
        defer { files.remove() }
        guard let status = await process.waitForExit(timeout: timeout) else {
            let state = process.kernelState
            process.signal(SIGKILL)
            _ = await process.waitForExit(timeout: .seconds(5))
            throw HarnessError("\(executable) was still running after \(timeout) (\(state)): \(files.read().stderr)")
        }
        let (stdout, stderr) = files.read()
        return CLIResult(status: status, stdout: stdout, stderr: stderr)
    }

    /// `run`, blocking the calling thread: for synchronous set-up code (certificates, a keyring),
    /// not for a test's body.
    public static func runBlocking(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, input: String = "",
        timeout: Duration = .seconds(60)
    ) throws -> CLIResult {
        let (process, files) = try start(executable, arguments, environment: environment, input: input)
        defer { files.remove() }
        guard let status = process.waitForExitBlocking(timeout: timeout) else {
            let state = process.kernelState
            process.signal(SIGKILL)
            _ = process.waitForExitBlocking(timeout: .seconds(5))
            throw HarnessError("\(executable) was still running after \(timeout) (\(state)): \(files.read().stderr)")
        }
        let (stdout, stderr) = files.read()
        return CLIResult(status: status, stdout: stdout, stderr: stderr)
    }

    /// The two files a `run` captures output in.
    private struct CaptureFiles {
        let directory: String
        var stdout: String { "\(directory)/stdout" }
        var stderr: String { "\(directory)/stderr" }
        func read() -> (stdout: String, stderr: String) { (DaemonHarness.readText(stdout), DaemonHarness.readText(stderr)) }
        func remove() { try? FileManager.default.removeItem(atPath: directory) }
    }

    private static func start(
        _ executable: String, _ arguments: [String], environment: [String: String]?, input: String
    ) throws -> (TestProcess, CaptureFiles) {
        let files = CaptureFiles(directory: try temporaryDirectory())
        do {
            let process = try TestProcess(
                executable, arguments, environment: environment, stdin: .text(input), stdout: .file(files.stdout),
                stderr: .file(files.stderr))
            return (process, files)
        } catch {
            files.remove()
            throw error
        }
    }

    /// A new 0700 directory under /tmp.
    private static func temporaryDirectory() throws -> String {
        var template = Array("/tmp/rwp-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.flatMap { mkdtemp($0) } }
        guard let made else { throw HarnessError("mkdtemp: errno \(errno)") }
        return String(cString: made)
    }

    /// A new 0600 file under /tmp holding `text`; the caller unlinks it.
    private static func temporaryFile(containing text: String) throws -> String {
        var template = Array("/tmp/rwp-in-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.map { mkstemp($0) } ?? -1 }
        guard fd >= 0 else { throw HarnessError("mkstemp: errno \(errno)") }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        defer { close(fd) }
        let path = template.withUnsafeBufferPointer { $0.baseAddress.map { String(cString: $0) } ?? "" }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else {
                unlink(path)
                throw HarnessError("cannot write \(path): errno \(errno)")
            }
            written += n
        }
        return path
    }
}
