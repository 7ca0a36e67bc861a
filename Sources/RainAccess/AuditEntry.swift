import FoundationEssentials
import RainCore

/// What an audit entry records. A struct over the name rather than an enum, so each part of the
/// daemon declares the events it records next to where it records them.
public struct AuditEvent: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The name written to the log (`login`, `export`, …).
    public var rawValue: String
    /// An event.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// An event.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }

    /// A login (code or passkey; `detail` says which).
    public static let login = AuditEvent("login")
    /// A logout asked by a caller.
    public static let logout = AuditEvent("logout")
    /// A session ended by the authority's refusal (`stolen_token`, a login on another device, …).
    public static let revocation = AuditEvent("revocation")
    /// A session that reached its expiry.
    public static let sessionExpired = AuditEvent("session_expired")
    /// A wallet export (`detail`: `recovery_phrase`, `private_key:ethereum`, …).
    public static let export = AuditEvent("export")
    /// A passkey added to the account.
    public static let passkeyAdded = AuditEvent("passkey_added")
    /// A passkey removed from the account (`detail`: its domain and kind, never its id's key).
    public static let passkeyRemoved = AuditEvent("passkey_removed")
    /// The profile moved to another passkey domain (`detail`: `old → new`), whatever the user answered.
    public static let passkeyDomainChanged = AuditEvent("passkey_domain_changed")
    /// A backup contact added to the account (`detail`: its kind, never the address).
    public static let contactAdded = AuditEvent("contact_added")
    /// A backup contact removed from the account.
    public static let contactRemoved = AuditEvent("contact_removed")
    /// An app approved for a profile.
    public static let appApproved = AuditEvent("app_approved")
    /// An app refused (not approved for the profile, or unapprovable).
    public static let appRefused = AuditEvent("app_refused")
    /// An app's approval revoked.
    public static let appRevoked = AuditEvent("app_revoked")
    /// What the user answered on a prompt (`result`: ok, refused, cancelled, timeout).
    public static let promptResult = AuditEvent("prompt_result")
    /// A change of the security settings (`detail`: the keys, never their values).
    public static let settingsChanged = AuditEvent("settings_changed")
    /// At a start: a config edit of the security settings waits for the user's confirmation; the
    /// daemon runs on the confirmed settings (`detail`: the keys, never their values).
    public static let settingsWaiting = AuditEvent("settings_waiting")
    /// A terminal was registered for prompts (`rainwallet prompt here`).
    public static let promptRegistered = AuditEvent("prompt_registered")
    /// A new prompt place was confirmed by the place secret; it takes over after the wait.
    public static let promptMoveRequested = AuditEvent("prompt_move_requested")
    /// A wrong place secret was given for a new prompt place.
    public static let promptSecretWrong = AuditEvent("prompt_secret_wrong")
    /// A security key was registered to confirm actions with a touch (`rainwallet prompt add-key`).
    public static let confirmationKeyAdded = AuditEvent("confirmation_key_added")
    /// Every confirmation key was removed (`rainwallet prompt remove-keys`).
    public static let confirmationKeysRemoved = AuditEvent("confirmation_keys_removed")
    /// Entries that could not be written (a full disk): `count` of them, written as soon as the
    /// log could be written again.
    public static let auditGap = AuditEvent("audit_gap")
    /// The log was repaired at open: a torn last line (a crash mid-write) was removed.
    public static let auditRecovered = AuditEvent("audit_recovered")
    /// The log does not hold the head anchored at the remote authority (found at a start), or the
    /// authority refused its head: the log was cut or rewritten while the daemon was stopped, or
    /// another chain anchors there (`detail`: what was found).
    public static let auditAnchorMismatch = AuditEvent("audit_anchor_mismatch")
}

/// The app an entry is about: from a `CallerIdentity` when one was read, else the peer's pid and
/// uid alone.
public struct AuditApp: Sendable, Hashable, Codable {
    /// The executable (plus the script, for an interpreter); nil when only the peer's credentials
    /// are known.
    public var path: String?
    /// The first 12 hex digits of the executable's SHA-256; nil as `path`.
    public var hash: String?
    /// For an interpreter, the first 12 hex digits of the script's SHA-256.
    public var scriptHash: String?
    /// The process id.
    public var pid: Int32
    /// The uid.
    public var uid: UInt32

    /// The systemd unit the caller ran in, when it ran in one.
    public var unit: String?
    /// The caller's Flatpak app id, when it ran sandboxed.
    public var flatpak: String?

    /// The app of a caller whose identity was read.
    public init(_ identity: CallerIdentity) {
        path = identity.appPath
        hash = identity.hashPrefix
        scriptHash = identity.scriptHashPrefix
        pid = identity.pid
        uid = identity.uid
        unit = identity.systemdUnit
        flatpak = identity.flatpakAppID
    }

