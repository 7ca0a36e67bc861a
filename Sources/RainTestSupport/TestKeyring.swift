import Foundation
import Glibc
import RainCore
import Synchronization

/// A private D-Bus session bus with a real `gnome-keyring-daemon` (secrets component) on it, its
/// login keyring unlocked with a test password: the Secret Service of one test.
///
/// Everything lives in a fresh directory under /tmp (the bus socket, the keyring files, the
/// keyring's runtime directory), so nothing of the machine's own session is read or touched. The
/// bus runs under a shell that kills it when its stdin closes: when `stop()` closes it, or when
/// the test process dies however it dies; the keyring daemon exits with its bus.
///
/// libsecret uses GDBus's one shared session-bus connection per process, made from
/// `DBUS_SESSION_BUS_ADDRESS` when first used: tests of the provider share one keyring per test
/// process, `shared()`, which sets that variable before anything uses libsecret, in a serialized
/// suite (a test that locks or stops the keyring leaves it unlocked and running).
public final class TestKeyring: @unchecked Sendable {
    // @unchecked Sendable: the mutable state (the keyring process) is only changed by `lock`,
    // `restartUnlocked` and `stop`, which a test calls from one task; the rest is immutable.

    private static let sharedKeyring = Mutex<Result<TestKeyring, HarnessError>?>(nil)

    /// The keyring of this test process, started on first use, with `DBUS_SESSION_BUS_ADDRESS`
    /// set to its bus. It stops when the process exits (its bus dies with the process).
    public static func shared() throws -> TestKeyring {
        try sharedKeyring.withLock { slot in
            if slot == nil {
                do {
                    let keyring = try TestKeyring()
                    setenv("DBUS_SESSION_BUS_ADDRESS", keyring.address, 1)
                    slot = .success(keyring)
                    atexit {
                        if case .success(let keyring) = TestKeyring.sharedKeyring.withLock({ $0 }) {
                            try? FileManager.default.removeItem(atPath: keyring.directory)
                        }
                    }
                } catch let error as HarnessError {
                    slot = .failure(error)
                } catch {
                    slot = .failure(HarnessError("\(error)"))
                }
            }
            guard let slot else { throw HarnessError("no shared keyring") }
            return try slot.get()
        }
    }

    /// The test password of the login keyring.
    public static let password = "rainwallet-test-keyring"

    /// The private bus's address (`unix:path=…`).
    public let address: String
    /// The directory holding the bus socket and the keyring's files.
    public let directory: String
    private let bus: TestProcess
    private var keyring: TestProcess?

