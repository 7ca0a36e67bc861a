import FoundationEssentials
import Glibc
import RainCore

/// Where the daemon keeps its socket, state and config (docs/operations.md "Files and paths").
public struct DaemonPaths: Sendable, Equatable {
    public var socket: String
    public var stateDirectory: String
    public var config: String
    /// True when the config path was given explicitly (then it must exist).
    public var isConfigExplicit: Bool
    /// True when the socket path is a default one (`RainPaths.defaultSocket`): its directory is the
    /// daemon's own, whose mode it may set. A directory given with `--socket` is never changed.
    public var isSocketDefault: Bool

    /// The defaults from the environment, overridden by flags.
    ///
    /// Socket: `RainPaths.defaultSocket` (`$XDG_RUNTIME_DIR/rainwallet/rainwalletd.sock`, else in the
    /// state directory, else `${TMPDIR:-/tmp}/rainwallet-$UID/rainwalletd.sock`).
    /// State: `$XDG_STATE_HOME/rainwallet` or `~/.local/state/rainwallet`.
    /// Config: `$XDG_CONFIG_HOME/rainwallet/config.json` or `~/.config/rainwallet/config.json`.
    public static func resolve(
        environment: [String: String] = ProcessInfo.processInfo.environment, socket: String? = nil,
        stateDirectory: String? = nil, config: String? = nil
    ) -> DaemonPaths {
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
        func nonEmpty(_ key: String) -> String? { environment[key].flatMap { $0.isEmpty ? nil : $0 } }
        return DaemonPaths(
            socket: socket ?? RainPaths.defaultSocket(environment: environment),
            stateDirectory: stateDirectory ?? RainPaths.defaultStateDirectory(environment: environment),
            config: config
                ?? (nonEmpty("XDG_CONFIG_HOME").map { "\($0)/rainwallet/config.json" } ?? "\(home)/.config/rainwallet/config.json"),
            isConfigExplicit: config != nil, isSocketDefault: socket == nil)
    }
}
