import Foundation
import RainCore
import Testing

@testable import RainClientTransport

/// What a client tells a user to run when no daemon answers: `scripts/run` for a program built in a
/// checkout, the systemd user service where the package is installed, the daemon's name otherwise.
@Suite struct DaemonInstallationTests {
    /// A checkout at /home/dev/RainWallet and, with `isPackaged`, the package's daemon.
    static func files(isPackaged: Bool) -> Set<String> {
        var files: Set<String> = [
            "/home/dev/RainWallet/Package.swift", "/home/dev/RainWallet/scripts/run",
            "/home/dev/RainWallet/Sources/rainwalletd",
        ]
        if isPackaged { files.insert(DaemonInstallation.packagedDaemonPath) }
        return files
    }

    @Test(
        "the installation is found from where the program runs and what is installed",
        arguments: [
            ("/home/dev/RainWallet/.build/release/rainwallet", false, DaemonInstallation.checkout(root: "/home/dev/RainWallet")),
            ("/home/dev/RainWallet/.build/x86_64-unknown-linux-gnu/debug/my-app", true, .checkout(root: "/home/dev/RainWallet")),
            ("/usr/bin/rainwallet", true, .package),
            ("/home/dev/MyApp/.build/debug/my-app", true, .package),
            ("/home/dev/MyApp/.build/debug/my-app", false, .unknown),
            ("/usr/bin/rainwallet", false, .unknown),
        ])
    func detection(executable: String, isPackaged: Bool, expected: DaemonInstallation) {
        let files = Self.files(isPackaged: isPackaged)
        #expect(DaemonInstallation.detect(executable: executable, exists: files.contains) == expected)
    }

    @Test("a directory with only part of a checkout, or no executable path, is no checkout")
    func partialCheckoutIsNoCheckout() {
        var files = Self.files(isPackaged: false)
        files.remove("/home/dev/RainWallet/scripts/run")
        #expect(DaemonInstallation.detect(executable: "/home/dev/RainWallet/.build/debug/x", exists: files.contains) == .unknown)
        #expect(DaemonInstallation.detect(executable: nil, exists: Self.files(isPackaged: true).contains) == .package)
        #expect(DaemonInstallation.detect(executable: "relative/x", exists: Self.files(isPackaged: false).contains) == .unknown)
    }

    @Test(
        "each installation names its own start command",
        arguments: [
            (DaemonInstallation.checkout(root: "/home/dev/RainWallet"), "scripts/run"),
            (.package, "systemctl --user start rainwalletd"),
            (.unknown, "rainwalletd"),
        ])
    func startCommand(installation: DaemonInstallation, command: String) {
        #expect(installation.startCommand == command)
        #expect(installation.startAdvice.contains(command))
    }

    @Test("a socket where nothing listens is RAIN_101 daemon_not_running, with this program's start advice")
    func nothingListening() throws {
        let directory = "/tmp/rwdi-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            _ = try UnixSocket.connect(path: "\(directory)/d.sock", daemonUID: geteuid())
            Issue.record("connected to nothing")
        } catch {
            #expect(error.code == .notInitialized)
            #expect(error.details.reason == UnixSocket.daemonNotRunningReason)
            #expect(error.message.contains(DaemonInstallation.current.startAdvice))
        }
    }
}
