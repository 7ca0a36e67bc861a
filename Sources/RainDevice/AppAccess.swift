import FoundationEssentials
import RainAccess
import RainConfig
import RainCore
import RainSystem
import RainTransport
import Synchronization

/// The connection a call came on, as per-app access sees it.
public struct CallerHandle: Sendable {
    /// The connection.
    public var connection: ConnectionID
    /// Its peer's credentials (uid, pid).
    public var peer: PeerCredentials
    /// The peer's pidfd, taken when the connection was accepted (nil over TCP, or when the kernel
    /// gave none: such a caller cannot be identified).
    public var process: ProcessDescriptor?

    public init(connection: ConnectionID, peer: PeerCredentials, process: ProcessDescriptor? = nil) {
        self.connection = connection
        self.peer = peer
        self.process = process
    }

    /// The handle of a call.
    public init(_ context: RequestContext) {
        self.init(connection: context.connection, peer: context.peer, process: context.peerProcess)
    }
}

/// Who a connection is: RainAccess's reader over the peer's pidfd in the daemon, a fake in tests.
public protocol CallerResolving: Sendable {
    /// The identity of the process behind the call's connection, read once per connection.
    /// - Throws: RAIN_202 when it cannot be read (the process is gone, another pid namespace).
    func identity(of context: CallerHandle) async throws(RainError) -> CallerIdentity
    /// Before a sensitive call: the same process still runs the same executable.
    /// - Throws: RAIN_202 when it does not.
    func recheck(_ identity: CallerIdentity, of context: CallerHandle) async throws(RainError)
}

/// Asks the user (pinentry through RainAccess's prompt coordinator in the daemon, a fake in tests).
public protocol UserConfirming: Sendable {
    /// Whether a prompt can be shown at all (a pinentry and a place: the daemon's display or a
    /// registered terminal).
    var canPrompt: Bool { get }
    /// Returns when the user confirmed.
    /// - Throws: RAIN_401 when dismissed, timed out or answered with a wrong code; RAIN_302 when
    ///   another prompt is showing or the app is locked out after refusals.
    func confirm(_ question: UserQuestion) async throws(RainError)
    /// Asks the user for a secret (a security key's PIN) with `question`'s request on show.
    /// - Returns: the secret, zeroed when released.
    /// - Throws: RAIN_401 when dismissed or timed out; RAIN_302 when another prompt is showing.
    func askSecret(_ question: UserQuestion, secret: SecretQuestion) async throws(RainError) -> SecretBytes
    /// Runs `body` while the prompt shows `status` with `question`'s request, with a Cancel that
    /// stops `body`.
    /// - Throws: `body`'s errors; RAIN_401 when the user chose Cancel.
    func showWhile<T: Sendable>(
        _ question: UserQuestion, status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
    ) async throws(RainError) -> T
}

extension UserConfirming {
    /// A confirmer without a pinentry shows no status: `body` just runs.
    public func showWhile<T: Sendable>(
        _ question: UserQuestion, status: String, _ body: @escaping @Sendable () async throws(RainError) -> T
    ) async throws(RainError) -> T {
        try await body()
    }

    /// Asks the user for a secret (a security key's PIN) on the prompt, which shows the request.
    /// A confirmer without a pinentry (the benchmarks', the tests' fakes) has no secret to give.
    /// - Throws: RAIN_202 `no_prompt`; the prompt's RAIN_401/RAIN_302.
    public func askSecret(_ question: UserQuestion, secret: SecretQuestion) async throws(RainError) -> SecretBytes {
        throw RainError(
            .unauthorized, "\(secret.what) can only be typed on the prompt, and none can be shown here",
            details: RainError.Details(reason: "no_prompt"))
    }
}

/// What a prompt asks: RainAccess's prompt request (the action, the app, the profile).
public typealias UserQuestion = PromptRequest

