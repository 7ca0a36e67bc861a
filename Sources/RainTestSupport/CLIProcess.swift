import Foundation
import Synchronization

/// What a finished `rainwallet` run produced.
public struct CLIResult: Sendable, CustomStringConvertible {
    /// The exit status; a death by signal N reads as 128 + N.
    public var status: Int32
    public var stdout: String
    public var stderr: String

    public var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
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
