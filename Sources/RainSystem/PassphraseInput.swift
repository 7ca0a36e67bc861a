import FoundationEssentials
import Glibc
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

    /// The longest passphrase file read: a passphrase is one line, this only bounds a mistake.
    static let maximumFileByteCount = 4096

    /// Reads the passphrase from the first line of `path`, for servers with no one at a terminal:
    /// a regular file of this user's that neither group nor others may access (mode 0600), never
    /// followed through a symbolic link. The line ends at the first newline (a trailing carriage
    /// return is dropped too).
    /// - Throws: RAIN_102 (field `--passphrase-file`) for a missing, linked, another user's or
    ///   group- or other-accessible file, or an empty first line; RAIN_502 when it cannot be read.
    package static func read(file path: String) throws(RainError) -> [UInt8] {
        let fd: Int32
        do throws(RainError) {
            fd = try Syscall.openOwnFile(
                path, .readOnly, options: [.nonBlocking, .noControllingTerminal], mode: 0, isPrivate: true,
                name: "the passphrase file", field: "--passphrase-file", fix: "chmod 600 \(path) as its owner")
        } catch {
            if error.errno == ENOENT {
                throw RainError.invalid("the passphrase file \(path) does not exist", field: "--passphrase-file")
            }
            throw error
        }
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        let bytes = try AtomicFile.readAll(fd: fd, path: path, limit: maximumFileByteCount)
        var line = Array(bytes.prefix { $0 != UInt8(ascii: "\n") })
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        guard !line.isEmpty else {
            throw RainError.invalid(
                "the passphrase file \(path) is empty: put the passphrase on its first line", field: "--passphrase-file")
        }
        return line
    }

    static func line(prompt: String, isTerminal: Bool) -> String? {
        guard isTerminal else { return readLine(strippingNewline: true) }
        StandardError.write(prompt)
        defer { StandardError.write("\n") }
        return withoutEcho { readLine(strippingNewline: true) }
    }

    /// One line typed on the terminal at fd 0, not echoed; the prompt is written on that terminal
    /// (stderr when it cannot be written), after echo is off, so nothing typed once the prompt
    /// shows is flushed away or echoed. Nil when fd 0 is not a terminal or at end of input.
    package static func hiddenTerminalLine(prompt: String) -> String? {
        guard isatty(0) == 1 else { return nil }
        defer { writeToTerminal("\n") }
        return withoutEcho {
            writeToTerminal(prompt)
            return readLine(strippingNewline: true)
        }
    }

    /// Runs `body` with the echo of the terminal at fd 0 off (what was typed before is flushed),
    /// then turns it back on.
    private static func withoutEcho<T>(_ body: () -> T) -> T {
        var saved = termios()
        let hasSaved = tcgetattr(0, &saved) == 0
        if hasSaved {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(0, TCSAFLUSH, &quiet)
        }
        defer { if hasSaved { _ = tcsetattr(0, TCSADRAIN, &saved) } }
        return body()
    }

    /// Writes on the terminal at fd 0: through fd 0 itself, else (opened read-only, as `< tty`
    /// does) through its device opened for writing, else on stderr.
    private static func writeToTerminal(_ text: String) {
        let bytes = Array(text.utf8)
        if bytes.withUnsafeBytes({ write(0, $0.baseAddress, $0.count) }) == bytes.count { return }
        if let name = ttyname(0) {
            let fd = open(name, O_WRONLY | O_NOCTTY | O_CLOEXEC)
            if fd >= 0 {
                defer { close(fd) }
                if bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count { return }
            }
        }
        StandardError.write(text)
    }
}