/// Something per-app access wants in the audit log.
public struct AccessEvent: Sendable, Equatable {
    /// `app_approved`, `app_refused`, `app_revoked`, `prompt_result`, `first_use_trusted`.
    public var event: String
    /// The profile.
    public var profile: String
    /// The app concerned.
    public var app: CallerIdentity?
    /// `ok`, `refused`, a reason.
    public var result: String
    /// More, never a secret.
    public var detail: String?

    public init(event: String, profile: String, app: CallerIdentity?, result: String, detail: String? = nil) {
        self.event = event
        self.profile = profile
        self.app = app
        self.result = result
        self.detail = detail
    }
}

/// Per-app access: each profile belongs to the apps the user approved.
///
/// The first app to use a profile becomes its owner once the user approves it on the prompt
/// (where no prompt can be shown, first use is trusted and audited). Another app gets RAIN_202
/// `app_not_approved` saying how to approve it; a new binary at an approved path is asked about
/// once. Approvals are a `SealedRecord` (`apps.json`). A connection's identity and the profiles it
/// was approved for are cached, so an approved app's calls cost one lock.
public final class AppAccess: Sendable {
    struct Connected {
        var identity: CallerIdentity
        var profiles: Set<String> = []
    }

    struct State {
        // Any change to either moves `generation` on (in place: the observers do not read the old value).
        var approvals: AppApprovals { didSet { generation &+= 1 } }
        var connections: [ConnectionID: Connected] = [:] { didSet { generation &+= 1 } }
        /// Moves on with every change of the approvals or of a connection's decisions.
        var generation: UInt64 = 0

        init(approvals: AppApprovals) { self.approvals = approvals }
    }

    let state: Mutex<State>
    /// Held while the approvals change and are written (never taken on the loop thread).
    private let writer = Mutex(())
    private let store: AppApprovalStore?
    private let resolver: any CallerResolving
    private let confirmer: any UserConfirming
    /// Apps approved by the policy or the confirmed config (`access.apps`; `*` for every profile).
    private let preApproved: [String: [AppApprovals.Approval]]
    private let clock: any RainClock
    private let audit: @Sendable (AccessEvent) async -> Void
    /// The approval prompts on screen, by profile and app.
    private let flights = ApprovalFlights()
    /// The approval prompts of apps not yet approved, limited per uid.
    private let promptLimit: ApprovalPromptLimit
    /// Calls waiting for another call's approval prompt (tests: a call has joined the prompt).
    var approvalWaiters: Int { flights.waiters }

    /// Per-app access over `store` (nil: approvals in memory only, for tests).
    /// - Parameter approvalPrompts: how many approval prompts of apps not yet approved one uid may
    ///   cause per rolling minute.
    /// - Throws: RAIN_102 `record_tampered` when the stored approvals were changed outside rainwalletd.
    public init(
        store: AppApprovalStore?, resolver: any CallerResolving, confirmer: any UserConfirming,
        preApproved: [String: [PreApprovedApp]], clock: any RainClock, approvalPrompts: Int = 3,
        audit: @escaping @Sendable (AccessEvent) async -> Void
    ) throws(RainError) {
        promptLimit = ApprovalPromptLimit(limit: approvalPrompts)
        self.store = store
        self.resolver = resolver
        self.confirmer = confirmer
        self.preApproved = preApproved.mapValues { $0.map(\.approval) }
        self.clock = clock
        self.audit = audit
        state = Mutex(State(approvals: try store?.load() ?? AppApprovals()))
    }

    /// Whether this connection was already approved for `profile` (loop thread: one lock).
    public func isApproved(connection: ConnectionID, profile: String) -> Bool {
        state.withLock { $0.connections[connection]?.profiles.contains(profile) == true }
    }

    /// Moves on whenever an approval or a connection's decision changes: a decision taken at one
    /// generation (`approval(connection:profile:)`) holds while it is the same (the quick lane
    /// keeps it per connection).
    public var generation: UInt64 { state.withLock { $0.generation } }

