import Dispatch
import FoundationEssentials
import Glibc
import RainAccess
import RainCore
import RainTransport
import RainWire
import Synchronization

/// Where prompts appear (RainAccess's prompt place in the daemon, a fake in tests).
public protocol PromptPlaceRegistry: Sendable {
    /// Shows prompts on `terminal` from now on, once confirmed on the current place or the
    /// display; with neither, the very first place is trusted and audited, and a later one is
    /// confirmed by the place secret (`secret`) and waits before it takes over.
    /// - Returns: the terminal registered.
    /// - Throws: RAIN_102 for a terminal of the caller's own session or not a terminal, or a place
    ///   secret to choose or give; RAIN_401/RAIN_302 for a wrong secret, the lock or the wait; the
    ///   prompt's errors.
    func register(terminal: String, secret: String?, caller: CallerIdentity, profile: String) async throws(RainError)
        -> String

    /// Where the next prompt appears, and a terminal multiplexer that can read it there.
    func place() async -> PromptPlaceReport

    /// Registers the security key touched next as a confirmation key, once the user confirmed it
    /// on the prompt (typed code), and audits it. From then on every confirmation also asks a
    /// touch of a registered key.
    /// - Returns: the key's product name and how many keys are registered now.
    /// - Throws: the prompt's errors; RAIN_404 `security_key_not_found` when no key is plugged in;
    ///   RAIN_401 `security_key_timeout` when none was touched in time.
    func addConfirmationKey(caller: CallerIdentity, profile: String) async throws(RainError) -> (name: String, keyCount: Int)

    /// Removes every confirmation key, once the user confirmed it on the prompt (the typed code,
    /// then a touch of a registered key), and audits it.
    /// - Returns: how many keys were removed.
    /// - Throws: the prompt's errors and the touch's (`confirmation_key_timeout`,
    ///   `confirmation_key_missing`).
    func removeConfirmationKeys(caller: CallerIdentity, profile: String) async throws(RainError) -> Int

    /// The registered confirmation keys' names, oldest first.
    func confirmationKeyNames() -> [String]
}

extension PromptPlaceRegistry {
    /// A registry without security keys (the tests' fakes) has none to add.
    public func addConfirmationKey(caller: CallerIdentity, profile: String) async throws(RainError) -> (
        name: String, keyCount: Int
    ) {
        throw RainError(
            .unavailable, "this rainwalletd has no security key support: confirmation keys cannot be added",
            details: .init(reason: "security_key_unavailable"))
    }

    /// A registry without security keys has none to remove.
    public func removeConfirmationKeys(caller: CallerIdentity, profile: String) async throws(RainError) -> Int { 0 }

    /// A registry without security keys has none.
    public func confirmationKeyNames() -> [String] { [] }
}

/// Everything per-app access needs in the device service.
public struct DeviceAccess: Sendable {
    /// The approvals and the decisions.
    public var apps: AppAccess
    /// The security settings' confirmation.
    public var settings: SettingsGuard
    /// Where prompts appear.
    public var prompts: any PromptPlaceRegistry
    /// A file's real path (symbolic links resolved, as `/proc/PID/exe` shows a running program)
    /// and the SHA-256 of its content: the program `rainwallet apps approve` names.
    public var hashFile: @Sendable (String) throws(RainError) -> (path: String, sha256: [UInt8])

    public init(
        apps: AppAccess, settings: SettingsGuard, prompts: any PromptPlaceRegistry,
        hashFile: @escaping @Sendable (String) throws(RainError) -> (path: String, sha256: [UInt8])
    ) {
        self.apps = apps
        self.settings = settings
        self.prompts = prompts
        self.hashFile = hashFile
    }
}

