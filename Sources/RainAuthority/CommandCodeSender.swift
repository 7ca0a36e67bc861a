import Dispatch
import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainSystem

/// Delivers codes by running a configured program (an SMTP or SMS bridge) once per code.
///
/// The program gets one JSON object and a newline on its standard input,
/// `{"appId":…,"code":…,"contact":…,"kind":…}`, and must exit with status 0 within the timeout;
/// it is killed when the timeout passes. Its standard output and error are discarded, so a program
/// that echoes its input cannot leak a code into the daemon's log. Programs run on the sender's own
/// queue, never on the Swift concurrency pool.
public final class CommandCodeSender: CodeSender {
    /// The program and its arguments: `[path, args...]`.
    public let command: [String]
    /// How long the program may run.
    public let timeout: Duration
    private let logger: Logger
    // Concurrent: one slow provider call must not hold up every other login.
    private let queue = DispatchQueue(label: "rain.authority.command-sender", attributes: .concurrent)

    /// A sender that runs `command`.
    ///
    /// Sets SIGPIPE to be ignored for the process (as the daemon does anyway), so a program that
    /// exits without reading its input makes the write fail instead of killing the process.
    /// - Parameters:
    ///   - command: an absolute program path, then its arguments.
    ///   - timeout: how long the program may run (10 s by default).
    /// - Throws: RAIN_102 when the command is empty or the program path is not absolute.
    public init(command: [String], timeout: Duration = .seconds(10), logger: Logger) throws(RainError) {
        guard let program = command.first, !program.isEmpty else {
            throw RainError.invalid("the code sender command is empty", field: "codeSender.command")
        }
        guard program.hasPrefix("/") else {
            throw RainError.invalid(
                "the code sender program must be an absolute path, like /usr/local/bin/send-code",
                field: "codeSender.command")
        }
        self.command = command
        self.timeout = timeout
        self.logger = logger
        signal(SIGPIPE, SIG_IGN)
    }

    /// Runs the program with the delivery on its standard input.
    /// - Throws: RAIN_501 naming the program when it cannot start, exits with a non-zero status,
    ///   dies from a signal or runs past the timeout. The code is never in the message.
    public func deliver(_ delivery: OutboxDelivery) async throws(RainError) {
        try await run(delivery, timeout: timeout)
    }

    /// Runs the program with the message's delivery on its standard input, killed at the timeout
    /// or the message's `timeLimit`, whichever comes first.
    /// - Throws: as `deliver(_ delivery:)`.
    public func deliver(_ message: CodeMessage) async throws(RainError) {
        try await run(message.delivery, timeout: min(timeout, message.timeLimit ?? timeout))
    }

    private func run(_ delivery: OutboxDelivery, timeout: Duration) async throws(RainError) {
        let input = try Self.payload(delivery)
        let command = self.command
        let logger = self.logger
        try await queue.runBlocking { () throws(RainError) in
            try Self.run(command: command, input: input, timeout: timeout, logger: logger)
        }
    }

    private struct Payload: Encodable {
        var appId: String
        var kind: String
        var contact: String
        var code: String
    }

    static func payload(_ delivery: OutboxDelivery) throws(RainError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let payload = Payload(
            appId: delivery.appID, kind: delivery.kind, contact: delivery.contact, code: delivery.code)
        do {
            return Array(try encoder.encode(payload)) + [UInt8(ascii: "\n")]
        } catch {
            throw RainError(.internalError, "cannot encode a code delivery")
        }
    }

    /// Blocking: runs on `queue`.
    private static func run(command: [String], input: [UInt8], timeout: Duration, logger: Logger) throws(RainError) {
        let program = command[0]
        let stdin = try Syscall.makePipe()
        let nullOutput = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { if nullOutput >= 0 { Syscall.closeUnchecked(nullOutput, because: .readOnly) } }
        let pid: Int32
        do throws(RainError) {
            // As Foundation's Process ran it: the daemon's environment, output and errors dropped.
            pid = try Syscall.spawn(
                program, arguments: Array(command.dropFirst()), environment: ProcessInfo.processInfo.environment,
                standardInput: stdin.read, standardOutput: nullOutput >= 0 ? nullOutput : stdin.read)
        } catch {
            Syscall.closeUnchecked(stdin.read, because: .failurePath)
            Syscall.closeUnchecked(stdin.write, because: .failurePath)
            throw RainError(
                .provider, "the code sender \(program) could not be started", underlying: SendableErrorDescription(error))
        }
        // The child has its copy; ours would keep the pipe open after it exits.
        Syscall.closeUnchecked(stdin.read, because: .readOnly)

        var inputError: (any Error)?
        let written = input.withUnsafeBytes { bytes in
            Result { () throws(RainError) in try Syscall.writeAll(stdin.write, bytes) }
        }
        if case .failure(let error) = written { inputError = error }
        Syscall.closeUnchecked(stdin.write, because: .readOnly)

        guard let status = try waitForExit(pid, within: timeout) else {
            do {
                try Syscall.sendSignal(SIGKILL, to: pid)
            } catch {
                logger.warning("code_sender.kill_failed", ["program": program, "errno": "\(error.errno ?? 0)"])
            }
            _ = try? waitForExit(pid, within: .seconds(5))
            logger.warning("code_sender.timeout", ["program": program, "timeoutMs": String(timeout.milliseconds)])
            throw RainError(
                .provider, "the code sender \(program) did not finish within \(timeout.milliseconds) ms and was killed")
        }

        // The wait status: the low 7 bits are the signal that ended the child (0: it exited), the
        // next byte its exit status (glibc's WIFSIGNALED and WEXITSTATUS, macros Swift cannot call).
        let signal = status & 0x7F
        if signal != 0 {
            throw RainError(.provider, "the code sender \(program) was killed by signal \(signal)")
        }
        let exitStatus = (status >> 8) & 0xFF
        guard exitStatus == 0 else {
            throw RainError(.provider, "the code sender \(program) exited with status \(exitStatus)")
        }
        if let inputError {
            throw RainError(
                .provider, "the code sender \(program) exited before reading the code from its standard input",
                underlying: SendableErrorDescription(inputError))
        }
    }

    /// Reaps the child `pid` once it exits, checking every few milliseconds (this runs on the
    /// blocking queue, never on the Swift pool).
    /// - Returns: its wait status, or nil when it still runs after `timeout`.
    private static func waitForExit(_ pid: Int32, within timeout: Duration) throws(RainError) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = try Syscall.exitStatusIfExited(pid) { return status }
            if ContinuousClock.now >= deadline { return nil }
            usleep(2_000)
        }
    }
}