    /// Whether the connection's app is approved for `profile`, and its identity once read: one look
    /// under the lock, on every call.
    public func approval(connection: ConnectionID, profile: String) -> (isApproved: Bool, identity: CallerIdentity?) {
        state.withLock { s in
            guard let c = s.connections[connection] else { return (false, nil) }
            return (c.profiles.contains(profile), c.identity)
        }
    }

    /// The connection's identity once read.
    public func identity(connection: ConnectionID) -> CallerIdentity? {
        state.withLock { $0.connections[connection]?.identity }
    }

    /// Reads the caller's identity (once per connection) and decides; asks the user when the
    /// profile has no owner yet or the app's binary changed.
    /// - Returns: the caller's identity.
    /// - Throws: RAIN_202 `app_not_approved` (with how to approve), the prompt's RAIN_401/RAIN_302.
    @discardableResult
    public func authorize(profile: String, context: CallerHandle) async throws(RainError) -> CallerIdentity {
        let caller = try await identity(of: context)
        let decision = decide(profile: profile, caller: caller)
        if caller.script != nil, Self.isAskedPerConnection(decision) {
            // Once per connection: a call the user confirms comes through here again before its
            // own prompt, and must not ask about the connection (nor take a prompt of the uid's
            // few a minute) a second time.
            if isApproved(connection: context.connection, profile: profile) { return caller }
            try await askForConnection(profile: profile, caller: caller)
            remember(profile, for: context.connection)
            return caller
        }
        switch decision {
        case .approved:
            break
        case .unowned, .changedBinary:
            if confirmer.canPrompt {
                // An app opening several connections at once is asked once: the others wait for
                // that answer instead of meeting a busy prompt.
                let flight = "\(profile)\u{0}\(caller.appPath)\u{0}\(caller.contentHash)"
                guard let generation = flights.begin(flight) else {
                    try await flights.wait(flight)
                    return try await authorize(profile: profile, context: context)
                }
                do {
                    try await askApproval(profile: profile, caller: caller, decision: decision)
                } catch {
                    flights.end(flight, generation: generation, error: error)
                    throw error
                }
                flights.end(flight, generation: generation, error: nil)
            } else {
                try approve(profile: profile, caller: caller, source: .firstUse, ifStill: decision)
                await audit(
                    AccessEvent(
                        event: "first_use_trusted", profile: profile, app: caller, result: "ok",
                        detail: "no prompt can be shown (access.pinentry and a display or `rainwallet prompt here`)"))
            }
        case .notApproved(let owner):
            await audit(AccessEvent(event: "app_refused", profile: profile, app: caller, result: "app_not_approved"))
            throw Self.notApproved(caller: caller, profile: profile, why: "profile \(profile) belongs to \(owner)")
        case .changedBinaryRefused:
            // Audited each time (repeated refusals are aggregated by the log), like any refusal.
            await audit(
                AccessEvent(
                    event: "app_refused", profile: profile, app: caller, result: "app_not_approved",
                    detail: "this version was refused on the prompt"))
            throw Self.notApproved(
                caller: caller, profile: profile, why: "this version of it was refused on the prompt")
        case .unapprovable(let reasons):
            await audit(
                AccessEvent(
                    event: "app_refused", profile: profile, app: caller, result: "unapprovable",
                    detail: reasons.joined(separator: ", ")))
            throw RainError(
                .unauthorized,
                """
                \(caller.appPath) (pid \(caller.pid)) cannot use a wallet profile while \(reasons.joined(separator: ", ")): \
                run it without them
                """, details: RainError.Details(reason: "app_not_approved"))
        }
        remember(profile, for: context.connection)
        return caller
    }

    /// Remembers that `connection` may use `profile`, for a bounded number of profiles per
    /// connection: a caller inventing names cannot grow the daemon (past the bound, each call
    /// decides again).
    private func remember(_ profile: String, for connection: ConnectionID) {
        state.withLock { s in
            if s.connections[connection]?.profiles.count ?? Self.maximumProfilesPerConnection
                < Self.maximumProfilesPerConnection
            {
                s.connections[connection]?.profiles.insert(profile)
            }
        }
    }