extension DeviceService {
    /// The per-app access calls: open to any app (an unapproved one must be able to ask for its
    /// approval), guarded by the user's confirmation on the prompt instead.
    static func accessRoutes(
        _ access: DeviceAccess?, audit: (any AuditRecorder)?, auditLogger: Logger
    ) -> [AnyRoute<DeviceCall>] {
        @Sendable func required(_ call: DeviceCall) throws(RainError) -> (DeviceAccess, CallerHandle) {
            guard let access, let caller = call.caller else {
                throw RainError.invalid(
                    "this rainwalletd does not enforce per-app access yet: every program of your uid can use every "
                        + "profile, and there is nothing to approve, revoke or confirm", field: "method",
                    reason: "per_app_access_off")
            }
            return (access, caller)
        }
        return [
            AnyRoute(
                Route(
                    Method.appsList, ListAppsRequest.self, ListAppsResponse.self, policy: .read(isOpenToAnyApp: true),
                    .actor { (_, call) throws(RainError) in
                        let (access, _) = try required(call)
                        return ListAppsResponse(apps: Self.entries(access.apps.list()))
                    })),
            AnyRoute(
                Route(
                    Method.appsApprove, ApproveAppRequest.self, ApproveAppResponse.self,
                    policy: .send(isOpenToAnyApp: true, isCancelledWithCaller: true),
                    .actor { (r, call) throws(RainError) in
                        let (access, caller) = try required(call)
                        // Hashing a program may read a large file: not on the concurrency pool.
                        let hashFile = access.hashFile
                        let app = try await DispatchQueue.global().runBlocking { () throws(RainError) in
                            try Self.appIdentity(r, hashFile: hashFile)
                        }
                        try await access.apps.approve(app: app, profile: call.profile, context: caller)
                        let entry = Self.entries(access.apps.list()).first {
                            $0.profile == call.profile && $0.path == app.appPath
                        }
                        return ApproveAppResponse(app: entry)
                    })),
            AnyRoute(
                Route(
                    Method.appsRevoke, RevokeAppRequest.self, RevokeAppResponse.self,
                    policy: .send(isOpenToAnyApp: true, isCancelledWithCaller: true),
                    .actor { (r, call) throws(RainError) in
                        let (access, caller) = try required(call)
                        try await access.apps.revoke(appPath: r.path, profile: call.profile, context: caller)
                        return RevokeAppResponse()
                    })),
            AnyRoute(
                Route(
                    Method.settingsGet, GetSettingsRequest.self, GetSettingsResponse.self, policy: .read(isOpenToAnyApp: true),
                    .actor { (_, call) throws(RainError) in try required(call).0.settings.status() })),
            AnyRoute(
                Route(
                    Method.settingsConfirm, ConfirmSettingsRequest.self, ConfirmSettingsResponse.self,
                    policy: .send(isOpenToAnyApp: true, isCancelledWithCaller: true),
                    .actor { (r, call) throws(RainError) in
                        let (access, caller) = try required(call)
                        let apps = access.apps
                        let identity = try await apps.callerIdentity(caller)
                        var audited = call
                        audited.identity = identity
                        let profile = call.profile
                        // The entry names the keys asked about (never their values), whatever the answer.
                        let asked = AskedSettingKeys()
                        let digest = try await Self.audited(
                            audit, auditLogger, audited, .settingsChanged, detail: asked.detail
                        ) { () async throws(RainError) in
                            try await access.settings.confirm(requestedDigest: r.requestedDigest) {
                                (changes) async throws(RainError) in
                                asked.set(changes.map(\.key))
                                let (action, shortAction) = Self.settingsActions(changes, digest: r.requestedDigest)
                                try await apps.ask(
                                    action: action, shortAction: shortAction, caller: identity, profile: profile)
                            }
                        }
                        return ConfirmSettingsResponse(confirmedDigest: digest)
                    })),
            AnyRoute(
                Route(
                    Method.promptRegister, RegisterPromptRequest.self, RegisterPromptResponse.self,
                    policy: .send(isOpenToAnyApp: true, isCancelledWithCaller: true),
                    .actor { (r, call) throws(RainError) in
                        let (access, caller) = try required(call)
                        let identity = try await access.apps.callerIdentity(caller)
                        let terminal = try await access.prompts.register(
                            terminal: r.terminal, secret: r.secret.isEmpty ? nil : r.secret, caller: identity,
                            profile: call.profile)
                        return RegisterPromptResponse(terminal: terminal)
                    })),
            AnyRoute(
                Route(
                    Method.promptAddKey, AddPromptKeyRequest.self, AddPromptKeyResponse.self,
                    // Another uid the policy lets in must not choose the key that confirms this user's actions.
                    policy: .send(isOpenToAnyApp: true, isDaemonOwnerOnly: true, isCancelledWithCaller: true),
                    .actor { (_, call) throws(RainError) in
                        let (access, caller) = try required(call)
                        let identity = try await access.apps.callerIdentity(caller)
                        let added = try await access.prompts.addConfirmationKey(caller: identity, profile: call.profile)
                        return AddPromptKeyResponse(name: added.name, keyCount: UInt32(clamping: added.keyCount))
                    })),
            AnyRoute(
                Route(
                    Method.promptRemoveKeys, RemovePromptKeysRequest.self, RemovePromptKeysResponse.self,
                    policy: .send(isOpenToAnyApp: true, isDaemonOwnerOnly: true, isCancelledWithCaller: true),
                    .actor { (_, call) throws(RainError) in
                        let (access, caller) = try required(call)
                        let identity = try await access.apps.callerIdentity(caller)
                        let removed = try await access.prompts.removeConfirmationKeys(caller: identity, profile: call.profile)
                        return RemovePromptKeysResponse(removed: UInt32(clamping: removed))
                    })),
            AnyRoute(
                Route(
                    Method.promptGet, GetPromptRequest.self, GetPromptResponse.self, policy: .read(isOpenToAnyApp: true),
                    .actor { (_, call) throws(RainError) in
                        let (access, _) = try required(call)
                        let place = await access.prompts.place()
                        return GetPromptResponse(
                            terminal: place.terminal ?? "", hasDisplay: place.hasDisplay,
                            multiplexer: place.multiplexer?.command ?? "",
                            multiplexerPID: place.multiplexer.map { UInt32(clamping: $0.pid) } ?? 0,
                            confirmationKeys: access.prompts.confirmationKeyNames())
                    })),
        ]
    }

