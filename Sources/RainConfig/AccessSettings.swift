import FoundationEssentials
import Glibc
import RainAccess
import RainCore
import RainKeyStore
import RainSystem

/// `access` in the config: which pinentry asks the user, and which apps are approved in advance.
///
/// ```json
/// "access": {"pinentry": "/usr/bin/pinentry-gnome3",
///            "apps": {"myapp": [{"path": "/usr/bin/mywallet", "sha256": "…64 hex…"}]}}
/// ```
public struct AccessSettings: Sendable, Equatable {
    /// The apps allowed code their user can write (`PreApprovedApp.allowsWritableCode`), any profile.
    public var appsAllowingWritableCode: Set<String> {
        Set(apps.values.joined().filter(\.allowsWritableCode).map(\.path))
    }

    /// The pinentry program (absolute path); nil: the first of pinentry-gnome3, pinentry-qt,
    /// pinentry-curses, pinentry-tty found in /usr/bin.
    public var pinentry: String?
    /// Apps approved in advance, by profile: a path, and optionally the SHA-256 of its content.
    public var apps: [String: [PreApprovedApp]] = [:]

    public init() {}
}

/// An app approved in advance (`access.apps` in the config or the machine's policy).
public struct PreApprovedApp: Sendable, Equatable {
    /// The executable's absolute path (for an interpreter: `"/usr/bin/python3 /opt/tool.py"`).
    public var path: String
    /// The SHA-256 of its content (hex); nil approves any content at that path.
    public var sha256: String?
    /// `allowWritableCode`: the app may run code its user can write (a JIT's anonymous executable
    /// memory, a memfd, a library the user owns), which makes any other caller unapprovable.
    public var allowsWritableCode = false

    public init(path: String, sha256: String? = nil, allowsWritableCode: Bool = false) {
        self.path = path
        self.sha256 = sha256
        self.allowsWritableCode = allowsWritableCode
    }

    /// As an approval.
    public var approval: AppApprovals.Approval {
        AppApprovals.Approval(appPath: path, contentHash: sha256, approvedAt: "", source: .policy)
    }
}

extension ConfigReader {
    func access(_ value: JSONValue, _ path: String) throws(RainError) -> AccessSettings {
        let dict = try object(value, path, allowed: ["pinentry", "apps"])
        var s = AccessSettings()
        if let v = dict["pinentry"] { s.pinentry = try program(v, join(path, "pinentry")) }
        if let v = dict["apps"] {
            let key = join(path, "apps")
            guard case .object(let profiles) = v else { throw fail(key, "must be an object of profile name to apps") }
            for (name, list) in profiles {
                s.apps[name] = try apps(list, join(key, name))
            }
        }
        return s
    }

    func program(_ value: JSONValue, _ path: String) throws(RainError) -> String {
        let text = try string(value, path)
        guard text.hasPrefix("/"), text.utf8.count <= 4096, !text.contains("\0") else {
            throw fail(path, "must be an absolute path to the program")
        }
        return text
    }

    func apps(_ value: JSONValue, _ path: String) throws(RainError) -> [PreApprovedApp] {
        guard case .array(let list) = value else { throw fail(path, "must be an array of {\"path\": …, \"sha256\": …}") }
        var out: [PreApprovedApp] = []
        for (i, item) in list.enumerated() {
            let itemPath = "\(path)[\(i)]"
            let dict = try object(item, itemPath, allowed: ["path", "sha256", "allowWritableCode"])
            guard let p = dict["path"] else { throw fail(join(itemPath, "path"), "is required: the app's absolute path") }
            var app = PreApprovedApp(path: try program(p, join(itemPath, "path")))
            if let h = dict["sha256"] {
                let hex = try string(h, join(itemPath, "sha256")).lowercased()
                guard hex.utf8.count == 64, hex.allSatisfy({ $0.isHexDigit }) else {
                    throw fail(join(itemPath, "sha256"), "must be 64 hex digits (sha256sum of the program)")
                }
                app.sha256 = hex
            }
            if let w = dict["allowWritableCode"] { app.allowsWritableCode = try bool(w, join(itemPath, "allowWritableCode")) }
            out.append(app)
        }
        return out
    }
}