    /// A script's identity is its interpreter and the path its command line claims, which the
    /// process can rewrite (a relative name resolved against a directory it chose, a command line
    /// changed through `/proc/self/mem`): it cannot be proven from outside. Only root's policy
    /// vouches for one; otherwise the user is asked on each connection, nothing is remembered, and
    /// where no prompt can be shown it is refused rather than trusted on first use.
    static func isAskedPerConnection(_ decision: AppApprovals.Decision) -> Bool {
        switch decision {
        case .approved(let source): source != .policy
        case .unowned, .changedBinary: true
        case .notApproved, .changedBinaryRefused, .unapprovable: false
        }
    }

    /// Asks the user to let a script use `profile` on this connection only, auditing the answer.
    /// - Throws: RAIN_202 `no_prompt` when no prompt can be shown; the prompt's errors.
    private func askForConnection(profile: String, caller: CallerIdentity) async throws(RainError) {
        let detail = "script, not verifiable: this connection only"
        guard confirmer.canPrompt else {
            await audit(AccessEvent(event: "app_refused", profile: profile, app: caller, result: "no_prompt", detail: detail))
            throw RainError(
                .unauthorized,
                """
                \(caller.appPath) is a script: what it runs cannot be verified from outside, so the user is asked on \
                each connection, and no prompt can be shown: set access.pinentry and run rainwalletd with a display, \
                or register a terminal with `rainwallet prompt here`, or have root's policy pre-approve it
                """, details: RainError.Details(reason: "no_prompt"))
        }
        try await takePromptSlot(profile: profile, caller: caller)
        try await confirmAudited(
            UserQuestion(
                action: "let the script \(caller.appPath) use the wallet profile on this connection", caller: caller,
                profile: profile),
            refused: { AccessEvent(event: "app_refused", profile: profile, app: caller, result: $0, detail: detail) },
            confirmed: AccessEvent(event: "app_approved", profile: profile, app: caller, result: "ok", detail: detail))
    }

    /// Asks `question` on the prompt and audits the answer: `refused(reason)` when the user did not
    /// confirm (the prompt's reason), `confirmed` when they did.
    private func confirmAudited(
        _ question: UserQuestion, refused: (String) -> AccessEvent, confirmed: AccessEvent
    ) async throws(RainError) {
        do {
            try await confirmer.confirm(question)
        } catch {
            await audit(refused(error.details.reason ?? "\(error.code)"))
            throw error
        }
        await audit(confirmed)
    }

    /// Asks the user to approve `caller` for `profile` (its first app, or a new binary of one), and
    /// records the answer.
    private func askApproval(profile: String, caller: CallerIdentity, decision: AppApprovals.Decision) async throws(RainError) {
        let isChange = decision == .changedBinary
        let action =
            isChange
            ? "let a new version of \(caller.appPath) (the file changed on disk) use the wallet profile"
            : "let \(caller.appPath) use the wallet profile (it becomes the profile's app)"
        try await takePromptSlot(profile: profile, caller: caller)
        do {
            try await confirmer.confirm(UserQuestion(action: action, caller: caller, profile: profile))
        } catch {
            if isChange { try update { $0.refuseChangedBinary(profile: profile, caller: caller) } }
            await audit(
                AccessEvent(
                    event: "app_refused", profile: profile, app: caller, result: error.details.reason ?? "\(error.code)"))
            throw error
        }
        try approve(profile: profile, caller: caller, source: .prompt, ifStill: decision)
        await audit(
            AccessEvent(
                event: "app_approved", profile: profile, app: caller, result: "ok", detail: isChange ? "changed binary" : nil))
    }