    /// What the settings prompt asks: every change with its values when they fit on the prompt;
    /// otherwise their number and the short digest of the config's settings, which
    /// `rainwallet settings` shows above the same list (the prompt never shows a list cut).
    static func settingsActions(_ changes: [GuardedSettings.Change], digest: String) -> (action: String, short: String) {
        let list = changes.map(\.description).joined(separator: "; ")
        let count = changes.count == 1 ? "1 security setting change" : "\(changes.count) security setting changes"
        return (
            "apply these security settings at the next start of rainwalletd: \(list)",
            "apply \(count) at the next start of rainwalletd, digest \(GetSettingsResponse.shortDigest(digest)): "
                + "`rainwallet settings` lists them under the same digest"
        )
    }

    /// The approvals as wire entries: per profile, the owner first; then the pre-approved apps.
    static func entries(_ list: (approvals: AppApprovals, preApproved: [String: [AppApprovals.Approval]])) -> [AppEntry] {
        var out: [AppEntry] = []
        for (profile, approvals) in list.approvals.profiles.sorted(by: { $0.key < $1.key }) {
            for (i, a) in approvals.enumerated() {
                out.append(
                    AppEntry(
                        profile: profile, path: a.appPath, contentHash: a.contentHash ?? "", approvedAt: a.approvedAt,
                        source: a.source.rawValue, isOwner: i == 0, isScript: CallerIdentity.isScript(appPath: a.appPath)))
            }
        }
        for (profile, approvals) in list.preApproved.sorted(by: { $0.key < $1.key }) {
            for a in approvals {
                out.append(
                    AppEntry(
                        profile: profile, path: a.appPath, contentHash: a.contentHash ?? "", approvedAt: "", source: "policy",
                        isOwner: false, isScript: CallerIdentity.isScript(appPath: a.appPath)))
            }
        }
        return out
    }

    /// The identity `rainwallet apps approve PATH [SCRIPT]` names: the files' content now.
    static func appIdentity(
        _ r: ApproveAppRequest, hashFile: @Sendable (String) throws(RainError) -> (path: String, sha256: [UInt8])
    ) throws(RainError) -> CallerIdentity {
        guard r.path.hasPrefix("/"), r.script.isEmpty || r.script.hasPrefix("/") else {
            throw RainError.invalid("the program and the script must be absolute paths", field: "path")
        }
        let program = try hashFile(r.path)
        var app = CallerIdentity(pid: 0, uid: getuid(), executablePath: program.path, executableSHA256: program.sha256)
        if !r.script.isEmpty {
            let script = try hashFile(r.script)
            app.script = .init(path: script.path, sha256: script.sha256)
        }
        return app
    }
}

/// The keys a settings prompt asked about, for its audit entry.
final class AskedSettingKeys: Sendable {
    private let keys = Mutex<[String]?>(nil)

    func set(_ keys: [String]) { self.keys.withLock { $0 = keys } }

    /// `keys: a, b` (cut to the audit's detail length), or `nothing asked` when the call ended
    /// before the prompt (a stale digest, nothing waiting).
    var detail: String {
        keys.withLock { $0 }.map { SettingsGuard.auditDetail("keys", keys: $0) } ?? "nothing asked"
    }
}