/// The security settings of a config as `GuardedSettings`: what the user must
/// confirm before a change takes effect, or what `/etc/rainwallet/policy.json` fixes.
extension DaemonConfig {
    /// The guarded keys of this config, each with its canonical JSON value.
    public var guarded: GuardedSettings {
        var values: [String: String] = [:]
        values["allowedUIDs"] = Self.canonical(Self.json(allowedUIDs))
        values["codeSender"] = Self.canonical(Self.json(codeSender))
        values["storage.provider"] = Self.canonical(.string(storage.provider.configValue))
        values["storage.tcti"] = Self.canonical(.string(storage.tcti))
        values["remoteAuthority"] = Self.canonical(Self.json(remoteAuthority))
        for (name, p) in profiles {
            values["profiles.\(name).allowExport"] = Self.canonical(.bool(p.isExportAllowed))
            values["profiles.\(name).allowedUIDs"] = Self.canonical(Self.json(p.allowedUIDs))
        }
        if let pinentry = access.pinentry { values["access.pinentry"] = Self.canonical(.string(pinentry)) }
        for (name, apps) in access.apps {
            values["access.apps.\(name)"] = Self.canonical(
                .array(
                    apps.map { app in
                        var o: [String: JSONValue] = ["path": .string(app.path)]
                        if let h = app.sha256 { o["sha256"] = .string(h) }
                        if app.allowsWritableCode { o["allowWritableCode"] = .bool(true) }
                        return .object(o)
                    }))
        }
        return GuardedSettings(values)
    }

    /// This config with every guarded key taken from `settings` (a key `settings` lacks gets its
    /// default): the config the daemon runs with while a change waits for confirmation.
    /// - Throws: RAIN_102 when a value does not parse (a record from an incompatible version).
    public func applying(_ settings: GuardedSettings, source: String) throws(RainError) -> DaemonConfig {
        let reader = ConfigReader(source: source)
        var config = self
        let defaults = DaemonConfig()
        config.allowedUIDs = defaults.allowedUIDs
        config.codeSender = defaults.codeSender
        config.storage = defaults.storage
        config.access = defaults.access
        config.remoteAuthority = defaults.remoteAuthority
        for name in config.profiles.keys {
            config.profiles[name]?.isExportAllowed = false
            config.profiles[name]?.allowedUIDs = []
        }
        for (key, text) in settings.values.sorted(by: { $0.key < $1.key }) {
            let value = try Self.parse(text, key: key, reader: reader)
            let parts = key.split(separator: ".", maxSplits: 2).map(String.init)
            switch (parts.first ?? "", parts.count) {
            case ("allowedUIDs", 1): config.allowedUIDs = try reader.uids(value, key)
            case ("codeSender", 1): config.codeSender = try reader.codeSender(value, key)
            case ("remoteAuthority", 1): config.remoteAuthority = try reader.remoteAuthority(value, key)
            case ("storage", 2) where parts[1] == "provider":
                do {
                    config.storage.provider = try KeyProviderChoice(parsing: try reader.string(value, key))
                } catch {
                    throw reader.fail(key, "must name a provider")
                }
            case ("storage", 2) where parts[1] == "tcti": config.storage.tcti = try reader.string(value, key)
            case ("access", 2) where parts[1] == "pinentry": config.access.pinentry = try reader.program(value, key)
            case ("access", 3) where parts[1] == "apps": config.access.apps[parts[2]] = try reader.apps(value, key)
            case ("profiles", 3):
                // Profile names have no dots: profiles.NAME.SETTING.
                var p = config.settings(for: parts[1])
                switch parts[2] {
                case "allowExport": p.isExportAllowed = try reader.bool(value, key)
                case "allowedUIDs": p.allowedUIDs = try reader.uids(value, key)
                default: throw reader.fail(key, "is not a guarded setting")
                }
                config.profiles[parts[1]] = p
            default:
                throw reader.fail(key, "is not a guarded setting")
            }
        }
        return config
    }

    static func parse(_ text: String, key: String, reader: ConfigReader) throws(RainError) -> JSONValue {
        do {
            return try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        } catch {
            throw reader.fail(key, "is not valid JSON")
        }
    }

    static func canonical(_ value: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
    }

    static func json(_ uids: Set<UInt32>) -> JSONValue { .array(uids.sorted().map { .number(Double($0)) }) }