    /// RAIN_302 `prompt_rate_limited`: the uid's apps not yet approved asked for `limit` approval
    /// prompts within the window; `retryAfterMilliseconds` says when the oldest leaves it.
    /// Takes one of the prompts a minute that programs of `caller`'s uid not yet approved may ask
    /// for. Counted when the prompt is asked for, whatever its answer: each one holds the only
    /// prompt, for a minute when nobody answers.
    /// - Throws: RAIN_302 `prompt_rate_limited` (audited) when none is left.
    private func takePromptSlot(profile: String, caller: CallerIdentity) async throws(RainError) {
        if let wait = promptLimit.take(uid: caller.uid, now: clock.monotonic) {
            await audit(AccessEvent(event: "app_refused", profile: profile, app: caller, result: PromptReason.rateLimited))
            throw Self.rateLimited(after: wait, limit: promptLimit, uid: caller.uid)
        }
    }

    static func rateLimited(after wait: Duration, limit: ApprovalPromptLimit, uid: UInt32) -> RainError {
        let milliseconds = UInt64(max(0, wait.milliseconds))
        return RainError(
            .refused,
            """
            programs of uid \(uid) not yet approved asked for \(limit.limit) approval prompts within \
            \(limit.window.components.seconds) s; no new one for \((milliseconds + 999) / 1000) s \
            (approve a program ahead with `rainwallet apps approve`)
            """,
            details: RainError.Details(reason: PromptReason.rateLimited, retryAfterMilliseconds: milliseconds))
    }

    /// Before a call that moves money or adds a credential: the app is approved, the call passes
    /// `check`, the app is still the same process and executable, and the user confirms `action`
    /// on the prompt.
    /// - Parameter check: what refuses the call without asking the user (its input, a missing
    ///   session); run once the app is approved, so an app that is not learns nothing from it.
    /// - Returns: the caller's identity.
    /// - Throws: `check`'s error; RAIN_202 `no_prompt` when no prompt can be shown; the prompt's errors.
    @discardableResult
    public func confirmSensitive(
        action: String, profile: String, context: CallerHandle,
        check: () async throws(RainError) -> Void = {}
    ) async throws(RainError) -> CallerIdentity {
        let caller = try await authorize(profile: profile, context: context)
        try await check()
        try await resolver.recheck(caller, of: context)
        try await ask(action: action, caller: caller, profile: profile)
        // The prompt may have stayed up for a minute: still the process the user confirmed for.
        try await resolver.recheck(caller, of: context)
        return caller
    }

    /// As `confirmSensitive`, for a request whose prompt depends on what it asks (a signature):
    /// after the checks, `describe` says what the prompt shows, in pages, and the audit log
    /// records its `auditDetail` with the user's answer.
    /// - Returns: the caller and what the user confirmed.
    /// - Throws: as `confirmSensitive`; what `describe` throws.
    public func confirmDescribed(
        action: String, profile: String, context: CallerHandle,
        describe: () async throws(RainError) -> ConfirmationDetails
    ) async throws(RainError) -> (CallerIdentity, ConfirmationDetails) {
        let caller = try await authorize(profile: profile, context: context)
        let details = try await describe()
        try await resolver.recheck(caller, of: context)
        try await ask(details, caller: caller, profile: profile)
        try await resolver.recheck(caller, of: context)
        return (caller, details)
    }

    /// Asks the user to confirm a described request (`ConfirmationDetails`) by `caller`, auditing
    /// the answer with its `auditDetail`.
    /// - Throws: RAIN_202 `no_prompt` when no prompt can be shown; the prompt's errors.
    public func ask(_ details: ConfirmationDetails, caller: CallerIdentity, profile: String) async throws(RainError) {
        try await ask(
            action: details.action, caller: caller, profile: profile, auditDetail: details.auditDetail,
            details: PromptDetails(lines: details.lines, closing: details.closing))
    }

