import FoundationEssentials
import Glibc
import RainCore
import RainSystem

/// Where a prompt appears: the user's choice, never the caller's. Either the daemon's own display
/// (a desktop pinentry such as `pinentry-gnome3`), or a terminal the user registered
/// (`rainwallet prompt here`, for `pinentry-tty` or `pinentry-curses`). A terminal is refused
/// when it is the caller's controlling terminal or any terminal of the caller's session: there,
/// the caller itself could answer.
public enum PromptTarget: Sendable, Equatable, CustomStringConvertible {
    /// The daemon's display.
    case display(DisplayEnvironment)
    /// A registered terminal: its path (`/dev/pts/4`) and its `TERM` (for `pinentry-curses`).
    case terminal(path: String, term: String)

    /// "the display :0", "the terminal /dev/pts/4".
    public var description: String {
        switch self {
        case .display(let display): return "the display \(display.name)"
        case .terminal(let path, _): return "the terminal \(path)"
        }
    }

    /// Checks the target against the caller and opens what the prompt needs (for a terminal: a
    /// descriptor opened `O_NOCTTY`, with the terminal's settings saved so they can be put back
    /// if the pinentry is killed).
    /// - Throws: RAIN_202 reason `prompt_target_caller_terminal` or `prompt_target_caller_session`
    ///   when the terminal is the caller's; RAIN_102 reason `prompt_target_invalid` when the path
    ///   is not a terminal of this user or is gone.
    func prepare(for caller: CallerIdentity) throws(RainError) -> PreparedPromptTarget {
        switch self {
        case .display(let display):
            return PreparedPromptTarget(arguments: [], environment: display.environment, terminal: nil)
        case .terminal(let path, let term):
            let terminal = try PromptTerminal(path: path, caller: caller)
            return PreparedPromptTarget(arguments: ["--ttyname", path], environment: ["TERM": term], terminal: terminal)
        }
    }
}

/// The daemon's graphical session, as its own environment names it. Only these variables reach a
/// desktop pinentry.
public struct DisplayEnvironment: Sendable, Equatable {
    /// The variables a desktop pinentry needs: `DISPLAY`, `WAYLAND_DISPLAY`, `XAUTHORITY`,
    /// `DBUS_SESSION_BUS_ADDRESS` and `XDG_RUNTIME_DIR` (where a relative `WAYLAND_DISPLAY` lives).
    public static let variables = ["DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"]

    /// The pinentry's whole environment.
    public let environment: [String: String]

    /// The display found in `environment` (the daemon's own), or nil when it names neither an X11
    /// nor a Wayland display.
    public init?(environment: [String: String]) {
        let kept = environment.filter { Self.variables.contains($0.key) && !$0.value.isEmpty }
        guard kept["DISPLAY"] != nil || kept["WAYLAND_DISPLAY"] != nil else { return nil }
        self.environment = kept
    }

    /// `WAYLAND_DISPLAY` or `DISPLAY`, for messages.
    public var name: String { environment["WAYLAND_DISPLAY"] ?? environment["DISPLAY"] ?? "?" }
}

/// A terminal the user registered for prompts (`rainwallet prompt here`).
public struct RegisteredTerminal: Sendable, Equatable {
    /// Its path, `/dev/pts/4`.
    public var path: String
    /// Its `TERM`, for `pinentry-curses`.
    public var term: String

    /// A terminal.
    public init(path: String, term: String = "xterm") {
        self.path = path
        self.term = term
    }

    /// Checks that `path` can be registered: a terminal device of this uid (not `/dev/tty`),
    /// opened without becoming anyone's controlling terminal. Whether it is a caller's terminal is
    /// checked at each prompt, against the app that asks then.
    /// - Throws: RAIN_102 reason `prompt_target_invalid`, saying why.
    public static func check(path: String) throws(RainError) {
        _ = try PromptTerminal(path: path, caller: nil)
    }
}

/// The places a prompt may appear, as the user set them: a registered terminal wins over the
/// daemon's display (the user chose it on purpose).
public struct PromptTargets: Sendable, Equatable {
    /// The daemon's display, if it has one.
    public var display: DisplayEnvironment?
    /// The registered terminal, if any.
    public var terminal: RegisteredTerminal?