    /// A caller known only by its socket's peer credentials.
    public init(pid: Int32, uid: UInt32, path: String? = nil, hash: String? = nil) {
        self.pid = pid
        self.uid = uid
        self.path = path
        self.hash = hash
    }
}

/// How an operation ended.
public struct AuditResult: Sendable, Hashable {
    /// `ok`, `refused`, `cancelled` or `failed`.
    public var outcome: String
    /// The error's code (`RAIN_202`), when it failed.
    public var code: String?
    /// The error's stable reason (`export_not_allowed`), when it has one.
    public var reason: String?

    /// A result.
    public init(outcome: String, code: String? = nil, reason: String? = nil) {
        self.outcome = outcome
        self.code = code
        self.reason = reason
    }

    /// Success.
    public static let ok = AuditResult(outcome: "ok")

    /// The result of a call that threw `error`: refused for a refusal (RAIN_202, RAIN_203,
    /// RAIN_302), cancelled for RAIN_401, failed otherwise. Only the code and the stable reason are
    /// kept: never the message, which may quote input.
    public init(_ error: RainError) {
        switch error.code {
        case .unauthorized, .invalidLoginCode, .refused: outcome = "refused"
        case .userCancelled: outcome = "cancelled"
        default: outcome = "failed"
        }
        code = error.code.description
        reason = error.details.reason
    }

    /// Whether this is a refusal (aggregated when repeated).
    public var isRefusal: Bool { outcome == "refused" }
}

/// What a caller asks the log to record.
public struct AuditRecord: Sendable, Hashable {
    /// What happened.
    public var event: AuditEvent
    /// The profile, when the event concerns one.
    public var profile: String?
    /// The app that asked, when one did (nil for what the daemon does on its own, like a refresh
    /// the authority refused).
    public var app: AuditApp?
    /// How it ended.
    public var result: AuditResult
    /// A short, non-secret precision (`code`, `passkey`, `recovery_phrase`, `email`); cut to
    /// `AuditLog.maximumDetailLength`.
    public var detail: String?

    /// A record.
    public init(
        _ event: AuditEvent, profile: String?, app: AuditApp?, result: AuditResult = .ok, detail: String? = nil
    ) {
        self.event = event
        self.profile = profile
        self.app = app
        self.result = result
        self.detail = detail
    }

    /// What makes two refusals "the same" for aggregation: everything but the pid (a program run
    /// again is the same app).
    var aggregationKey: AggregationKey {
        AggregationKey(
            event: event, profile: profile, path: app?.path, hash: app?.hash, scriptHash: app?.scriptHash,
            uid: app?.uid, result: result, detail: detail)
    }

    struct AggregationKey: Hashable {
        var event: AuditEvent
        var profile: String?
        var path: String?
        var hash: String?
        var scriptHash: String?
        var uid: UInt32?
        var result: AuditResult
        var detail: String?
    }
}

/// One line of `audit.jsonl`, as written (JSON, keys sorted).
public struct AuditEntry: Sendable, Hashable, Codable {
    /// The entry's number: 1 for the first entry ever, +1 for each entry, across rotations.
    public var seq: UInt64
    /// When it was recorded: ISO 8601 UTC with milliseconds, from the daemon's clock (for an
    /// aggregated refusal, the first one's time).
    public var time: String
    /// What happened.
    public var event: AuditEvent
    /// The profile.
    public var profile: String?
    /// The app.
    public var app: AuditApp?
    /// `ok`, `refused`, `cancelled` or `failed`.
    public var result: String
    /// The error's code when it failed.
    public var code: String?
    /// The error's stable reason.
    public var reason: String?
    /// A short precision.
    public var detail: String?
    /// How many identical refusals this entry stands for (absent for one).
    public var count: Int?
    /// The hex SHA-256 of the previous line's bytes (without its newline): of the last line of the
    /// previous file for the first line of a file, 64 zeros for the first entry ever.
    public var prev: String

    /// The `prev` of the first entry ever.
    public static let genesis = String(repeating: "0", count: 64)

    /// The entry's time as a date; nil when it does not parse.
    public var date: Date? { AuditTime.parse(time) }
}

/// The timestamps of the audit log: ISO 8601 UTC with milliseconds (`2026-12-01T23:40:19.123Z`).
public enum AuditTime {
    /// Formats `date`.
    public static func string(_ date: Date) -> String { RFC3339.string(from: date, fractional: true) }

    /// Parses an ISO 8601 UTC time, with or without fractional seconds or a numeric offset.
    public static func parse(_ text: String) -> Date? {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }
}
