import FoundationEssentials

/// How `rainwalletd` was installed where this program runs, as far as a client can tell: what to
/// run to start the daemon when it does not answer (the RAIN_101 of `UnixSocket.connect`).
public enum DaemonInstallation: Sendable, Equatable {
    /// This program was built in a checkout of RainWallet: `scripts/run` there builds and runs the
    /// daemon.
    case checkout(root: String)
    /// The package is installed (`/usr/bin/rainwalletd`, with its systemd user units).
    case package
    /// Neither: the daemon's own name is all there is to say.
    case unknown

    /// This program's installation, found once.
    public static let current = detect(
        executable: try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"),
        exists: { FileManager.default.fileExists(atPath: $0) })

    /// A checkout when `executable` lies inside one (an ancestor directory holds `Package.swift`,
    /// `scripts/run` and the daemon's sources): a developer's build runs the daemon of its own
    /// checkout. Else the package when its daemon is installed. Else unknown.
    public static func detect(executable: String?, exists: (String) -> Bool) -> DaemonInstallation {
        if let executable, executable.hasPrefix("/") {
            var directory = URL(fileURLWithPath: executable).deletingLastPathComponent().path
            while directory.count > 1 {
                if ["Package.swift", "scripts/run", "Sources/rainwalletd"].allSatisfy({ exists("\(directory)/\($0)") }) {
                    return .checkout(root: directory)
                }
                directory = URL(fileURLWithPath: directory).deletingLastPathComponent().path
            }
        }
        return exists(packagedDaemonPath) ? .package : .unknown
    }

    /// Where the package installs the daemon.
    public static let packagedDaemonPath = "/usr/bin/rainwalletd"

    /// The command that starts the daemon.
    public var startCommand: String {
        switch self {
        case .checkout: "scripts/run"
        case .package: "systemctl --user start rainwalletd"
        case .unknown: "rainwalletd"
        }
    }

    /// How to start the daemon, as the end of a sentence.
    public var startAdvice: String {
        switch self {
        case .checkout(let root): "start it with \(startCommand) in \(root)"
        case .package: "start it with: \(startCommand)"
        case .unknown: "start it with \(startCommand) (or systemctl --user start rainwalletd where the package is installed)"
        }
    }
}
