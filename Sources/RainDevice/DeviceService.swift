import Dispatch
import Foundation
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

/// The version this build reports through GetInfo.
public let daemonVersion = "0.1.0"

/// Serves the device protocol: routes each request to a cheap answer on the loop thread (snapshot
/// reads, GetInfo) or to the profile's session actor (everything that mutates or may block).
public final class DeviceService: ServerHandler {
    struct Entry {
        let runtime: ProfileRuntime
        let session: ProfileSession
    }

    private let config: DaemonConfig
    private let context: DeviceContext
    private let isTestMethodsEnabled: Bool
    private let profiles = Mutex<[String: Entry]>([:])
    private let ownUID = getuid()
    private let logger: Logger
    /// The authority's direct reads (an embedded authority on SQLite), taken once.
    private let directReads: (any DirectAuthorityReads)?

    public init(config: DaemonConfig, context: DeviceContext, isTestMethodsEnabled: Bool = false) {
        self.config = config
        self.context = context
        self.isTestMethodsEnabled = isTestMethodsEnabled
        self.logger = context.logger.child("rpc")
        self.directReads = context.authority.directReads
    }

    /// The profile's entry, created (and its restore started) on first use.
    func entry(_ name: String) -> Entry {
        let (entry, created) = profiles.withLock { p -> (Entry, Bool) in
            if let e = p[name] { return (e, false) }
            let runtime = ProfileRuntime(name: name, settings: config.settings(for: name), clock: context.clock)
            let e = Entry(runtime: runtime, session: ProfileSession(runtime: runtime, context: context))
            p[name] = e
            return (e, true)
        }
        if created {
            let session = entry.session
            Task { await session.restore() }
        }
        return entry
    }

    /// Starts restoring every profile with a stored session (daemon start).
    public func restoreStoredProfiles() async {
        for name in await context.storage.storedProfiles() {
            await entry(name).session.restore()
        }
    }

    /// The session actor of a profile (tests).
    public func session(profile: String) -> ProfileSession { entry(profile).session }

    /// The most outbox entries one ListOutbox returns (the newest).
    static let outboxListLimit = 200

    /// Capabilities reported by GetInfo.
    var capabilities: [String] {
        var c = ["login-code", "session-state", "watch", "logout", "await-restore", "refresh", "account", "wallet", "export", "passkeys", "contacts"]
        if config.authority.isDevOutboxEnabled { c.append("dev-outbox") }
        if isTestMethodsEnabled { c.append("test-methods") }
        return c
    }

