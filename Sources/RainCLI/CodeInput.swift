import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainSystem

/// Where a one-time code comes from: the terminal or stdin, so it never sits in the command line
/// that every user of the machine can read (`ps`, `/proc/PID/cmdline`). A code given as an argument
/// still works (scripts written before), with a warning, and is overwritten in the process's
/// command line at once.
///
/// On a terminal the code echoes as it is typed, like the prompt of `rainwallet login`: it is good
/// for one attempt of one pending challenge of this device for a few minutes, the user already read
/// it in an email or a text, and seeing the digits lets them catch a typo before it costs one of
/// the three attempts. What must be guarded against is other users reading it, which a terminal
/// does not allow.
enum CodeInput {
    /// The text of the warning printed when a code is given as an argument.
    static func argumentWarning(_ command: String) -> String {
        """
        warning: a code on the command line can be read by every user of this machine (ps, \
        /proc/PID/cmdline); run `rainwallet \(command)` without it to be asked for it, or give it \
        on stdin: printf '%s\\n' CODE | rainwallet \(command)
        """
    }

    /// The code of `rainwallet COMMAND [CODE]`: the argument when given (with a warning on stderr,
    /// and hidden from the process's command line), else one line typed at a prompt on a terminal,
    /// else one line of stdin.
    /// - Parameters:
    ///   - argument: the CODE argument, if given.
    ///   - command: the command's words, for messages (`code confirm`).
    ///   - kind: what the code is, for the prompt (`6-digit code`).
    /// - Throws: a usage error (exit 64) when no code was typed or stdin is empty.
    static func read(argument: String?, command: String, kind: String = "6-digit code") throws -> String {
        if let argument {
            ProcessArguments.hide(argument)
            StandardErrorSink().write(argumentWarning(command))
            return argument
        }
        let isTerminal = isatty(0) == 1
        guard let line = typedLine(prompt: "Enter the \(kind): ")?.trimmingWhitespace(), !line.isEmpty else {
            if isTerminal {
                throw UsageError("no code was entered", help: "")
            }
            throw UsageError(
                "no code on stdin: run `rainwallet \(command)` on a terminal to be asked for it, or give it on stdin: "
                    + "printf '%s\\n' CODE | rainwallet \(command)", help: "")
        }
        return line
    }

    /// One line from stdin, after `prompt` on stderr when stdin is a terminal; nil at end of input.
    static func typedLine(prompt: String) -> String? {
        if isatty(0) == 1 { StandardError.write(prompt) }
        return readLine(strippingNewline: true)
    }
}