    /// Targets.
    public init(display: DisplayEnvironment? = nil, terminal: RegisteredTerminal? = nil) {
        self.display = display
        self.terminal = terminal
    }

    /// Where the next prompt goes.
    /// - Throws: RAIN_404 reason `prompt_unavailable` when there is neither a display nor a
    ///   registered terminal.
    public func selected() throws(RainError) -> PromptTarget {
        if let terminal { return .terminal(path: terminal.path, term: terminal.term) }
        if let display { return .display(display) }
        throw RainError(
            .unavailable,
            "no prompt can be shown: the daemon has no display (DISPLAY or WAYLAND_DISPLAY) and no terminal is "
                + "registered; run `rainwallet prompt here` in a terminal you keep for prompts",
            details: RainError.Details(reason: PromptReason.unavailable))
    }
}

/// What a pinentry needs for one target: its arguments, its whole environment, and for a
/// terminal, the descriptor that checked it.
final class PreparedPromptTarget {
    let arguments: [String]
    let environment: [String: String]
    let terminal: PromptTerminal?

    init(arguments: [String], environment: [String: String], terminal: PromptTerminal?) {
        self.arguments = arguments
        self.environment = environment
        self.terminal = terminal
    }
}

/// A registered terminal, opened `O_NOCTTY` (it never becomes the daemon's controlling terminal)
/// and checked against the caller. Owns the descriptor.
final class PromptTerminal {
    let path: String
    let descriptor: Int32
    private let settings: TerminalSettings

    /// `/dev/tty` (major 5, minor 0) means "my controlling terminal" to whoever opens it.
    private static let currentTerminal = DeviceNumber(major: 5, minor: 0)

    /// Opens and checks `path`; with a `caller`, also refuses its controlling terminal and any
    /// terminal of its session.
    init(path: String, caller: CallerIdentity?) throws(RainError) {
        func invalid(_ why: String) -> RainError {
            RainError(
                .invalidArgument,
                "the prompt terminal \(path) \(why); run `rainwallet prompt here` in a terminal you keep for prompts",
                details: RainError.Details(reason: PromptReason.invalidTarget, field: "prompt.terminal"))
        }
        guard path.hasPrefix("/dev/") else { throw invalid("is not a device path") }
        let fd: Int32
        do throws(RainError) {
            // O_NONBLOCK: a terminal line waiting for carrier does not hang the open.
            fd = try Syscall.open(path, .readWrite, options: [.noControllingTerminal, .noFollow, .nonBlocking])
        } catch {
            throw invalid("cannot be opened (\(ErrnoError(code: error.errno ?? EIO)))")
        }
        do throws(RainError) {
            guard let (device, owner) = try Syscall.characterDevice(fd, path: path) else {
                throw invalid("is not a terminal")
            }
            guard device != Self.currentTerminal else { throw invalid("means the opener's own terminal") }
            guard owner == geteuid() else { throw invalid("belongs to uid \(owner), not to uid \(geteuid())") }
            do throws(RainError) {
                settings = try Syscall.terminalSettings(fd, path: path)
            } catch {
                throw invalid("is not a terminal")
            }
            if let caller, caller.controllingTerminal != 0, DeviceNumber(encoded: caller.controllingTerminal) == device {
                throw RainError(
                    .unauthorized,
                    "the prompt terminal \(path) is the controlling terminal of the caller (pid \(caller.pid)), which "
                        + "could answer its own prompt; register another terminal with `rainwallet prompt here`, or "
                        + "use the desktop prompt",
                    details: RainError.Details(reason: PromptReason.callerTerminal, field: "prompt.terminal"))
            }
            let sessions = try Self.sessions(of: device, descriptor: fd, path: path)
            if let caller, caller.sessionID > 0, sessions.contains(caller.sessionID) {
                throw RainError(
                    .unauthorized,
                    "the prompt terminal \(path) belongs to the caller's session (session \(caller.sessionID), pid "
                        + "\(caller.pid)), whose programs could answer its prompt; register a terminal of another "
                        + "session with `rainwallet prompt here`, or use the desktop prompt",
                    details: RainError.Details(reason: PromptReason.callerSession, field: "prompt.terminal"))
            }
            // Before a prompt (not when a terminal is only checked for registering): any other
            // holder outside the registered shell's session could redraw the prompt or read the
            // code typed. Said on the terminal too: the user sees why nothing was asked. This
            // process's children are its own (see `TerminalHolders.holders`).
            let foreign =
                caller == nil
                ? [] : TerminalHolders.holders(of: path, excluding: [getpid()]).filter { !sessions.contains($0.session) }
            if !foreign.isEmpty {
                let names = foreign.prefix(3).map(\.description).joined(separator: ", ")
                let notice = Array(
                    "\r\nRainWallet: no prompt shown here: \(names) outside this terminal's session holds it open\r\n".utf8)
                _ = notice.withUnsafeBytes { bytes in try? Syscall.write(fd, bytes, path: path) }
                throw RainError(
                    .unauthorized,
                    """
                    the prompt terminal \(path) is held open by \(names), outside the session that registered it: it could \
                    read the code or redraw the prompt; close it, or register another terminal with `rainwallet prompt here`
                    """, details: RainError.Details(reason: PromptReason.terminalShared, field: "prompt.terminal"))
            }
        } catch {
            Syscall.closeUnchecked(fd, because: .failurePath)
            throw error
        }
        self.path = path
        self.descriptor = fd
    }

