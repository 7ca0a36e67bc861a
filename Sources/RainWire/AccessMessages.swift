/// One approved app of a profile (`AppEntry`, proto/access.proto).
public struct AppEntry: Sendable, Equatable {
    /// The profile.
    public var profile: String
    /// The executable's path, plus " SCRIPT" for an interpreter.
    public var path: String
    /// SHA-256 of the content (hex); empty: any content (a policy entry).
    public var contentHash: String
    /// ISO 8601 UTC; empty for a policy entry.
    public var approvedAt: String
    /// `prompt`, `first-use` or `policy`.
    public var source: String
    /// The profile's first approved app.
    public var isOwner: Bool

    /// An entry.
    public init(profile: String, path: String, contentHash: String, approvedAt: String, source: String, isOwner: Bool) {
        self.profile = profile
        self.path = path
        self.contentHash = contentHash
        self.approvedAt = approvedAt
        self.source = source
        self.isOwner = isOwner
    }
}

/// `Apps/List` request (empty).
public struct ListAppsRequest: WireMessage, Equatable {
    /// Creates the request.
    public init() {}
}

/// `Apps/List` answer: every approval and the pre-approved apps.
public struct ListAppsResponse: WireMessage, Equatable {
    /// The apps.
    public var apps: [AppEntry]

    /// Creates the answer.
    public init(apps: [AppEntry]) { self.apps = apps }
}

/// `Apps/Approve` request: the program to approve for the call's profile.
public struct ApproveAppRequest: WireMessage, Equatable {
    /// The program's absolute path.
    public var path: String
    /// For an interpreter: the script's absolute path; empty otherwise.
    public var script: String

    /// Creates the request.
    public init(path: String, script: String = "") {
        self.path = path
        self.script = script
    }
}

/// `Apps/Approve` answer: the approval made.
public struct ApproveAppResponse: WireMessage, Equatable {
    /// The approval.
    public var app: AppEntry?

    /// Creates the answer.
    public init(app: AppEntry?) { self.app = app }
}

/// `Apps/Revoke` request: the app whose approval of the call's profile goes.
public struct RevokeAppRequest: WireMessage, Equatable {
    /// The approved path, as `Apps/List` shows it.
    public var path: String

    /// Creates the request.
    public init(path: String) { self.path = path }
}

/// `Apps/Revoke` answer (empty).
public struct RevokeAppResponse: WireMessage, Equatable {
    /// Creates the answer.
    public init() {}
}

/// One guarded setting whose config value differs from the confirmed one.
public struct SettingChange: Sendable, Equatable {
    /// The setting (`profiles.default.allowExport`).
    public var key: String
    /// Its confirmed value (canonical JSON); nil: not set.
    public var confirmed: String?
    /// The config's value; nil: removed.
    public var requested: String?

    /// A change.
    public init(key: String, confirmed: String?, requested: String?) {
        self.key = key
        self.confirmed = confirmed
        self.requested = requested
    }
}

/// `Settings/Get` request (empty).
public struct GetSettingsRequest: WireMessage, Equatable {
    /// Creates the request.
    public init() {}
}

/// `Settings/Get` answer.
public struct GetSettingsResponse: WireMessage, Equatable {
    /// The digest of the settings the daemon runs with.
    public var confirmedDigest: String
    /// The changes waiting for the user's confirmation.
    public var pending: [SettingChange]
    /// The keys `/etc/rainwallet/policy.json` fixes.
    public var fixedByPolicy: [String]
    /// The digest once the pending changes are confirmed (what `Settings/Confirm` names).
    public var requestedDigest: String

    /// Creates the answer.
    public init(confirmedDigest: String, pending: [SettingChange], fixedByPolicy: [String], requestedDigest: String) {
        self.confirmedDigest = confirmedDigest
        self.pending = pending
        self.fixedByPolicy = fixedByPolicy
        self.requestedDigest = requestedDigest
    }
}

extension GetSettingsResponse {
    /// How many hex digits of a settings digest the prompt shows when the changes do not fit on
    /// it: 64 bits, too many to find another config with the same short digest.
    public static let shortDigestLength = 16

    /// The start of `digest` the prompt shows and `rainwallet settings` prints.
    public static func shortDigest(_ digest: String) -> String { String(digest.prefix(shortDigestLength)) }
}

/// `Settings/Confirm` request: the requested digest the user saw.
public struct ConfirmSettingsRequest: WireMessage, Equatable {
    /// `GetSettingsResponse.requestedDigest`.
    public var requestedDigest: String

    /// Creates the request.
    public init(requestedDigest: String) { self.requestedDigest = requestedDigest }
}

/// `Settings/Confirm` answer.
public struct ConfirmSettingsResponse: WireMessage, Equatable {
    /// The digest of the settings now confirmed.
    public var confirmedDigest: String

    /// Creates the answer.
    public init(confirmedDigest: String) { self.confirmedDigest = confirmedDigest }
}

/// `Prompt/Register` request: where prompts appear from now on.
public struct RegisterPromptRequest: WireMessage, Equatable {
    /// A terminal's path (`/dev/pts/3`).
    public var terminal: String

    /// Creates the request.
    public init(terminal: String) { self.terminal = terminal }
}

/// `Prompt/Register` answer.
public struct RegisterPromptResponse: WireMessage, Equatable {
    /// The terminal registered.
    public var terminal: String

    /// Creates the answer.
    public init(terminal: String) { self.terminal = terminal }
}