    /// Starts the bus and the keyring daemon, and waits until the Secret Service is on the bus.
    /// - Throws: `HarnessError` when `dbus-daemon`, `gnome-keyring-daemon` or `gdbus` is missing
    ///   or does not start (scripts/lib/deps.sh installs them).
    public init() throws {
        directory = "/tmp/rainkr-\(UUID().uuidString.prefix(8).lowercased())"
        for sub in ["", "/home", "/data", "/config", "/cache", "/run"] {
            try FileManager.default.createDirectory(
                atPath: directory + sub, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        }
        let config = "\(directory)/bus.conf"
        try Self.busConfiguration(socket: "\(directory)/bus").write(toFile: config, atomically: true, encoding: .utf8)

        // The shell forwards the bus's address, then holds the bus until its stdin closes: the
        // write end is this process's alone (close-on-exec), so the bus ends with it.
        let addressFile = "\(directory)/bus.address"
        do {
            bus = try TestProcess(
                "/bin/sh",
                [
                    "-c",
                    "dbus-daemon --config-file=\"$1\" --nofork --print-address=1 </dev/null & bus=$!; "
                        + "read -r _; kill -KILL $bus", "sh", config,
                ], stdin: .pipe, stdout: .file(addressFile))
        } catch {
            throw HarnessError("cannot start dbus-daemon (install dbus): \(error)")
        }
        // The first line is the address, printed once the bus listens.
        var line = ""
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: addressFile, encoding: .utf8)) ?? ""
            if let end = text.firstIndex(of: "\n") {
                line = String(text[..<end])
                break
            }
            if !bus.isRunning { break }
            usleep(5_000)
        }
        address = line
        guard address.hasPrefix("unix:") else {
            stopBus()
            throw HarnessError("dbus-daemon did not start (is the dbus package installed?)")
        }
        do {
            try startKeyring()
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// The environment a provider on this bus is given.
    public var environment: [String: String] { ["DBUS_SESSION_BUS_ADDRESS": address] }

    /// Locks the default collection (`org.freedesktop.Secret.Service.Lock`), as a screen lock or
    /// the user does: the keyring daemon keeps running, its items become unreadable.
    public func lock() throws {
        try Self.gdbus([
            "call", "--address", address, "--dest", "org.freedesktop.secrets", "--object-path",
            "/org/freedesktop/secrets", "--method", "org.freedesktop.Secret.Service.Lock",
            "['/org/freedesktop/secrets/aliases/default']",
        ])
    }

    /// Unlocks the keyring the way a login does: the keyring daemon is started again with the
    /// password (gnome-keyring has no unlock without a prompt on D-Bus). The items persist on disk.
    public func restartUnlocked() throws {
        stopKeyring()
        try waitUntilSecretServiceLeaves()
        try startKeyring()
    }

    /// Stops the keyring daemon (SIGSTOP) without it leaving the bus: calls to it get no answer.
    public func freeze() {
        keyring?.signal(SIGSTOP)
    }

    /// Resumes a frozen keyring daemon (SIGCONT).
    public func thaw() {
        keyring?.signal(SIGCONT)
    }

    /// Stops the keyring daemon only: the bus stays, with nobody serving the Secret Service.
    public func stopKeyringOnly() throws {
        stopKeyring()
        try waitUntilSecretServiceLeaves()
    }

    /// Stores an item as another program would (`secret-tool store`, libsecret-tools), in the
    /// default collection: for tests of what the provider finds there.
    public func storeItem(label: String = "test item", attributes: [String: String], secret: String) throws {
        let r: CLIResult
        do {
            r = try TestProcess.runBlocking(
                "/usr/bin/secret-tool",
                ["store", "--label", label] + attributes.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] },
                environment: ["PATH": "/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS": address], input: secret,
                timeout: .seconds(30))
        } catch {
            throw HarnessError("cannot run secret-tool (install libsecret-tools): \(error)")
        }
        guard r.status == 0 else { throw HarnessError("secret-tool store failed (\(r.status)): \(r.stderr)") }
    }

    /// The secret of the item with exactly these attributes, read as another program of the user
    /// would (`secret-tool lookup`), or nil when there is none: for tests that copy an item.
    public func lookupItem(attributes: [String: String]) throws -> String? {
        let r: CLIResult
        do {
            r = try TestProcess.runBlocking(
                "/usr/bin/secret-tool", ["lookup"] + attributes.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] },
                environment: ["PATH": "/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS": address], timeout: .seconds(30))
        } catch {
            throw HarnessError("cannot run secret-tool (install libsecret-tools): \(error)")
        }
        // secret-tool exits 1 when nothing matches.
        guard r.status == 0 else { return nil }
        return r.stdout
    }

    /// Stops both daemons and removes the directory. Safe to call twice.
    public func stop() {
        stopKeyring()
        stopBus()
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: -

    private func startKeyring() throws {
        do {
            // --unlock reads the password from stdin until its end.
            keyring = try TestProcess(
                "/usr/bin/gnome-keyring-daemon", ["--foreground", "--components=secrets", "--unlock"],
                environment: [
                    "PATH": "/usr/bin:/bin", "HOME": "\(directory)/home", "XDG_DATA_HOME": "\(directory)/data",
                    "XDG_CONFIG_HOME": "\(directory)/config", "XDG_CACHE_HOME": "\(directory)/cache",
                    "XDG_RUNTIME_DIR": "\(directory)/run", "DBUS_SESSION_BUS_ADDRESS": address,
                ], stdin: .text(Self.password))
        } catch {
            throw HarnessError("cannot start gnome-keyring-daemon (install gnome-keyring): \(error)")
        }
        do {
            try Self.gdbus(["wait", "--address", address, "--timeout", "2", "org.freedesktop.secrets"])
        } catch {
            throw HarnessError("gnome-keyring-daemon did not reach the bus: \(error)")
        }
    }

    private func stopKeyring() {
        guard let process = keyring else { return }
        keyring = nil
        // SIGKILL: gnome-keyring writes each change to its keyring file at once, so nothing is lost.
        process.signal(SIGKILL)
        _ = process.waitForExitBlocking(timeout: .seconds(5))
    }

    private func stopBus() {
        try? bus.input?.close()
        _ = bus.waitForExitBlocking(timeout: .seconds(5))
    }

    /// Waits (at most 2 s) until the bus has seen the old keyring daemon go, so that the next one
    /// can own org.freedesktop.secrets.
    private func waitUntilSecretServiceLeaves() throws {
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            let reply = try Self.gdbus([
                "call", "--address", address, "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                "--method", "org.freedesktop.DBus.NameHasOwner", "org.freedesktop.secrets",
            ])
            if reply.contains("false") { return }
        }
        throw HarnessError("the old gnome-keyring-daemon still owns org.freedesktop.secrets after 2 s")
    }

    /// Runs `gdbus` (libglib2.0-bin) and returns its output.
    @discardableResult
    private static func gdbus(_ arguments: [String]) throws -> String {
        let r: CLIResult
        do {
            r = try TestProcess.runBlocking("/usr/bin/gdbus", arguments, timeout: .seconds(30))
        } catch {
            throw HarnessError("cannot run gdbus (install libglib2.0-bin): \(error)")
        }
        let text = r.stdout + r.stderr
        guard r.status == 0 else { throw HarnessError("gdbus \(arguments.prefix(1).joined()) failed: \(text)") }
        return text
    }

    /// A session bus that anyone of this uid may use, with no service activation (nothing is
    /// started behind the test's back).
    private static func busConfiguration(socket: String) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:path=\(socket)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """
    }
}