    public func handle(_ request: WireRequest, context ctx: RequestContext) -> HandlerDecision {
        let profile = request.profile ?? ProfileName.defaultName
        do {
            try ProfileName.validate(profile)
        } catch {
            return .respond(.failure(error))
        }
        if ctx.peer.uid != ownUID && !config.allowedUIDs.contains(ctx.peer.uid)
            && !config.settings(for: profile).allowedUIDs.contains(ctx.peer.uid)
        {
            return .respond(.failure(RainError(.unauthorized, "uid \(ctx.peer.uid) may not use profile \(profile)")))
        }
        switch request.method {
        case Method.getInfo:
            return inline(request, GetInfoRequest.self) { _ in
                GetInfoResponse(
                    daemonVersion: daemonVersion, protocolVersion: protocolVersion, capabilities: capabilities,
                    maxFrameBytes: UInt32(Frame.defaultMaximumLength))
            }
        case Method.getSessionState:
            let runtime = entry(profile).runtime
            return inline(request, GetSessionStateRequest.self) { _ in runtime.snapshot() }
        case Method.watch:
            do {
                _ = try WatchRequest.decode(request.payload)
            } catch {
                return .respond(.failure(error))
            }
            let responder = ctx.responder
            entry(profile).runtime.addWatcher(connection: ctx.connection, requestID: ctx.requestID) {
                responder.send(streamPayload: $0)
            }
            return .stream
        case Method.sendLoginCode:
            let s = entry(profile).session
            return deferred(request, ctx, SendLoginCodeRequest.self) { (r) throws(RainError) in try await s.sendLoginCode(r.contact) }
        case Method.confirmLoginCode:
            let s = entry(profile).session
            return deferred(request, ctx, ConfirmLoginCodeRequest.self) { (r) throws(RainError) in try await s.confirmLoginCode(r.code) }
        case Method.logout:
            let s = entry(profile).session
            return deferred(request, ctx, LogoutRequest.self) { (_) throws(RainError) in try await s.logout() }
        case Method.awaitRestore:
            let e = entry(profile)
            return deferred(request, ctx, AwaitRestoreRequest.self) { (r) throws(RainError) in
                let policyTimeout = e.runtime.settings.sessionPolicy.restoreTimeout
                let timeout = r.timeoutMilliseconds == 0 ? policyTimeout : .milliseconds(Int64(r.timeoutMilliseconds))
                return await Self.awaitRestore(e, timeout: timeout)
            }
        case Method.configureProfile:
            let s = entry(profile).session
            return deferred(request, ctx, ConfigureProfileRequest.self) { (r) throws(RainError) in
                try await s.configure(passkeyDomain: r.passkeyDomain)
            }
        case Method.passkeyBeginSignUp:
            let s = entry(profile).session
            return deferred(request, ctx, BeginPasskeyRequest.self) { (_) throws(RainError) in
                try await s.beginPasskeySignUp()
            }
        case Method.passkeyBeginLogin:
            let s = entry(profile).session
            return deferred(request, ctx, BeginPasskeyRequest.self) { (_) throws(RainError) in
                try await s.beginPasskeyLogin()
            }
        case Method.passkeyBeginAdd:
            let s = entry(profile).session
            return deferred(request, ctx, BeginPasskeyRequest.self) { (_) throws(RainError) in try await s.beginPasskeyAdd() }
        case Method.passkeyFinish:
            let s = entry(profile).session
            return deferred(request, ctx, FinishPasskeyRequest.self) { (r) throws(RainError) in
                try await s.finishPasskey(ceremonyID: r.ceremonyID, responseJSON: r.responseJSON)
            }
        case Method.passkeyCancel:
            let s = entry(profile).session
            return deferred(request, ctx, CancelPasskeyRequest.self) { (r) throws(RainError) in
                try await s.cancelPasskey(ceremonyID: r.ceremonyID)
            }
        case Method.contactSendVerificationCode:
            let s = entry(profile).session
            return deferred(request, ctx, SendLoginCodeRequest.self) { (r) throws(RainError) in
                try await s.sendContactVerificationCode(r.contact)
            }
        case Method.contactConfirmVerification:
            let s = entry(profile).session
            return deferred(request, ctx, ConfirmContactVerificationRequest.self) { (r) throws(RainError) in
                try await s.confirmContactVerification(r.code)
            }
        case Method.getAccount:
            return sessionRead(request, ctx, profile: profile, GetAccountRequest.self) { (s) throws(RainError) in
                try await s.account()
            } direct: { reads, appID, token, done in
                reads.accountInfo(appID: appID, accessToken: token) { done($0.map(ProfileSession.accountResponse)) }
            }
        case Method.getWallet:
            return sessionRead(request, ctx, profile: profile, GetWalletRequest.self) { (s) throws(RainError) in
                try await s.wallet()
            } direct: { reads, appID, token, done in
                reads.wallet(appID: appID, accessToken: token) { done($0.map(ProfileSession.walletResponse)) }
            }
        case Method.exportRecoveryPhrase:
            // Secrets: the answer goes to the caller only; nothing here logs a payload.
            let s = entry(profile).session
            return deferred(request, ctx, ExportRecoveryPhraseRequest.self) { (_) throws(RainError) in
                try await s.exportRecoveryPhrase()
            }
        case Method.exportPrivateKey:
            let s = entry(profile).session
            return deferred(request, ctx, ExportPrivateKeyRequest.self) { (r) throws(RainError) in
                try await s.exportPrivateKey(chain: r.chain)
            }
        case Method.refreshSession:
            let s = entry(profile).session
            return deferred(request, ctx, RefreshSessionRequest.self) { (_) throws(RainError) in try await s.refreshSession() }
        case Method.listOutbox:
            let authority = context.authority
            let appID = config.settings(for: profile).appID
            return deferred(request, ctx, ListOutboxRequest.self) { (_) throws(RainError) in
                // Only this profile's app, newest `outboxListLimit` entries: a reply stays far below the frame limit.
                let deliveries = try await authority.listOutbox().filter { $0.appID == appID }.suffix(Self.outboxListLimit)
                return ListOutboxResponse(
                    entries: deliveries.map {
                        OutboxEntry(
                            contact: $0.kind == "phone" ? .phone($0.contact) : .email($0.contact), code: $0.code,
                            sentAt: $0.sentAt, appID: $0.appID)
                    })
            }
        case Method.slowEcho where isTestMethodsEnabled:
            let clock = context.clock
            return deferred(request, ctx, SlowEchoRequest.self) { (r) throws(RainError) in
                await clock.sleep(for: .milliseconds(Int64(min(r.delayMilliseconds, 60_000))))
                return SlowEchoResponse(data: r.data)
            }
        default:
            // Echo at most 200 scalars of the name: a method of almost 1 MiB would otherwise make an
            // answer larger than the maximum frame, which clients refuse.
            let scalars = request.method.unicodeScalars
            let shown = scalars.count <= 200 ? request.method : String(String.UnicodeScalarView(scalars.prefix(200))) + "…"
            return .respond(
                .failure(
                    RainError(
                        .invalidArgument,
                        "unknown method \(shown); call /rain.wallet.v1.Daemon/GetInfo to see what this daemon supports",
                        details: .init(reason: "unknown_method"))))
        }
    }

    /// Polls the published state until the restore is done or the timeout passes; a timeout
    /// returns normally with the state still `loading` (DESIGN §6).
    static func awaitRestore(_ e: Entry, timeout: Duration) async -> SessionSnapshot {
        let deadline = ContinuousClock.now + timeout
        while e.runtime.isLoading && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return e.runtime.snapshot()
    }