    /// Asks the user to confirm `action` by `caller`, auditing the result (with `shortAction` when
    /// there is one: the settings prompt's long form holds the settings' values).
    /// - Parameter shortAction: the same action phrased shorter, shown when `action` does not fit
    ///   on the prompt (`PromptRequest.shortAction`).
    /// - Throws: RAIN_202 `no_prompt` when no prompt can be shown; the prompt's errors.
    public func ask(
        action: String, shortAction: String? = nil, caller: CallerIdentity, profile: String, auditDetail: String? = nil,
        details: PromptDetails? = nil
    ) async throws(RainError) {
        let audited = auditDetail ?? shortAction ?? action
        guard confirmer.canPrompt else {
            await audit(AccessEvent(event: "prompt_result", profile: profile, app: caller, result: "no_prompt", detail: audited))
            throw RainError(
                .unauthorized,
                """
                to \(action) the user must confirm it, and no prompt can be shown: set access.pinentry and run \
                rainwalletd with a display, or register a terminal with `rainwallet prompt here`
                """, details: RainError.Details(reason: "no_prompt"))
        }
        try await confirmAudited(
            UserQuestion(action: action, caller: caller, profile: profile, shortAction: shortAction, details: details),
            refused: { AccessEvent(event: "prompt_result", profile: profile, app: caller, result: $0, detail: audited) },
            confirmed: AccessEvent(event: "prompt_result", profile: profile, app: caller, result: "confirmed", detail: audited))
    }

    /// Asks the user for a secret (a security key's PIN) for `action` by `caller`, auditing
    /// whether it was given (never what was typed).
    /// - Throws: RAIN_202 `no_prompt` when no prompt can be shown; the prompt's errors.
    public func askSecret(
        action: String, caller: CallerIdentity, profile: String, question: SecretQuestion
    ) async throws(RainError) -> SecretBytes {
        let detail = "\(question.what) to \(action)"
        guard confirmer.canPrompt else {
            await audit(AccessEvent(event: "prompt_result", profile: profile, app: caller, result: "no_prompt", detail: detail))
            throw RainError(
                .unauthorized,
                """
                to \(action) the user must type \(question.what), and no prompt can be shown: set access.pinentry and \
                run rainwalletd with a display, or register a terminal with `rainwallet prompt here`
                """, details: RainError.Details(reason: "no_prompt"))
        }
        do {
            let secret = try await confirmer.askSecret(
                UserQuestion(action: action, caller: caller, profile: profile), secret: question)
            await audit(AccessEvent(event: "prompt_result", profile: profile, app: caller, result: "entered", detail: detail))
            return secret
        } catch {
            await audit(
                AccessEvent(
                    event: "prompt_result", profile: profile, app: caller, result: error.details.reason ?? "\(error.code)",
                    detail: detail))
            throw error
        }
    }

    /// Runs `body` while the prompt shows `status` (what an authenticator waits for) with the
    /// request of `caller`; without a prompt, `body` just runs.
    /// - Throws: `body`'s errors; RAIN_401 when the user chose Cancel on the status.
    public func showWhile<T: Sendable>(
        status: String, action: String, caller: CallerIdentity, profile: String,
        _ body: @escaping @Sendable () async throws(RainError) -> T
    ) async throws(RainError) -> T {
        guard confirmer.canPrompt else { return try await body() }
        return try await confirmer.showWhile(
            UserQuestion(action: action, caller: caller, profile: profile), status: status, body)
    }

    /// The approvals, and the pre-approved apps.
    public func list() -> (approvals: AppApprovals, preApproved: [String: [AppApprovals.Approval]]) {
        (state.withLock { $0.approvals }, preApproved)
    }

