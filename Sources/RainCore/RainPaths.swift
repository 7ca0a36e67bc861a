import FoundationEssentials
import Glibc

/// Paths shared by the daemon, the client library and the CLI.
public enum RainPaths {
    /// The longest path a Unix socket address holds (`sun_path` is 108 bytes with its NUL).
    public static let maximumSocketPathLength = 107

    /// The default daemon socket, in a directory only its user can write, so no other user can
    /// squat the path:
    /// - `$XDG_RUNTIME_DIR/rainwallet/rainwalletd.sock`;
    /// - without `XDG_RUNTIME_DIR`, in the state directory: `$XDG_STATE_HOME/rainwallet/rainwalletd.sock`
    ///   or `~/.local/state/rainwallet/rainwalletd.sock`;
    /// - only when that path is too long for a socket address, `/tmp/rainwallet-$UID/rainwalletd.sock`
    ///   (`$TMPDIR` instead of `/tmp` when set; the daemon creates that directory 0700 and refuses
    ///   one it finds that is not its own, as ssh-agent and tmux do).
    public static func defaultSocket(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        func nonEmpty(_ key: String) -> String? { environment[key].flatMap { $0.isEmpty ? nil : $0 } }
        if let runtime = nonEmpty("XDG_RUNTIME_DIR") {
            return "\(runtime)/rainwallet/rainwalletd.sock"
        }
        let inState = "\(defaultStateDirectory(environment: environment))/rainwalletd.sock"
        if inState.utf8.count <= maximumSocketPathLength { return inState }
        return fallbackSocket(environment: environment)
    }

    /// The socket used when the default one would be too long for a socket address:
    /// `${TMPDIR:-/tmp}/rainwallet-$UID/rainwalletd.sock` (`TMPDIR` as ssh-agent reads it).
    public static func fallbackSocket(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let tmp = environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        return "\(tmp)/rainwallet-\(getuid())/rainwalletd.sock"
    }

    /// The default state directory: `$XDG_STATE_HOME/rainwallet` or `~/.local/state/rainwallet`.
    public static func defaultStateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        func nonEmpty(_ key: String) -> String? { environment[key].flatMap { $0.isEmpty ? nil : $0 } }
        if let state = nonEmpty("XDG_STATE_HOME") { return "\(state)/rainwallet" }
        let home = nonEmpty("HOME") ?? FileManager.default.homeDirectoryForCurrentUser.path
        return "\(home)/.local/state/rainwallet"
    }

    /// How the help texts describe the default socket.
    public static let defaultSocketDescription =
        "$XDG_RUNTIME_DIR/rainwallet/rainwalletd.sock; without XDG_RUNTIME_DIR, rainwalletd.sock in the state "
        + "directory ($XDG_STATE_HOME/rainwallet or ~/.local/state/rainwallet), or ${TMPDIR:-/tmp}/rainwallet-$UID/rainwalletd.sock "
        + "when that is too long"

    /// `RAINWALLET_DAEMON_UID`: the uid a client accepts for its daemon when it is not its own.
    public static let daemonUIDVariable = "RAINWALLET_DAEMON_UID"

    /// Parses a uid given by a person (`--daemon-uid`, `RAINWALLET_DAEMON_UID`): decimal digits.
    /// - Throws: RAIN_102 naming `source`.
    public static func parseUID(_ text: String, source: String) throws(RainError) -> UInt32 {
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let uid = UInt32(trimmed) else {
            throw RainError.invalid("\(source): \"\(text)\" is not a uid (a decimal number like 1000)", field: source)
        }
        return uid
    }
}
