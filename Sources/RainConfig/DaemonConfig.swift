import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCodeSenderSettings
import RainCore
import RainCrypto
import RainKeyStore
import RainPasskeyDomain
import RainSystem

/// Settings of one profile (app) from the daemon's config file.
public struct ProfileSettings: Sendable, Equatable {
    /// The app the profile belongs to; accounts live within an app. Defaults to the profile name.
    public var appID: String
    /// The passkey relying-party domain, if configured.
    public var passkeyDomain: String?
    /// SHA-256 fingerprints of the certificates that sign the profile's Android app, as
    /// `AB:CD:…` (32 upper-case hex pairs): each adds the origin
    /// `android:apk-key-hash:<base64url of the 32 bytes>` to the passkey ceremonies.
    public var androidCertificateFingerprints: [String] = []
    /// Whether recovery phrases and keys may be exported (config only, never from a client).
    public var isExportAllowed: Bool
    /// Extra uids allowed to use this profile.
    public var allowedUIDs: Set<UInt32>
    public var sessionPolicy: RainWalletSessionPolicy
    /// The `sessionPolicy` keys the config file sets (`refreshBufferSeconds`, …): these win over a
    /// client's `Profile/Configure`.
    public var sessionPolicyKeys: Set<String> = []

    public init(
        appID: String, passkeyDomain: String? = nil, isExportAllowed: Bool = false, allowedUIDs: Set<UInt32> = [],
        sessionPolicy: RainWalletSessionPolicy = .default
    ) {
        self.appID = appID
        self.passkeyDomain = passkeyDomain
        self.isExportAllowed = isExportAllowed
        self.allowedUIDs = allowedUIDs
        self.sessionPolicy = sessionPolicy
    }

