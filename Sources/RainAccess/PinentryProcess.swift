import Glibc
import RainCore
import RainSystem

/// One running pinentry: its pid and pipes, the line reader, and the kill-and-reap that ends it.
/// Used by one thread (the prompt's queue); `PinentryControl` is the only part other threads touch.
final class PinentryProcess {
    /// At most this many bytes of `D` data per command: a typed code is 4 characters.
    static let maximumData = 256
    /// At most this many lines before a command's `OK` or `ERR`.
    static let maximumLinesPerCommand = 64
    /// How long a pinentry that answered may take to exit after `BYE` before it is killed.
    static let exitGrace: Duration = .milliseconds(500)

    private let program: String
    private let pid: Int32
    private let input: Int32
    private let output: Int32
    private let control: PinentryControl
    private let terminal: PromptTerminal?
    private var buffer: [UInt8] = []
    private var isFinished = false

    /// Starts the program with the target's arguments and environment.
    /// - Throws: RAIN_501 reason `prompt_failed` when it cannot start.
    init(program: String, target: PreparedPromptTarget, control: PinentryControl) throws(RainError) {
        self.program = program
        self.control = control
        self.terminal = target.terminal
        let toChild = try Syscall.makePipe()
        let fromChild: (read: Int32, write: Int32)
        do throws(RainError) {
            fromChild = try Syscall.makePipe()
        } catch {
            Syscall.closeUnchecked(toChild.read, because: .failurePath)
            Syscall.closeUnchecked(toChild.write, because: .failurePath)
            throw error
        }
        do throws(RainError) {
            pid = try Syscall.spawn(
                program, arguments: target.arguments, environment: target.environment, standardInput: toChild.read,
                standardOutput: fromChild.write)
        } catch {
            for fd in [toChild.read, toChild.write, fromChild.read, fromChild.write] {
                Syscall.closeUnchecked(fd, because: .failurePath)
            }
            throw RainError(
                .provider,
                "the pinentry program \(program) could not be started (\(ErrnoError(code: error.errno ?? EIO))); "
                    + "install it (apt install pinentry-tty) or set access.pinentry",
                details: RainError.Details(reason: PromptReason.failed, field: "access.pinentry"), underlying: error)
        }
        // The child has its copies; ours would keep the pipes open after it exits.
        Syscall.closeUnchecked(toChild.read, because: .readOnly)
        Syscall.closeUnchecked(fromChild.write, because: .failurePath)
        input = toChild.write
        output = fromChild.read
        control.processID = pid
    }

    deinit { finish(killing: true) }

    /// The whole dialog: the greeting, the settings, GETPIN.
    /// - Throws: RAIN_501 reason `prompt_failed` for an `ERR` that is no answer, or a broken protocol.
    func converse(_ dialog: PinentryDialog) throws(RainError) -> PinentryOutcome {
        switch try reply() {
        case .ok: break
        case .error(let code, let text): throw failure("refused to start: ERR \(code) \(text)")
        case .endOfFile: throw failure("exited before greeting")
        case .withdrawn: return .withdrawn
        }
        var commands: [[UInt8]] = [
            try Assuan.command("SETTITLE", dialog.title),
            try Assuan.command("SETPROMPT", dialog.prompt),
        ]
        if dialog.timeoutSeconds > 0 { commands.append(try Assuan.command("SETTIMEOUT", String(dialog.timeoutSeconds))) }
        if try run(commands) == .withdrawn { return .withdrawn }
        // Each page before the last is its own CONFIRM: Next goes on, anything else refuses. The
        // code is on the last page only, so reaching it means passing every page.
        for page in dialog.pages {
            let setup = [
                try Assuan.command("SETDESC", page), try Assuan.command("SETOK", dialog.nextLabel),
                try Assuan.command("SETCANCEL", dialog.cancelLabel),
            ]
            if try run(setup) == .withdrawn { return .withdrawn }
            try send(try Assuan.command("CONFIRM"))
            switch try reply() {
            case .ok: continue
            case .error(let code, let text):
                if let outcome = PinentryOutcome.forError(code) { return outcome }
                throw failure("failed to show a page: ERR \(code) \(text)")
            case .endOfFile: return .cancelled
            case .withdrawn: return .withdrawn
            }
        }
        let last = [
            try Assuan.command("SETDESC", dialog.description), try Assuan.command("SETOK", dialog.okLabel),
            try Assuan.command("SETCANCEL", dialog.cancelLabel),
        ]
        if try run(last) == .withdrawn { return .withdrawn }
        if dialog.isStatus {
            try send(try Assuan.command("CONFIRM"))
            switch try reply() {
            case .ok, .endOfFile: return .cancelled  // its one button stops what it waits for
            case .error(let code, let text):
                if let outcome = PinentryOutcome.forError(code) { return outcome }
                throw failure("failed to show a status: ERR \(code) \(text)")
            case .withdrawn: return .withdrawn
            }
        }
        try send(try Assuan.command("GETPIN"))
        switch try reply() {
        case .ok(let data): return .entered(data)
        case .error(let code, let text):
            if let outcome = PinentryOutcome.forError(code) { return outcome }
            throw failure("failed to ask: ERR \(code) \(text)")
        case .endOfFile: return .cancelled  // its terminal or window went away
        case .withdrawn: return .withdrawn
        }
    }