    /// `rainwallet apps approve`: approves `app` (path and content hash, read by the daemon) for
    /// `profile` once the user confirms it on the prompt. The caller needs no approval: the
    /// prompt is the control.
    public func approve(app: CallerIdentity, profile: String, context: CallerHandle) async throws(RainError) {
        if app.script != nil {
            // Nothing about a script can be approved ahead: it is asked on each of its connections.
            throw RainError.invalid(
                """
                \(app.appPath) is a script, which cannot be verified from outside: it is not approved ahead, the user \
                is asked on each of its connections (root's policy may pre-approve it)
                """, field: "script", reason: "script_not_verifiable")
        }
        let caller = try await identity(of: context)
        // An unapproved program asking counts like one asking for itself: copies of it cannot keep
        // the only prompt busy this way either.
        if case .approved = decide(profile: profile, caller: caller) {
        } else {
            try await takePromptSlot(profile: profile, caller: caller)
        }
        try await ask(
            action: "approve \(app.appPath) (\(app.hashDescription)) for the wallet profile", caller: caller, profile: profile)
        try update { $0.approve(profile: profile, caller: app, source: .prompt, at: clock.now) }
        forgetConnections(profile: profile)
        await audit(
            AccessEvent(
                event: "app_approved", profile: profile, app: app, result: "ok",
                detail: "asked by \(caller.appPath) pid \(caller.pid)"))
    }

    /// `rainwallet apps revoke`: removes `appPath`'s approval of `profile` once the user confirms.
    /// - Throws: RAIN_102 when it has none.
    public func revoke(appPath: String, profile: String, context: CallerHandle) async throws(RainError) {
        guard state.withLock({ $0.approvals.profiles[profile]?.contains { $0.appPath == appPath } }) == true else {
            throw RainError.invalid(
                "\(appPath) is not approved for profile \(profile) (see `rainwallet apps list`)", field: "app")
        }
        let caller = try await identity(of: context)
        try await ask(action: "revoke \(appPath)'s access to the wallet profile", caller: caller, profile: profile)
        try update { $0.revoke(profile: profile, appPath: appPath) }
        forgetConnections(profile: profile)
        await audit(AccessEvent(event: "app_revoked", profile: profile, app: nil, result: "ok", detail: appPath))
    }

    /// Drops the connection's identity.
    public func connectionClosed(_ connection: ConnectionID) {
        _ = state.withLock { $0.connections.removeValue(forKey: connection) }
    }

    /// The caller's identity (read once per connection), approved or not.
    public func callerIdentity(_ context: CallerHandle) async throws(RainError) -> CallerIdentity {
        try await identity(of: context)
    }

    /// The caller's identity when nobody owns `profile` (no approval, no policy entry) and the
    /// caller could be approved; nil otherwise. A read that claims nothing is answered then
    /// without making the caller the owner (`RoutePolicy.claimsProfile`).
    public func unownedReader(profile: String, context: CallerHandle) async throws(RainError) -> CallerIdentity? {
        let caller = try await identity(of: context)
        guard case .unowned = decide(profile: profile, caller: caller) else { return nil }
        return caller
    }

    // MARK: -

    private func identity(of context: CallerHandle) async throws(RainError) -> CallerIdentity {
        if let known = identity(connection: context.connection) { return known }
        let caller = try await resolver.identity(of: context)
        state.withLock { s in
            if s.connections[context.connection] == nil { s.connections[context.connection] = Connected(identity: caller) }
        }
        return caller
    }

    /// Apps pre-approved for every profile (`*`) are let in but own nothing; apps pre-approved for
    /// one profile own it.
    func decide(profile: String, caller: CallerIdentity) -> AppApprovals.Decision {
        decide(profile: profile, caller: caller, in: state.withLock { $0.approvals })
    }

    private func decide(profile: String, caller: CallerIdentity, in approvals: AppApprovals) -> AppApprovals.Decision {
        if caller.unapprovable.isEmpty, (preApproved["*"] ?? []).contains(where: { $0.matches(caller) }) {
            return .approved(.policy)
        }
        return approvals.decide(profile: profile, caller: caller, policy: preApproved[profile] ?? [])
    }

    /// Approves when the decision is still `expected` (two first callers racing: only one owns).
    private func approve(
        profile: String, caller: CallerIdentity, source: AppApprovals.Source, ifStill expected: AppApprovals.Decision
    ) throws(RainError) {
        let time = clock.now
        try update { (approvals) throws(RainError) in
            let now = decide(profile: profile, caller: caller, in: approvals)
            if case .approved = now { return }
            guard now == expected else {
                throw Self.notApproved(caller: caller, profile: profile, why: "another app was approved for it meanwhile")
            }
            approvals.approve(profile: profile, caller: caller, source: source, at: time)
        }
    }

