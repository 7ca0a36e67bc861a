import Foundation
import RainCore

/// A passphrase from the terminal (not echoed) or one line of stdin: never the command line, which
/// every user of the machine can read.
package enum PassphraseInput {
    /// Reads the passphrase; on a terminal, asks twice when `confirm` is given.
    /// - Throws: RAIN_102 (field `passphrase`) when none was given or the two differ.
    package static func read(prompt: String, confirm: String?) throws(RainError) -> [UInt8] {
        let isTerminal = isatty(0) == 1
        guard let first = line(prompt: prompt, isTerminal: isTerminal), !first.isEmpty else {
            throw RainError.invalid(
                "no passphrase: type it on a terminal or give it as one line of stdin", field: "passphrase")
        }
        if isTerminal, let confirm {
            guard line(prompt: confirm, isTerminal: true) == first else {
                throw RainError.invalid("the two passphrases differ", field: "passphrase")
            }
        }
        return Array(first.utf8)
    }

    static func line(prompt: String, isTerminal: Bool) -> String? {
        guard isTerminal else { return readLine(strippingNewline: true) }
        FileHandle.standardError.write(Data(prompt.utf8))
        var saved = termios()
        let hasSaved = tcgetattr(0, &saved) == 0
        if hasSaved {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(0, TCSAFLUSH, &quiet)
        }
        defer {
            if hasSaved { _ = tcsetattr(0, TCSAFLUSH, &saved) }
            FileHandle.standardError.write(Data("\n".utf8))
        }
        return readLine(strippingNewline: true)
    }
}
