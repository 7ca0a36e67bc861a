import Foundation

/// Paths shared by the daemon, the client library and the CLI.
public enum RainPaths {
    /// The default daemon socket: `$XDG_RUNTIME_DIR/rainwallet/rainwalletd.sock`, or
    /// `/tmp/rainwallet-$UID/rainwalletd.sock` when that variable is unset.
    public static func defaultSocket(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return "\(runtime)/rainwallet/rainwalletd.sock"
        }
        return "/tmp/rainwallet-\(getuid())/rainwalletd.sock"
    }
}
