import Foundation
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

// The daemon's config and policy as a harness writes them: relaxed send limits, the file key
// provider, other uids allowed, and the fresh directory they go in.
extension DaemonHarness {
    /// The code send limits a harness daemon runs with.
    public enum SendLimits: Sendable {
        /// No cooldown and a million sends per window, written into the config's
        /// `authority.sendLimits` unless it sets them itself: tests log in again and again.
        case relaxed
        /// The daemon's defaults (README "Sessions: refresh, expiry, one device at a time"), for tests of the limits themselves.
        case defaults
    }

    /// `authority.sendLimits` of `SendLimits.relaxed`.
    public static let relaxedSendLimits: [String: Int] = [
        "contactCooldownSeconds": 0, "contactMaxSends": 1_000_000, "accountMaxSends": 1_000_000,
        "contactAllAppsMaxSends": 1_000_000, "sourceMaxSends": 1_000_000,
    ]

    /// `config` with relaxed send limits merged in (a new config when there is none). A config
    /// that is not a JSON object, whose `authority` is not an object, or that sets
    /// `authority.sendLimits` itself is left as it is.
    static func relaxingSendLimits(in config: String?) -> String? {
        settingDefault(relaxedSendLimits, at: "authority", "sendLimits", in: config)
    }

    /// `config` with `storage.provider` set to `file` unless it names a provider itself, so a
    /// harness daemon keeps its keys in its own state directory whatever this machine offers (a
    /// TPM, a keyring on the session bus): `auto` would pick those. Tests of the other providers
    /// name them. A config that is not a JSON object is left as it is.
    static func pinningFileProvider(in config: String?) -> String? {
        settingDefault("file", at: "storage", "provider", in: config)
    }

    /// `config` (JSON; a new object when nil) with `section.key` set to `value`, creating the
    /// section when it is missing. A config that is not a JSON object, whose `section` is not an
    /// object, or that sets `section.key` itself is left as it is.
    private static func settingDefault(_ value: Any, at section: String, _ key: String, in config: String?) -> String? {
        var root: [String: Any] = [:]
        if let config {
            guard let parsed = try? JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any] else {
                return config
            }
            root = parsed
        }
        var object: [String: Any] = [:]
        if let existing = root[section] {
            guard let existing = existing as? [String: Any], existing[key] == nil else { return config }
            object = existing
        }
        object[key] = value
        root[section] = object
        guard let data = try? JSONSerialization.data(withJSONObject: root, options: [.sortedKeys]) else { return config }
        return String(decoding: data, as: UTF8.self)
    }

    /// True when `config` (JSON) allows uids besides the daemon's own, at the top or in a profile.
    static func allowsOtherUIDs(_ config: String) -> Bool {
        guard let root = try? JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any] else { return false }
        func allows(_ object: [String: Any]) -> Bool { !((object["allowedUIDs"] as? [Any]) ?? []).isEmpty }
        let profiles = (root["profiles"] as? [String: Any])?.values.compactMap { $0 as? [String: Any] } ?? []
        return allows(root) || profiles.contains(where: allows)
    }

    /// Creates the directory (and writes the config) without starting the daemon: for tests that
    /// set things up first, or expect the daemon to fail. Call `launch()` / `start()` next.
    /// - Parameters:
    ///   - sendLimits: `.relaxed` (the default) merges relaxed send limits into the config.
    ///   - environment: variables to set, or with nil to remove, for the daemon and the CLI.
    ///   - access: the policy the daemon runs with (`--policy DIR/policy.json`).
    public static func prepare(
        config: String? = nil, extraArguments: [String] = [], sendLimits: SendLimits = .relaxed,
        environment: [String: String?] = [:], access: HarnessAccess = .testRunnerApproved
    ) throws -> DaemonHarness {
        let config = pinningFileProvider(in: sendLimits == .relaxed ? relaxingSendLimits(in: config) : config)
        let bin = try binaryDirectory()
        // Writing to a CLI's stdin after it exited must fail with EPIPE, not kill the test runner.
        signal(SIGPIPE, SIG_IGN)
        var template = Array("/tmp/rwt-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buf in buf.baseAddress.flatMap { mkdtemp($0) } }
        guard let made else { throw HarnessError("mkdtemp failed: \(String(cString: strerror(errno)))") }
        let dir = String(cString: made)
        // The daemon never changes the mode of a --socket directory it did not create:
        // when other uids are allowed, make this one traversable (0711) as a user would.
        if let config, allowsOtherUIDs(config) {
            guard chmod(dir, 0o711) == 0 else { throw HarnessError("chmod \(dir): \(String(cString: strerror(errno)))") }
        }
        var configPath: String?
        if let config {
            let path = "\(dir)/config.json"
            // 0600 whatever the umask: the daemon refuses a config that others can write.
            guard
                FileManager.default.createFile(
                    atPath: path, contents: Data(config.utf8), attributes: [.posixPermissions: 0o600])
            else {
                try? FileManager.default.removeItem(atPath: dir)
                throw HarnessError("cannot write \(path)")
            }
            configPath = path
        }
        do {
            try writeAccessFiles(access, config: config, directory: dir, binaryDirectory: bin)
        } catch {
            try? FileManager.default.removeItem(atPath: dir)
            throw error
        }
        return DaemonHarness(
            directory: dir, configPath: configPath, extraArguments: extraArguments, environment: environment,
            binaryDirectory: bin)
    }
}