    /// The 32 bytes of an `AB:CD:…` SHA-256 fingerprint, or nil when it is not 32 colon-separated
    /// hex pairs.
    public static func certificateSHA256(fingerprint: String) -> [UInt8]? {
        let pairs = fingerprint.split(separator: ":", omittingEmptySubsequences: false)
        guard pairs.count == 32 else { return nil }
        var bytes: [UInt8] = []
        for pair in pairs {
            guard pair.utf8.count == 2, let byte = UInt8(pair, radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    /// The origins passkey ceremonies of `domain` accept: `https://<domain>`, then
    /// `android:apk-key-hash:<base64url>` for each configured Android signing certificate.
    public func passkeyOrigins(domain: String) -> [String] {
        ["https://" + domain]
            + androidCertificateFingerprints.compactMap(Self.certificateSHA256(fingerprint:)).map {
                "android:apk-key-hash:" + Base64URL.encode($0)
            }
    }

    /// Defaults for a profile the config does not name.
    public static func defaults(for profile: String) -> ProfileSettings { ProfileSettings(appID: profile) }
}

/// How the embedded authority delivers codes.
public enum CodeSenderSetting: Sendable, Equatable {
    /// Append to `outbox.jsonl` in the state directory (development).
    case outbox
    /// Run a program with the delivery as JSON on stdin.
    case command(arguments: [String], timeout: Duration)
    /// Send through an SMTP server and/or an SMS gateway (types `smtp` and `sms`).
    case providers(CodeSenderConfiguration)
}

/// Where the device's keys live (`storage` in the config).
public struct StorageSettings: Sendable, Equatable {
    /// `storage.provider`: `auto` (default), `tpm2`, `secret-service` or `file`. Used the first
    /// time only: the choice is recorded in the state directory, and only `storage migrate` changes it.
    public var provider: KeyProviderChoice = .auto
    /// `storage.tcti`: how tpm2-tss reaches the TPM (`device:/dev/tpmrm0` by default).
    public var tcti: String = KeyProviders.defaultTCTI

    public init() {}
}

/// The daemon's config file (`config.json`), validated at start.
///
/// ```json
/// {
///   "allowedUIDs": [1001],
///   "codeSender": {"type": "outbox"},
///   "storage": {"provider": "auto", "tcti": "device:/dev/tpmrm0"},
///   "access": {"pinentry": "/usr/bin/pinentry-tty", "apps": {"myapp": [{"path": "/usr/bin/mywallet"}]}},
///   "authority": {"codeLifetimeSeconds": 300, "accessTokenLifetimeSeconds": 900, "devOutbox": true,
///                 "sendLimits": {"contactCooldownSeconds": 30, "contactMaxSends": 5, "contactWindowSeconds": 900,
///                                "accountMaxSends": 10, "accountWindowSeconds": 3600},
///                 "pruneIntervalSeconds": 600, "pruneRetentionSeconds": 86400},
///   "profiles": {"myapp": {"appID": "myapp", "passkeyDomain": "example.com", "allowExport": false,
///                          "allowedUIDs": [], "sessionPolicy": {"refreshBufferSeconds": 60}}}
/// }
/// ```
public struct DaemonConfig: Sendable, Equatable {
    /// Uids served besides the daemon's own (all profiles).
    public var allowedUIDs: Set<UInt32> = []
    public var codeSender: CodeSenderSetting = .outbox
    public var authority = AuthoritySettings()
    public var profiles: [String: ProfileSettings] = [:]
    /// Where the keys live.
    public var storage = StorageSettings()
    /// The pinentry program and the apps approved in advance.
    public var access = AccessSettings()
    /// The remote authority (`remoteAuthority`, or the flags `--authority` and `--authority-ca`);
    /// nil: the embedded one.
    public var remoteAuthority: RemoteAuthoritySetting?

    public init() {}

    /// The settings of `profile`: configured or defaults.
    public func settings(for profile: String) -> ProfileSettings {
        profiles[profile] ?? .defaults(for: profile)
    }

    /// Every uid any profile allows, besides the daemon's own.
    public var allAllowedUIDs: Set<UInt32> { profiles.values.reduce(allowedUIDs) { $0.union($1.allowedUIDs) } }

    /// Loads and validates a config file.
    ///
    /// The config names the code sender's command and the uids the daemon serves, so it is trusted
    /// only when no other user could have written it: never through a symbolic link,
    /// a regular file owned by this uid (or root) that group and others cannot write.
    /// - Parameter isRequired: when false a missing file gives the defaults.
    /// - Throws: RAIN_102 naming the file and the bad key, or the owner or mode found and the fix.
    public static func load(path: String, isRequired: Bool) throws(RainError) -> DaemonConfig {
        let bytes = try OwnedPath.readTrustedFile(
            path, owners: [geteuid(), 0], name: "config file", field: "config", limit: 1 << 20)
        guard let bytes else {
            if isRequired { throw RainError.invalid("config file \(path) does not exist", field: "config") }
            return DaemonConfig()
        }
        return try parse(Data(bytes), source: path)
    }

    /// Parses and validates config JSON.
    public static func parse(_ data: Data, source: String = "config") throws(RainError) -> DaemonConfig {
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw RainError.invalid("\(source): not valid JSON: \(ErrorText.describe(error))", field: "config")
        }
        var reader = ConfigReader(source: source)
        return try reader.config(root)
    }
}

/// Walks the JSON tree, naming the key path in every error.
struct ConfigReader {
    let source: String

    func fail(_ path: String, _ why: String) -> RainError {
        RainError.invalid("\(source): \(path): \(why)", field: path)
    }

    func object(_ value: JSONValue, _ path: String, allowed: Set<String>) throws(RainError) -> [String: JSONValue] {
        guard case .object(let dict) = value else { throw fail(path, "must be an object") }
        if let unknown = dict.keys.sorted().first(where: { !allowed.contains($0) }) {
            let joined = path.isEmpty ? unknown : "\(path).\(unknown)"
            throw fail(joined, "unknown key; allowed here: \(allowed.sorted().joined(separator: ", "))")
        }
        return dict
    }

    func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func bool(_ value: JSONValue, _ path: String) throws(RainError) -> Bool {
        guard case .bool(let b) = value else { throw fail(path, "must be true or false") }
        return b
    }

    func number(_ value: JSONValue, _ path: String, min: Double, max: Double) throws(RainError) -> Double {
        guard case .number(let d) = value else { throw fail(path, "must be a number") }
        guard d.isFinite, d >= min, d <= max else {
            throw fail(path, "must be between \(Self.format(min)) and \(Self.format(max))")
        }
        return d
    }

    /// A whole number from 1 to `max`.
    func count(_ value: JSONValue, _ path: String, max: Double) throws(RainError) -> Int {
        let d = try number(value, path, min: 1, max: max)
        guard d == d.rounded() else { throw fail(path, "must be a whole number") }
        return Int(d)
    }

    static func format(_ d: Double) -> String { d == d.rounded() ? String(Int64(d)) : String(d) }

    func string(_ value: JSONValue, _ path: String) throws(RainError) -> String {
        guard case .string(let s) = value else { throw fail(path, "must be a string") }
        return s
    }

    func uids(_ value: JSONValue, _ path: String) throws(RainError) -> Set<UInt32> {
        guard case .array(let list) = value else { throw fail(path, "must be an array of uids") }
        var out = Set<UInt32>()
        for (i, v) in list.enumerated() {
            let n = try number(v, "\(path)[\(i)]", min: 0, max: 4_294_967_294)
            guard n == n.rounded() else { throw fail("\(path)[\(i)]", "must be a whole number") }
            out.insert(UInt32(n))
        }
        return out
    }

    /// SHA-256 certificate fingerprints: each 32 colon-separated hex pairs (`AB:CD:…`, as keytool
    /// and the Play Console print them), returned upper-case.
    func fingerprints(_ value: JSONValue, _ path: String) throws(RainError) -> [String] {
        guard case .array(let list) = value else { throw fail(path, "must be an array of SHA-256 fingerprints") }
        var out: [String] = []
        for (i, v) in list.enumerated() {
            let text = try string(v, "\(path)[\(i)]").uppercased()
            guard ProfileSettings.certificateSHA256(fingerprint: text) != nil else {
                throw fail(
                    "\(path)[\(i)]", "must be a SHA-256 fingerprint: 32 hex pairs separated by colons (AB:CD:…)")
            }
            if !out.contains(text) { out.append(text) }
        }
        return out
    }

    func seconds(_ value: JSONValue, _ path: String, min: Double, max: Double) throws(RainError) -> Duration {
        .milliseconds(Int64(try number(value, path, min: min, max: max) * 1000))
    }

    mutating func config(_ root: JSONValue) throws(RainError) -> DaemonConfig {
        let dict = try object(
            root, "", allowed: ["allowedUIDs", "codeSender", "authority", "profiles", "storage", "access", "remoteAuthority"])
        var config = DaemonConfig()
        if let v = dict["remoteAuthority"] { config.remoteAuthority = try remoteAuthority(v, "remoteAuthority") }
        if let v = dict["storage"] { config.storage = try storage(v, "storage") }
        if let v = dict["access"] { config.access = try access(v, "access") }
        if let v = dict["allowedUIDs"] { config.allowedUIDs = try uids(v, "allowedUIDs") }
        if let v = dict["codeSender"] { config.codeSender = try codeSender(v, "codeSender") }
        if let v = dict["authority"] { config.authority = try authority(v, "authority") }
        if let v = dict["profiles"] {
            guard case .object(let profiles) = v else { throw fail("profiles", "must be an object of profile name to settings") }
            for (name, settings) in profiles {
                let path = "profiles.\(name)"
                do {
                    try ProfileName.validate(name)
                } catch {
                    throw fail(path, "invalid profile name: use 1 to 64 of a-z, 0-9 and '-', starting with a letter or digit")
                }
                config.profiles[name] = try profile(settings, path, name: name)
            }
        }
        return config
    }

    func storage(_ value: JSONValue, _ path: String) throws(RainError) -> StorageSettings {
        let dict = try object(value, path, allowed: ["provider", "tcti"])
        var s = StorageSettings()
        if let v = dict["provider"] {
            let key = join(path, "provider")
            do {
                s.provider = try KeyProviderChoice(parsing: try string(v, key))
            } catch {
                throw fail(key, "must be \"auto\", \"tpm2\", \"secret-service\" or \"file\"")
            }
        }
        if let v = dict["tcti"] {
            let key = join(path, "tcti")
            s.tcti = try string(v, key)
            // tpm2-tss reads `name:conf`; the known names only, and nothing that could smuggle a second setting.
            let name = s.tcti.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
            guard ["device", "swtpm", "mssim", "tabrmd"].contains(name), s.tcti.utf8.count <= 256,
                !s.tcti.contains(where: { $0.isNewline || $0 == "\0" })
            else {
                throw fail(key, "must be a TCTI such as \"device:/dev/tpmrm0\", \"swtpm:path=/run/swtpm.sock\" or \"tabrmd:\"")
            }
        }
        return s
    }

    func codeSender(_ value: JSONValue, _ path: String) throws(RainError) -> CodeSenderSetting {
        let dict = try object(
            value, path, allowed: Set(["type", "command", "timeoutSeconds"]).union(CodeSenderConfiguration.keys))
        guard let t = dict["type"] else {
            throw fail(join(path, "type"), "is required: \"outbox\", \"command\", \"smtp\" or \"sms\"")
        }
        switch try string(t, join(path, "type")) {
        case "outbox":
            if dict["command"] != nil { throw fail(join(path, "command"), "is only for type \"command\"") }
            return .outbox
        case "command":
            guard case .array(let c)? = dict["command"], !c.isEmpty else {
                throw fail(join(path, "command"), "must be a non-empty array: [program, arguments...]")
            }
            var args: [String] = []
            for (i, a) in c.enumerated() { args.append(try string(a, "\(join(path, "command"))[\(i)]")) }
            guard args[0].hasPrefix("/") else {
                throw fail("\(join(path, "command"))[0]", "must be an absolute path to the program")
            }
            let timeout = try dict["timeoutSeconds"].map { (v) throws(RainError) in
                try seconds(v, join(path, "timeoutSeconds"), min: 0.1, max: 300)
            }
            return .command(arguments: args, timeout: timeout ?? .seconds(10))
        case "smtp", "sms":
            do {
                return .providers(try CodeSenderConfiguration.parse(value, path: path))
            } catch {
                throw RainError.invalid("\(source): \(error.message)", field: error.details.field)
            }
        default:
            throw fail(join(path, "type"), "must be \"outbox\", \"command\", \"smtp\" or \"sms\"")
        }
    }

    func authority(_ value: JSONValue, _ path: String) throws(RainError) -> AuthoritySettings {
        let dict = try object(
            value, path,
            allowed: [
                "codeLifetimeSeconds", "maxWrongAttempts", "maxActiveCodesPerAccount", "accessTokenLifetimeSeconds",
                "refreshTokenLifetimeSeconds", "devOutbox", "passkeyCeremonyLifetimeSeconds", "sendLimits",
                "pruneIntervalSeconds",
                "pruneRetentionSeconds",
            ])
        var s = AuthoritySettings()
        if let v = dict["codeLifetimeSeconds"] {
            s.codeLifetime = try seconds(v, join(path, "codeLifetimeSeconds"), min: 1, max: 3600)
        }
        if let v = dict["maxWrongAttempts"] {
            s.maxWrongAttempts = Int(try number(v, join(path, "maxWrongAttempts"), min: 1, max: 10))
        }
        if let v = dict["maxActiveCodesPerAccount"] {
            s.maxActiveCodesPerAccount = Int(try number(v, join(path, "maxActiveCodesPerAccount"), min: 1, max: 10))
        }
        if let v = dict["accessTokenLifetimeSeconds"] {
            s.accessTokenLifetime = try seconds(v, join(path, "accessTokenLifetimeSeconds"), min: 2, max: 86400)
        }
        if let v = dict["refreshTokenLifetimeSeconds"] {
            s.refreshTokenLifetime = try seconds(v, join(path, "refreshTokenLifetimeSeconds"), min: 10, max: 31_536_000)
        }
        if let v = dict["devOutbox"] { s.isDevOutboxEnabled = try bool(v, join(path, "devOutbox")) }
        if let v = dict["passkeyCeremonyLifetimeSeconds"] {
            s.passkeyCeremonyLifetime = try seconds(v, join(path, "passkeyCeremonyLifetimeSeconds"), min: 10, max: 3600)
        }
        if let v = dict["sendLimits"] { s.sendLimits = try sendLimits(v, join(path, "sendLimits")) }
        if let v = dict["pruneIntervalSeconds"] {
            s.pruneInterval = try seconds(v, join(path, "pruneIntervalSeconds"), min: 1, max: 86400)
        }
        if let v = dict["pruneRetentionSeconds"] {
            s.pruneRetention = try seconds(v, join(path, "pruneRetentionSeconds"), min: 1, max: 31_536_000)
        }
        return s
    }

    /// `authority.sendLimits`: any subset of the keys; the others keep DESIGN §6's defaults.
    func sendLimits(_ value: JSONValue, _ path: String) throws(RainError) -> CodeSendLimits {
        let dict = try object(
            value, path,
            allowed: [
                "contactCooldownSeconds", "contactMaxSends", "contactWindowSeconds", "accountMaxSends",
                "accountWindowSeconds", "contactAllAppsMaxSends", "contactAllAppsWindowSeconds", "sourceMaxSends",
                "sourceWindowSeconds", "deviceKeyMaxWrongGuesses", "sourceMaxWrongGuesses", "guessWindowSeconds",
            ])
        var l = CodeSendLimits()
        if let v = dict["contactCooldownSeconds"] {
            l.contactCooldown = try seconds(v, join(path, "contactCooldownSeconds"), min: 0, max: 3600)
        }
        if let v = dict["contactMaxSends"] {
            l.contactMaxSends = try count(v, join(path, "contactMaxSends"), max: 1_000_000)
        }
        if let v = dict["contactWindowSeconds"] {
            l.contactWindow = try seconds(v, join(path, "contactWindowSeconds"), min: 1, max: 86400)
        }
        if let v = dict["accountMaxSends"] {
            l.accountMaxSends = try count(v, join(path, "accountMaxSends"), max: 1_000_000)
        }
        if let v = dict["accountWindowSeconds"] {
            l.accountWindow = try seconds(v, join(path, "accountWindowSeconds"), min: 1, max: 86400)
        }
        if let v = dict["contactAllAppsMaxSends"] {
            l.contactAllAppsMaxSends = try count(v, join(path, "contactAllAppsMaxSends"), max: 1_000_000)
        }
        if let v = dict["contactAllAppsWindowSeconds"] {
            l.contactAllAppsWindow = try seconds(v, join(path, "contactAllAppsWindowSeconds"), min: 1, max: 86400)
        }
        if let v = dict["sourceMaxSends"] { l.sourceMaxSends = try count(v, join(path, "sourceMaxSends"), max: 1_000_000) }
        if let v = dict["sourceWindowSeconds"] {
            l.sourceWindow = try seconds(v, join(path, "sourceWindowSeconds"), min: 1, max: 86400)
        }
        if let v = dict["deviceKeyMaxWrongGuesses"] {
            l.deviceKeyMaxWrongGuesses = try count(v, join(path, "deviceKeyMaxWrongGuesses"), max: 1_000_000)
        }
        if let v = dict["sourceMaxWrongGuesses"] {
            l.sourceMaxWrongGuesses = try count(v, join(path, "sourceMaxWrongGuesses"), max: 1_000_000)
        }
        if let v = dict["guessWindowSeconds"] {
            l.guessWindow = try seconds(v, join(path, "guessWindowSeconds"), min: 1, max: 86400)
        }
        return l
    }

    func profile(_ value: JSONValue, _ path: String, name: String) throws(RainError) -> ProfileSettings {
        let dict = try object(
            value, path,
            allowed: [
                "appID", "passkeyDomain", "androidCertificateFingerprints", "allowExport", "allowedUIDs", "sessionPolicy",
            ])
        var p = ProfileSettings.defaults(for: name)
        if let v = dict["appID"] {
            p.appID = try string(v, join(path, "appID"))
            guard !p.appID.isEmpty, p.appID.utf8.count <= 128 else {
                throw fail(join(path, "appID"), "must be 1 to 128 characters")
            }
        }
        if let v = dict["passkeyDomain"] {
            let key = join(path, "passkeyDomain")
            do {
                p.passkeyDomain = try PasskeyDomain.validate(try string(v, key))
            } catch {
                throw fail(key, error.message)
            }
        }
        if let v = dict["androidCertificateFingerprints"] {
            p.androidCertificateFingerprints = try fingerprints(v, join(path, "androidCertificateFingerprints"))
        }
        if let v = dict["allowExport"] { p.isExportAllowed = try bool(v, join(path, "allowExport")) }
        if let v = dict["allowedUIDs"] { p.allowedUIDs = try uids(v, join(path, "allowedUIDs")) }
        if let v = dict["sessionPolicy"] {
            p.sessionPolicy = try policy(v, join(path, "sessionPolicy"))
            if case .object(let keys) = v { p.sessionPolicyKeys = Set(keys.keys) }
        }
        return p
    }

    /// The keys of a `sessionPolicy` object.
    static let policyKeys: Set<String> = [
        "refreshBufferSeconds", "autoRefresh", "transientRetries", "retryInitialDelayMilliseconds",
        "retryMaxDelayMilliseconds", "activeThresholdSeconds", "restoreTimeoutSeconds",
    ]

    /// A `sessionPolicy` object's values over `base` (the defaults for the config file), each
    /// checked against its range.
    func policy(
        _ value: JSONValue, _ path: String, base: RainWalletSessionPolicy = RainWalletSessionPolicy()
    ) throws(RainError) -> RainWalletSessionPolicy {
        let dict = try object(value, path, allowed: Self.policyKeys)
        var p = base
        if let v = dict["refreshBufferSeconds"] {
            p.refreshBuffer = try seconds(v, join(path, "refreshBufferSeconds"), min: 0, max: 3600)
        }
        if let v = dict["autoRefresh"] { p.isAutoRefreshEnabled = try bool(v, join(path, "autoRefresh")) }
        if let v = dict["transientRetries"] {
            p.transientRetries = Int(try number(v, join(path, "transientRetries"), min: 0, max: 10))
        }
        if let v = dict["retryInitialDelayMilliseconds"] {
            p.retryInitialDelay = .milliseconds(
                Int64(try number(v, join(path, "retryInitialDelayMilliseconds"), min: 1, max: 60000)))
        }
        if let v = dict["retryMaxDelayMilliseconds"] {
            p.retryMaxDelay = .milliseconds(Int64(try number(v, join(path, "retryMaxDelayMilliseconds"), min: 1, max: 600_000)))
        }
        if p.retryMaxDelay < p.retryInitialDelay {
            throw fail(join(path, "retryMaxDelayMilliseconds"), "must not be less than retryInitialDelayMilliseconds")
        }
        if let v = dict["activeThresholdSeconds"] {
            p.activeThreshold = try seconds(v, join(path, "activeThresholdSeconds"), min: 0, max: 3600)
        }
        if let v = dict["restoreTimeoutSeconds"] {
            p.restoreTimeout = try seconds(v, join(path, "restoreTimeoutSeconds"), min: 0, max: 60)
        }
        return p
    }
}

extension ProfileSettings {
    /// A client's session policy (`Profile/Configure`) over the profile's `current` one: every
    /// value the client sets is checked like the config file's key of the same name (RAIN_102
    /// naming `sessionPolicy.<key>`), then the keys the config file sets are put back (the config
    /// wins). Unset values keep their current ones.
    /// - Throws: RAIN_102 for a value out of its range, or a retry cap below the initial delay.
    public func sessionPolicy(
        applying values: [String: JSONValue], over current: RainWalletSessionPolicy
    ) throws(RainError) -> RainWalletSessionPolicy {
        let reader = ConfigReader(source: "Profile/Configure")
        var p = try reader.policy(.object(values), "sessionPolicy", base: current)
        let config = sessionPolicy
        for key in sessionPolicyKeys {
            switch key {
            case "refreshBufferSeconds": p.refreshBuffer = config.refreshBuffer
            case "autoRefresh": p.isAutoRefreshEnabled = config.isAutoRefreshEnabled
            case "transientRetries": p.transientRetries = config.transientRetries
            case "retryInitialDelayMilliseconds": p.retryInitialDelay = config.retryInitialDelay
            case "retryMaxDelayMilliseconds": p.retryMaxDelay = config.retryMaxDelay
            case "activeThresholdSeconds": p.activeThreshold = config.activeThreshold
            case "restoreTimeoutSeconds": p.restoreTimeout = config.restoreTimeout
            default: break
            }
        }
        if p.retryMaxDelay < p.retryInitialDelay {
            let key =
                sessionPolicyKeys.contains("retryMaxDelayMilliseconds")
                ? "retryInitialDelayMilliseconds" : "retryMaxDelayMilliseconds"
            throw reader.fail(
                "sessionPolicy.\(key)",
                "retryMaxDelayMilliseconds must not be less than retryInitialDelayMilliseconds (the daemon's config sets "
                    + "\(sessionPolicyKeys.sorted().joined(separator: ", ")))")
        }
        return p
    }
}