    private func inline<Req: WireMessage, Resp: WireMessage>(
        _ request: WireRequest, _: Req.Type, _ body: (Req) -> Resp
    ) -> HandlerDecision {
        do {
            let req = try Req.decode(request.payload)
            return .respond(.ok(try body(req).encode()))
        } catch {
            return .respond(.failure(error))
        }
    }

    /// Decodes the request and runs `body` in a task (the session actor, the authority), answering
    /// when it ends.
    private func deferred<Req: WireMessage, Resp: WireMessage>(
        _ request: WireRequest, _ ctx: RequestContext, _: Req.Type,
        _ body: @escaping @Sendable (Req) async throws(RainError) -> Resp
    ) -> HandlerDecision {
        let req: Req
        do {
            req = try Req.decode(request.payload)
        } catch {
            return .respond(.failure(error))
        }
        armDeadline(request, ctx.responder)
        run(req, request.method, ctx.responder, body)
        return .deferred
    }

    /// A read of the session's account or wallet. While the profile has a live access token and the
    /// authority offers direct reads, `direct` answers on the authority's reader thread without the
    /// Swift pool (`DirectAuthorityReads`): a success is the answer. Otherwise, and after any direct
    /// failure, `actor` runs in a task on the profile's session actor, which refreshes a token that
    /// rotated or expired meanwhile, retries what is transient and gives the definitive error.
    private func sessionRead<Req: WireMessage, Resp: WireMessage>(
        _ request: WireRequest, _ ctx: RequestContext, profile: String, _: Req.Type,
        actor: @escaping @Sendable (ProfileSession) async throws(RainError) -> Resp,
        direct: (any DirectAuthorityReads, String, String, @escaping @Sendable (Result<Resp, RainError>) -> Void) -> Void
    ) -> HandlerDecision {
        let e = entry(profile)
        let session = e.session
        let fallback: @Sendable (Req) async throws(RainError) -> Resp = { (_) throws(RainError) in try await actor(session) }
        guard let reads = directReads, let token = e.runtime.liveAccessToken() else {
            return deferred(request, ctx, Req.self, fallback)
        }
        let req: Req
        do {
            req = try Req.decode(request.payload)
        } catch {
            return .respond(.failure(error))
        }
        let responder = ctx.responder
        let method = request.method
        armDeadline(request, responder)
        direct(reads, e.runtime.settings.appID, token) { [self] result in
            switch result {
            case .success(let resp): finish(.success(resp), method, responder)
            case .failure: run(req, method, responder, fallback)
            }
        }
        return .deferred
    }

    /// With a `timeout_ms`, answers RAIN_501 `deadline_exceeded` when it passes first. The work
    /// itself goes on (a sent code cannot be unsent); the server drops whichever answer comes later.
    private func armDeadline(_ request: WireRequest, _ responder: Responder) {
        guard request.timeoutMilliseconds > 0 else { return }
        let clock = context.clock
        let method = request.method
        Task {
            await clock.sleep(for: .milliseconds(Int64(request.timeoutMilliseconds)))
            responder.fail(
                RainError(
                    .provider, "\(method) did not finish within \(request.timeoutMilliseconds) ms",
                    details: .init(reason: "deadline_exceeded")))
        }
    }

    private func run<Req: WireMessage, Resp: WireMessage>(
        _ req: Req, _ method: String, _ responder: Responder, _ body: @escaping @Sendable (Req) async throws(RainError) -> Resp
    ) {
        Task {
            do throws(RainError) {
                finish(.success(try await body(req)), method, responder)
            } catch {
                finish(Result<Resp, RainError>.failure(error), method, responder)
            }
        }
    }

    /// Answers a call and logs its outcome (debug; an internal error also at error level, and the
    /// caller gets a message that points at the log).
    private func finish<Resp: WireMessage>(_ result: Result<Resp, RainError>, _ method: String, _ responder: Responder) {
        do throws(RainError) {
            let resp = try result.get()
            responder.respond(.ok(try resp.encode()))
            logger.debug("call", ["method": method, "status": "ok"])
        } catch {
            // Messages never hold a code, token or key (the secret-scanning tests check this log).
            logger.debug(
                "call",
                [
                    "method": method, "status": error.code.description, "reason": error.details.reason ?? "",
                    "error": error.message,
                ])
            if error.code == .internalError {
                logger.error("call.failed", ["method": method, "error": error.message])
                responder.fail(RainError(.internalError, "internal error in \(method); see the daemon log"))
            } else {
                responder.fail(error)
            }
        }
    }

    public func cancel(connection: ConnectionID, requestID: UInt64) {
        let runtimes = profiles.withLock { $0.values.map(\.runtime) }
        for r in runtimes where r.removeWatcher(connection: connection, requestID: requestID) { break }
    }

    public func connectionClosed(_ connection: ConnectionID) {
        let runtimes = profiles.withLock { $0.values.map(\.runtime) }
        for r in runtimes { r.removeWatchers(connection: connection) }
    }
}