    /// Sends each command and reads its `OK`.
    /// - Returns: `.withdrawn` when the dialog was withdrawn meanwhile, else nil.
    /// - Throws: RAIN_501 `prompt_failed` when the program refuses a command or exits.
    private func run(_ commands: [[UInt8]]) throws(RainError) -> PinentryOutcome? {
        for command in commands {
            try send(command)
            switch try reply() {
            case .ok: continue
            case .error(let code, let text):
                throw failure("refused \(String(decoding: command.prefix { $0 != 0x20 }, as: UTF8.self)): ERR \(code) \(text)")
            case .endOfFile: throw failure("exited during the dialog's set-up")
            case .withdrawn: return .withdrawn
            }
        }
        return nil
    }

    /// Ends the program: politely (`BYE`, a short grace) after a finished dialog, at once
    /// (`SIGKILL` to its process group) otherwise, then reaps it. A killed pinentry may leave its
    /// terminal without echo, so the terminal's settings are put back.
    func finish(killing: Bool) {
        guard !isFinished else { return }
        isFinished = true
        var mustKill = killing
        if !mustKill {
            if let bye = try? Assuan.command("BYE") { try? send(bye) }
            Syscall.closeUnchecked(input, because: .failurePath)
            mustKill = !waitForExit(within: Self.exitGrace)
        } else {
            Syscall.closeUnchecked(input, because: .failurePath)
        }
        if mustKill {
            // Its own session and process group (pid = pgid): anything it started goes too.
            _ = try? Syscall.sendSignal(SIGKILL, to: -pid)
            _ = try? Syscall.sendSignal(SIGKILL, to: pid)
            _ = try? Syscall.waitForExit(pid)
            terminal?.restore(notice: control.isWithdrawn ? "the prompt was withdrawn" : "the prompt was closed")
        }
        Syscall.closeUnchecked(output, because: .readOnly)
        control.processID = nil
    }

    private func waitForExit(within grace: Duration) -> Bool {
        var waited: Duration = .zero
        while waited < grace {
            switch Result(catching: { () throws(RainError) in try Syscall.exitStatusIfExited(pid) }) {
            case .success(.some): return true
            case .failure: return true  // not our child any more: nothing to reap
            case .success(.none): break
            }
            usleep(5_000)
            waited += .milliseconds(5)
        }
        return false
    }

    private enum Reply {
        case ok([UInt8])
        case error(code: UInt32, text: String)
        case endOfFile
        case withdrawn
    }

    /// Reads lines up to the command's `OK` or `ERR`, collecting `D` data.
    private func reply() throws(RainError) -> Reply {
        var data: [UInt8] = []
        for _ in 0..<Self.maximumLinesPerCommand {
            guard let line = try nextLine() else { return control.isWithdrawn ? .withdrawn : .endOfFile }
            if control.isWithdrawn { return .withdrawn }
            switch try Assuan.parse(line) {
            case .ok: return .ok(data)
            case .error(let code, let text): return .error(code: code, text: text)
            case .data(let bytes):
                guard data.count + bytes.count <= Self.maximumData else {
                    throw failure("sent more than \(Self.maximumData) bytes of data")
                }
                data += bytes
            case .status, .comment: continue
            case .inquire: try send(try Assuan.command("CAN"))
            }
        }
        throw failure("sent more than \(Self.maximumLinesPerCommand) lines for one command")
    }

    /// The next line, without its newline; nil at end of file or when withdrawn.
    private func nextLine() throws(RainError) -> [UInt8]? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0a) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            guard buffer.count <= Assuan.maximumLineLength + 1 else {
                throw failure("sent a line longer than \(Assuan.maximumLineLength) bytes")
            }
            var fds = [
                pollfd(fd: output, events: Int16(POLLIN), revents: 0),
                pollfd(fd: control.descriptor, events: Int16(POLLIN), revents: 0),
            ]
            _ = try Syscall.poll(&fds, timeoutMilliseconds: -1)
            if fds[1].revents != 0 || control.isWithdrawn { return nil }
            guard fds[0].revents != 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 1024)
            let count = try chunk.withUnsafeMutableBytes { bytes in
                Result { () throws(RainError) in try Syscall.read(output, into: bytes) }
            }.get()
            if count == 0 { return nil }
            buffer += chunk[..<count]
        }
    }

    private func send(_ line: [UInt8]) throws(RainError) {
        do throws(RainError) {
            try line.withUnsafeBytes { bytes in Result { () throws(RainError) in try Syscall.writeAll(input, bytes) } }.get()
        } catch {
            // EPIPE: it exited; the reply read next sees the end of file.
            if error.errno != EPIPE { throw error }
        }
    }

    private func failure(_ what: String) -> RainError {
        RainError(
            .provider, "the pinentry program \(program) \(what); check access.pinentry",
            details: RainError.Details(reason: PromptReason.failed, field: "access.pinentry"))
    }
}