    static func json(_ sender: CodeSenderSetting) -> JSONValue {
        switch sender {
        case .outbox: return .object(["type": .string("outbox")])
        case .command(let arguments, let timeout):
            let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
            return .object([
                "type": .string("command"), "command": .array(arguments.map(JSONValue.string)),
                "timeoutSeconds": .number(seconds),
            ])
        case .providers(let configuration): return configuration.json
        }
    }
}

/// `/etc/rainwallet/policy.json`: the security settings of a managed machine (or a CI job), fixed by
/// root. Its keys are the config's guarded keys (`allowedUIDs`, `codeSender`, `storage`,
/// `profiles.NAME.allowExport|allowedUIDs`, `access`, `remoteAuthority`); what it sets, the user's
/// config and the daemon's flags cannot change, and needs no confirmation.
public enum SecurityPolicy {
    /// Where the policy is read from.
    public static let defaultPath = "/etc/rainwallet/policy.json"

    /// The policy's settings; empty when there is no file.
    /// - Throws: RAIN_102 when the file is not root's (owned by root, not writable by group or
    ///   others, no symbolic link) or does not parse, naming the key.
    public static func load(path: String = defaultPath) throws(RainError) -> GuardedSettings {
        guard
            let bytes = try OwnedPath.readTrustedFile(path, owners: [0], name: "policy file", field: "policy", limit: 1 << 20)
        else { return GuardedSettings() }
        return try parse(Data(bytes), source: path)
    }

    /// Parses policy JSON: the config's format, with only its guarded keys allowed.
    public static func parse(_ data: Data, source: String) throws(RainError) -> GuardedSettings {
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw RainError.invalid("\(source): not valid JSON: \(ErrorText.describe(error))", field: "policy")
        }
        let reader = ConfigReader(source: source)
        let dict = try reader.object(
            root, "", allowed: ["allowedUIDs", "codeSender", "storage", "profiles", "access", "remoteAuthority"])
        var values: [String: String] = [:]
        if let v = dict["remoteAuthority"] {
            values["remoteAuthority"] = DaemonConfig.canonical(
                DaemonConfig.json(try reader.remoteAuthority(v, "remoteAuthority")))
        }
        if let v = dict["allowedUIDs"] {
            values["allowedUIDs"] = DaemonConfig.canonical(DaemonConfig.json(try reader.uids(v, "allowedUIDs")))
        }
        if let v = dict["codeSender"] {
            values["codeSender"] = DaemonConfig.canonical(DaemonConfig.json(try reader.codeSender(v, "codeSender")))
        }
        if let v = dict["storage"] {
            let s = try reader.object(v, "storage", allowed: ["provider", "tcti"])
            let parsed = try reader.storage(v, "storage")
            if s["provider"] != nil { values["storage.provider"] = DaemonConfig.canonical(.string(parsed.provider.configValue)) }
            if s["tcti"] != nil { values["storage.tcti"] = DaemonConfig.canonical(.string(parsed.tcti)) }
        }
        if let v = dict["access"] {
            let a = try reader.access(v, "access")
            var config = DaemonConfig()
            config.access = a
            for (key, value) in config.guarded.values where key.hasPrefix("access.") { values[key] = value }
        }
        if let v = dict["profiles"] {
            guard case .object(let profiles) = v else { throw reader.fail("profiles", "must be an object") }
            for (name, settings) in profiles {
                let path = "profiles.\(name)"
                let p = try reader.object(settings, path, allowed: ["allowExport", "allowedUIDs"])
                if let e = p["allowExport"] {
                    values["\(path).allowExport"] = DaemonConfig.canonical(.bool(try reader.bool(e, "\(path).allowExport")))
                }
                if let u = p["allowedUIDs"] {
                    values["\(path).allowedUIDs"] = DaemonConfig.canonical(
                        DaemonConfig.json(try reader.uids(u, "\(path).allowedUIDs")))
                }
            }
        }
        return GuardedSettings(values)
    }
}

extension GuardedSettings {
    /// These settings with `policy`'s keys replacing theirs.
    public func overridden(by policy: GuardedSettings) -> GuardedSettings {
        GuardedSettings(values.merging(policy.values) { _, fixed in fixed })
    }
}

extension KeyProviderChoice {
    /// The config's spelling: `auto`, `tpm2`, `secret-service`, `file`.
    var configValue: String {
        switch self {
        case .auto: "auto"
        case .provider(let kind): kind.rawValue
        }
    }
}