    /// Changes the approvals and saves them; nothing changes when the save fails. Changes are
    /// serialized by `writer`, and the file is written outside `state`'s lock, which the loop
    /// thread takes on every call (`isApproved`): no fsync under it.
    func update(_ change: (inout AppApprovals) throws(RainError) -> Void) throws(RainError) {
        try writer.withLock { _ throws(RainError) in
            var next = state.withLock { $0.approvals }
            try change(&next)
            try store?.save(next)
            state.withLock { $0.approvals = next }
        }
    }

    /// After an approval or a revocation every connection decides again.
    private func forgetConnections(profile: String) {
        state.withLock { s in
            for key in s.connections.keys { s.connections[key]?.profiles.remove(profile) }
        }
    }

    /// The profiles one connection's approvals are remembered for.
    static let maximumProfilesPerConnection = 64

    static func notApproved(caller: CallerIdentity, profile: String, why: String) -> RainError {
        RainError(
            .unauthorized,
            """
            \(caller.appPath) (pid \(caller.pid)) is not approved for profile \(profile): \(why). To approve it, run \
            `rainwallet apps approve --profile \(profile) \(caller.appPath)` and confirm on the prompt
            """, details: RainError.Details(reason: "app_not_approved"))
    }
}

/// The approval prompts in progress, by profile and app (path and content): the first call of an
/// app asks, the app's other calls meanwhile wait for that answer and share it (a refusal included),
/// so an app that opens several connections at once is asked once.
final class ApprovalFlights: Sendable {
    private struct Flight {
        var generation: Int
        var isRunning: Bool
        var error: RainError?
    }

    private struct State {
        var flights: [String: Flight] = [:]
        var generation = 0
        /// Calls in `wait` for a running flight.
        var waiters = 0
    }

    private let state = Mutex(State())
    /// How often a waiting call looks whether the answer came.
    private static let pollInterval: Duration = .milliseconds(20)
    /// Finished flights kept for late waiters; past this many, they are dropped.
    private static let maximumKept = 256

    /// How many calls are waiting for a running flight.
    var waiters: Int { state.withLock { $0.waiters } }

    /// Starts a flight for `key`; nil when one is running (wait for it).
    func begin(_ key: String) -> Int? {
        state.withLock { s in
            if s.flights[key]?.isRunning == true { return nil }
            if s.flights.count >= Self.maximumKept { s.flights = s.flights.filter { $0.value.isRunning } }
            s.generation += 1
            s.flights[key] = Flight(generation: s.generation, isRunning: true, error: nil)
            return s.generation
        }
    }

    /// Ends the flight `generation` of `key` with its outcome.
    func end(_ key: String, generation: Int, error: RainError?) {
        state.withLock { s in
            guard s.flights[key]?.generation == generation else { return }
            s.flights[key] = Flight(generation: generation, isRunning: false, error: error)
        }
    }

    /// Waits until the running flight of `key` ends.
    /// - Throws: its error (a refusal is everyone's); RAIN_401 `prompt_withdrawn` when this call
    ///   is cancelled meanwhile.
    func wait(_ key: String) async throws(RainError) {
        guard let generation = state.withLock({ $0.flights[key]?.generation }) else { return }
        state.withLock { $0.waiters += 1 }
        defer { state.withLock { $0.waiters -= 1 } }
        while true {
            let flight = state.withLock { $0.flights[key] }
            guard let flight, flight.generation == generation, flight.isRunning else {
                if let flight, flight.generation == generation, let error = flight.error { throw error }
                return
            }
            do {
                try await Task.sleep(for: Self.pollInterval)
            } catch {
                throw RainError(
                    .userCancelled, "the call was cancelled while its app's approval was being asked; nothing was done",
                    details: RainError.Details(reason: "prompt_withdrawn"))
            }
        }
    }
}