    deinit { Syscall.closeUnchecked(descriptor, because: .readOnly) }

    /// The sessions whose controlling terminal `device` is. `TIOCGSID` answers only a process of
    /// the session, so the sessions are also found as `ps` finds them: every process whose
    /// `/proc/PID/stat` names `device` as its terminal (`tty_nr`) is in such a session. A process
    /// this uid cannot read is skipped (it is another user's; the terminal is this user's).
    static func sessions(of device: DeviceNumber, descriptor: Int32, path: String) throws(RainError) -> Set<Int32> {
        var sessions = Set<Int32>()
        if let session = try Syscall.sessionOfTerminal(descriptor, path: path) { sessions.insert(session) }
        let entries: [String]
        do {
            entries = try FileManager.default.contentsOfDirectory(atPath: "/proc")
        } catch {
            throw RainError(.internalError, "cannot list /proc to find the sessions of \(path)")
        }
        for entry in entries where entry.first?.isNumber == true {
            guard let stat = processTerminal("/proc/\(entry)/stat"), stat.terminal != 0 else { continue }
            if DeviceNumber(encoded: stat.terminal) == device { sessions.insert(stat.session) }
        }
        return sessions
    }

    /// The session id, `tty_nr` and parent's pid of `/proc/PID/stat`, or nil when it cannot be
    /// read (the process is gone or not ours to read).
    static func processTerminal(_ statPath: String) -> (session: Int32, terminal: UInt64, parent: Int32)? {
        guard let fd = try? Syscall.open(statPath, .readOnly) else { return nil }
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        var bytes = [UInt8](repeating: 0, count: 1024)
        let count = bytes.withUnsafeMutableBytes { buffer in
            (try? Result { () throws(RainError) in try Syscall.read(fd, into: buffer) }.get()) ?? 0
        }
        let text = String(decoding: bytes[..<count], as: UTF8.self)
        // The command (in parentheses) may hold spaces and parentheses: fields follow the last ")".
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // state, ppid, pgrp, session, tty_nr
        guard fields.count > 4, let parent = Int32(fields[1]), let session = Int32(fields[3]),
            let terminal = UInt64(fields[4])
        else { return nil }
        return (session, terminal, parent)
    }

    /// After a killed pinentry: puts the terminal's settings back (echo on) and tells the user why
    /// the prompt went away. Best effort: the terminal may be gone.
    func restore(notice: String) {
        try? Syscall.setTerminalSettings(descriptor, settings, path: path)
        let line = Array("\r\nRainWallet: \(notice)\r\n".utf8)
        _ = line.withUnsafeBytes { bytes in try? Syscall.write(descriptor, bytes, path: path) }
    }
}
