import Dispatch
import RainCore

/// Where the next prompt appears, and a terminal multiplexer that can read it there: what
/// `rainwallet status` says of the prompt (`Prompt/Get`), as the prompt itself says it in a note.
public struct PromptPlaceReport: Sendable, Equatable {
    /// A terminal multiplexer holding the prompt terminal's other end: it keeps what the terminal
    /// shows, so it can read the screen, a prompt's code included.
    public struct Multiplexer: Sendable, Equatable {
        /// Its command name (`/proc/PID/comm`): `tmux`, `screen`, …
        public var command: String
        /// Its pid.
        public var pid: Int32

        /// A multiplexer.
        public init(command: String, pid: Int32) {
            self.command = command
            self.pid = pid
        }
    }

    /// The registered terminal the next prompt appears on, if any.
    public var terminal: String?
    /// Whether the daemon has a display: prompts appear there when no terminal is registered.
    public var hasDisplay: Bool
    /// The multiplexer holding `terminal`'s other end, if the daemon sees one (one of another uid,
    /// or one that is not dumpable, is not seen).
    public var multiplexer: Multiplexer?

    /// A report.
    public init(terminal: String? = nil, hasDisplay: Bool = false, multiplexer: Multiplexer? = nil) {
        self.terminal = terminal
        self.hasDisplay = hasDisplay
        self.multiplexer = multiplexer
    }

    /// The report for `targets`. Finding the multiplexer reads `/proc` (each process's command
    /// name, then the descriptors of the multiplexers among them): blocking work, done on a global
    /// queue rather than on the concurrency pool or the event loop.
    public static func read(_ targets: PromptTargets) async -> PromptPlaceReport {
        var report = PromptPlaceReport(terminal: targets.terminal?.path, hasDisplay: targets.display != nil)
        guard let path = report.terminal else { return report }
        let holder = try? await DispatchQueue.global().runBlocking { () throws(RainError) in
            TerminalHolders.multiplexer(of: path)
        }
        report.multiplexer = holder.flatMap { $0 }.map { Multiplexer(command: $0.command, pid: $0.pid) }
        return report
    }
}
