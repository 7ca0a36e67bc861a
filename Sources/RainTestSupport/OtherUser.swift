import Foundation
import RainCore

/// A second uid on this machine, for tests written the way an attacker on the same machine would
/// act: it owns files, squats paths and runs its own programs through `setpriv`.
///
/// The uid needs no passwd entry: `setpriv` switches to a bare numeric uid and gid, and the test
/// (running as root, as CI does) chowns what that uid must own. `OtherUser.unavailableReason` says
/// why such tests cannot run (not root, no `setpriv`); a test that needs a second uid records that
/// reason as an issue rather than passing silently.
public enum OtherUser {
    /// The attacker's uid and gid: the first of 42424… with no passwd entry.
    public static let uid: UInt32 = {
        var candidate: UInt32 = 42424
        while getpwuid(candidate) != nil { candidate += 1 }
        return candidate
    }()

    /// Where `setpriv` lives (util-linux).
    public static let setprivPath = "/usr/bin/setpriv"

    /// Nil when a second uid can be used here; otherwise what is missing.
    public static var unavailableReason: String? {
        if getuid() != 0 { return "switching to a second uid needs root (uid \(getuid()))" }
        if access(setprivPath, X_OK) != 0 { return "\(setprivPath) is missing (Debian package util-linux)" }
        return nil
    }

    /// `argv` run as the other uid: `setpriv --reuid U --regid U --clear-groups -- argv…`.
    public static func command(_ argv: [String]) -> (executable: URL, arguments: [String]) {
        let prefix = ["--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups", "--"]
        return (URL(fileURLWithPath: setprivPath), prefix + argv)
    }

    /// Creates `path` (a directory, `mode`) owned by the other uid, as if that user had made it.
    /// - Throws: `HarnessError` naming the call that failed.
    public static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws {
        guard mkdir(path, mode) == 0 || errno == EEXIST else { throw HarnessError("mkdir \(path): errno \(errno)") }
        try chown(path)
        guard chmod(path, mode) == 0 else { throw HarnessError("chmod \(path): errno \(errno)") }
    }

    /// Gives `path` (without following a symlink) to the other uid.
    /// - Throws: `HarnessError` when `lchown` fails.
    public static func chown(_ path: String) throws {
        guard lchown(path, uid, uid) == 0 else { throw HarnessError("lchown \(path): errno \(errno)") }
    }

    /// Runs `argv` as the other uid to completion and returns its status and output.
    /// - Throws: `HarnessError` when it cannot start.
    public static func run(_ argv: [String], environment: [String: String] = [:]) throws -> CLIResult {
        let (executable, arguments) = command(argv)
        do {
            return try TestProcess.runBlocking(executable.path, arguments, environment: environment)
        } catch {
            throw HarnessError("cannot run \(argv.first ?? "") as uid \(uid): \(error)")
        }
    }
}
