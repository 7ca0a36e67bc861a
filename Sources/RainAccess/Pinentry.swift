import Glibc
import RainCore
import RainSystem
import Synchronization

/// A pinentry program (`/usr/bin/pinentry-tty`, `pinentry-curses`, `pinentry-gnome3`), spoken to
/// over Assuan on its standard input and output.
///
/// Each dialog starts the program afresh with a clean environment (only what the target needs),
/// in a session of its own, with no descriptor of the daemon but its two pipes; the program is
/// killed and reaped on every path out (answer, cancel, timeout, withdrawal, error).
public struct Pinentry: Sendable {
    /// The program's absolute path.
    public let program: String

    /// A pinentry.
    /// - Parameter program: an absolute path (a relative one would be looked up in a `PATH` the
    ///   caller may control).
    /// - Throws: RAIN_102 field `access.pinentry` when the path is not absolute.
    public init(program: String) throws(RainError) {
        guard program.hasPrefix("/") else {
            throw RainError.invalid(
                "the pinentry program must be an absolute path, like /usr/bin/pinentry-tty", field: "access.pinentry")
        }
        self.program = program
        // A pinentry that exits before reading a command must make the write fail (EPIPE), not
        // kill the daemon.
        signal(SIGPIPE, SIG_IGN)
    }

    /// Runs one dialog (SETTITLE, SETDESC, SETPROMPT, SETOK, SETCANCEL, SETTIMEOUT, GETPIN) on
    /// `target`. Blocking: run it on a queue of its own, never on the Swift concurrency pool.
    /// - Parameters:
    ///   - dialog: what to show.
    ///   - target: the checked target.
    ///   - control: lets another thread withdraw the dialog (the pinentry is then killed).
    /// - Returns: what the user did.
    /// - Throws: RAIN_501 reason `prompt_failed` when the program cannot start, fails, or breaks
    ///   the protocol.
    func run(_ dialog: PinentryDialog, on target: PreparedPromptTarget, control: PinentryControl) throws(RainError)
        -> PinentryOutcome
    {
        if control.isWithdrawn { return .withdrawn }
        let process = try PinentryProcess(program: program, target: target, control: control)
        var outcome: PinentryOutcome = .withdrawn
        do throws(RainError) {
            outcome = try process.converse(dialog)
        } catch {
            process.finish(killing: true)
            throw error
        }
        process.finish(killing: outcome.leavesProgramRunning)
        return outcome
    }
}

/// What a pinentry dialog shows. Texts are sent percent-escaped; each must fit one Assuan line.
struct PinentryDialog: Sendable {
    var title: String
    var description: String
    var prompt: String
    /// The pages shown before `description` (the last page, with the code), each confirmed with
    /// Next (`CONFIRM`); empty for a one-page prompt.
    var pages: [String] = []
    /// The button that shows the next page (`_N` marks its key on a terminal).
    var nextLabel = "_Next"
    var okLabel = "Allow"
    var cancelLabel = "_Refuse"
    /// A status, not a question: the last page is a CONFIRM whose every answer means "stop"
    /// (`.cancelled`); the dialog is withdrawn once what it waits for has happened.
    var isStatus = false
    /// The pinentry's own timeout in seconds (SETTIMEOUT), a second line of defence behind the
    /// coordinator's timer; 0 for none.
    var timeoutSeconds: Int
}

/// How a pinentry dialog ended.
enum PinentryOutcome: Sendable, Equatable {
    /// The user entered this text (at most `PinentryProcess.maximumData` bytes).
    case entered([UInt8])
    /// The user cancelled (ERR 83886179 and the other cancel codes), or the pinentry went away
    /// during GETPIN (its terminal or window closed).
    case cancelled
    /// The pinentry's own timeout passed (ERR 83886142).
    case timedOut
    /// `PinentryControl.withdraw` was called; the pinentry was killed.
    case withdrawn

    /// True when the program may still be in the middle of the dialog and must be killed.
    var leavesProgramRunning: Bool { self == .withdrawn }

    /// A gpg-error code from an `ERR` line, by its error number (the low 16 bits; the high bits
    /// name the source, 5 for pinentry): cancelled, timed out, or nil for a failure.
    static func forError(_ code: UInt32) -> PinentryOutcome? {
        switch code & 0xffff {
        case 99, 198, 114: return .cancelled  // GPG_ERR_CANCELED, GPG_ERR_FULLY_CANCELED, GPG_ERR_NOT_CONFIRMED
        case 62: return .timedOut  // GPG_ERR_TIMEOUT
        default: return nil
        }
    }
}

/// Why a dialog was withdrawn.
enum PinentryWithdrawal: Sendable, Equatable {
    /// The prompt's time ran out.
    case timedOut
    /// The call that asked was cancelled.
    case cancelled
}

/// Withdraws a running dialog from another thread: the conversation wakes (an eventfd it polls
/// with the pinentry's output), kills the pinentry and reaps it.
final class PinentryControl: Sendable {
    private let wakeup: EventFD
    private let state = Mutex<(withdrawal: PinentryWithdrawal?, pid: Int32?)>((nil, nil))

    init() throws(RainError) { wakeup = try EventFD() }

    /// The descriptor the conversation polls.
    var descriptor: Int32 { wakeup.descriptor }

    /// True once `withdraw` was called.
    var isWithdrawn: Bool { withdrawal != nil }

    /// Why the dialog was withdrawn (the first reason given), or nil.
    var withdrawal: PinentryWithdrawal? { state.withLock { $0.withdrawal } }

    /// The running pinentry's pid, while it runs (tests check it is gone afterwards).
    var processID: Int32? {
        get { state.withLock { $0.pid } }
        set { state.withLock { $0.pid = newValue } }
    }

    /// Ends the dialog: the pinentry is killed; `run` returns `.withdrawn`. The first reason is
    /// kept; later calls only wake the conversation again.
    func withdraw(_ reason: PinentryWithdrawal) {
        state.withLock { if $0.withdrawal == nil { $0.withdrawal = reason } }
        wakeup.signal()
    }
}
