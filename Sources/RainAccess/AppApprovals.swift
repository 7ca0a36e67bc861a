import FoundationEssentials
import RainCore

/// Which apps may use which profile, as the user approved them on the prompt (or as the machine's
/// policy pre-approves them).
///
/// An app is a `CallerIdentity.appPath` (the executable, plus the script for an interpreter) with
/// the hash of its content. A profile's first approved app is its owner. A new binary at an
/// approved path (an update) is asked about again once: approved, its hash replaces the old one;
/// refused, it is refused without a new prompt until `rainwallet apps approve`.
public struct AppApprovals: SealedRecordValue, Equatable {
    /// How an app came to be approved.
    public enum Source: String, Codable, Sendable {
        /// The user confirmed it on the prompt.
        case prompt
        /// No prompt could be shown: the first caller was trusted (and audited).
        case firstUse = "first-use"
        /// `/etc/rainwallet/policy.json` names it.
        case policy
    }

    /// One approved app of a profile.
    public struct Approval: Codable, Sendable, Equatable {
        /// The executable's path (plus the script's).
        public var appPath: String
        /// The content approved (`CallerIdentity.contentHash`); nil only for a policy entry that
        /// pins the path alone.
        public var contentHash: String?
        /// When (ISO 8601, UTC).
        public var approvedAt: String
        /// How.
        public var source: Source
        /// A changed binary that was asked about and refused: not asked about again.
        public var refusedContentHash: String?
        /// The Flatpak app id the app ran under when approved (nil: outside any sandbox). It only
        /// narrows: a caller matches only under the same id, so another sandboxed app, or the
        /// same program outside its sandbox, is another app.
        public var flatpakAppID: String?

        /// An approval.
        public init(
            appPath: String, contentHash: String?, approvedAt: String, source: Source, flatpakAppID: String? = nil
        ) {
            self.appPath = appPath
            self.contentHash = contentHash
            self.approvedAt = approvedAt
            self.source = source
            self.flatpakAppID = flatpakAppID
        }

        /// Whether `caller` runs exactly this app (same path, content and Flatpak app id).
        public func matches(_ caller: CallerIdentity) -> Bool {
            isSameApp(caller) && (contentHash == nil || contentHash == caller.contentHash)
        }

        /// Whether `caller` is this app, whatever its content now: same path, same Flatpak app id.
        public func isSameApp(_ caller: CallerIdentity) -> Bool {
            caller.appPath == appPath && caller.flatpakAppID == flatpakAppID
        }
    }

    /// What a call from an app to a profile may do.
    public enum Decision: Sendable, Equatable {
        /// An approved app.
        case approved(Source)
        /// Nobody owns the profile: ask the user (the app becomes its owner).
        case unowned
        /// Another app owns the profile: refused (RAIN_202 `app_not_approved`) until approved.
        case notApproved(owner: String)
        /// An approved path with new content (an update): ask once.
        case changedBinary
        /// The changed binary was asked about and refused.
        case changedBinaryRefused
        /// LD_PRELOAD, LD_AUDIT or a tracer: never approved.
        case unapprovable([String])
    }

    /// Approvals by profile; the first of each list is the owner.
    public var profiles: [String: [Approval]]

    /// The prompt places registered so far; nil until the first (`PromptPlaceHistory`). Kept
    /// here, not in the place's own file, so that removing that file cannot make the next place a
    /// first one again without also losing every approval.
    public var promptPlaces: PromptPlaceHistory?

    /// No approvals.
    public init(profiles: [String: [Approval]] = [:]) {
        self.profiles = profiles
    }

    /// `<state>/apps.json`.
    public static let sealedFile = SealedRecordFile(
        fileName: "apps.json", purpose: "apps", name: "app approvals", startOver: "remove the file to start over")

    /// The owner of `profile`, if any.
    public func owner(of profile: String) -> Approval? { profiles[profile]?.first }

    /// What `caller` may do with `profile`, counting `policy`'s pre-approved apps.
    public func decide(profile: String, caller: CallerIdentity, policy: [Approval] = []) -> Decision {
        if !caller.unapprovable.isEmpty { return .unapprovable(caller.unapprovable) }
        if policy.contains(where: { $0.matches(caller) }) { return .approved(.policy) }
        let approvals = profiles[profile] ?? []
        if let approval = approvals.first(where: { $0.matches(caller) }) { return .approved(approval.source) }
        if let samePath = approvals.first(where: { $0.isSameApp(caller) }) {
            return samePath.refusedContentHash == caller.contentHash ? .changedBinaryRefused : .changedBinary
        }
        guard let owner = approvals.first ?? policy.first else { return .unowned }
        return .notApproved(owner: owner.appPath)
    }

    /// Approves `caller` for `profile` (a changed binary's new hash replaces the old one).
    public mutating func approve(profile: String, caller: CallerIdentity, source: Source, at time: Date) {
        let stamp = Self.timestamp(time)
        var approvals = profiles[profile] ?? []
        if let index = approvals.firstIndex(where: { $0.isSameApp(caller) }) {
            approvals[index].contentHash = caller.contentHash
            approvals[index].approvedAt = stamp
            approvals[index].source = source
            approvals[index].refusedContentHash = nil
        } else {
            approvals.append(
                Approval(
                    appPath: caller.appPath, contentHash: caller.contentHash, approvedAt: stamp, source: source,
                    flatpakAppID: caller.flatpakAppID))
        }
        profiles[profile] = approvals
    }

    /// Records that the user refused `caller`'s changed binary, so it is not asked about again.
    public mutating func refuseChangedBinary(profile: String, caller: CallerIdentity) {
        guard var approvals = profiles[profile], let index = approvals.firstIndex(where: { $0.isSameApp(caller) })
        else { return }
        approvals[index].refusedContentHash = caller.contentHash
        profiles[profile] = approvals
    }

    /// Removes `appPath`'s approval of `profile`; false when there was none.
    @discardableResult
    public mutating func revoke(profile: String, appPath: String) -> Bool {
        guard var approvals = profiles[profile], let index = approvals.firstIndex(where: { $0.appPath == appPath }) else {
            return false
        }
        approvals.remove(at: index)
        profiles[profile] = approvals.isEmpty ? nil : approvals
        return true
    }

    static func timestamp(_ time: Date) -> String {
        var style = Date.ISO8601FormatStyle()
        style.timeZone = TimeZone(identifier: "UTC") ?? style.timeZone
        return time.formatted(style)
    }
}
