import RainCore
import RainWire

/// Where a route's handler runs (ARCHITECTURE.md: the loop thread never blocks).
public enum RoutePlacement: String, Sendable, CaseIterable {
    /// Answered at once on the event-loop thread (snapshot reads, GetInfo): must not block.
    case loop
    /// Run in a task (a session actor, an async authority) and answered when it ends.
    case actor
    /// A server stream: the handler registers where messages go and the call stays open.
    case stream
    /// Answered on the loop thread from bytes its owner keeps encoded, when it has them for this
    /// call; otherwise by the route's fallback handler, wherever that runs. The server's quick lane
    /// (`ServerHandler.quickAnswer`) answers these routes without decoding the request or building
    /// the call's context, so every cheap read takes the same fast path.
    case ready
}

/// What a route promises and what the service may do with it, declared once next to the route so a
/// later rule (retries, confirmation, audit, deadlines) reads a flag instead of adding a code path.
public struct RoutePolicy: Sendable, Equatable {
    /// Whether a call may be repeated.
    public enum Kind: Sendable, Equatable {
        /// Reads: safe to retry (the client or the service may repeat it).
        case read
        /// Sends and mutations (a sent code, a confirmed login): never retried.
        case send
    }

    /// Read (retried) or send (never retried).
    public var kind: Kind
    /// The call fails without a logged-in session.
    public var needsSession: Bool
    /// The call exposes or adds a credential or secret: to be confirmed by the user and audited.
    public var isSensitive: Bool
    /// The deadline armed when a request brings no `timeout_ms` of its own; nil arms none.
    public var deadline: Duration?
    /// What the user confirms on the prompt before the call runs, as a sentence part ("export the
    /// recovery phrase"); nil: no confirmation.
    public var userConfirms: String?
    /// Served to any app of an allowed uid, approved for the profile or not: GetInfo, and the
    /// per-app access calls, which the user's confirmation guards instead.
    public var isOpenToAnyApp: Bool
    /// Served only to the daemon's own uid, whatever profile another uid may use: its keys and
    /// its audit log are its user's alone.
    public var isDaemonOwnerOnly: Bool
    /// The call's task is cancelled when its client cancels the call or its connection closes,
    /// so a prompt it shows is withdrawn (RAIN_401 `prompt_withdrawn`) instead of waiting for
    /// nobody. For calls that ask the user before they change anything; a call whose effect must
    /// finish once begun keeps running.
    public var isCancelledWithCaller: Bool
    /// The first approved app of a profile owns it. A read that only shows what any program of the
    /// user may see of a profile nobody owns and that has no session (status, the dev outbox) does
    /// not make its caller the owner: false here. With an owner, or a session, it is approved as
    /// any call.
    public var claimsProfile: Bool

    /// RAIN_202 `not_daemon_owner`: another uid asked for a call served only to the daemon's own.
    public static func notDaemonOwner(uid: UInt32, method: String) -> RainError {
        RainError(
            .unauthorized, "uid \(uid) may not call \(method): only this daemon's own user may",
            details: RainError.Details(reason: "not_daemon_owner"))
    }

    /// A policy.
    /// - Parameters:
    ///   - kind: read (retried) or send (never retried).
    ///   - needsSession: the call fails without a logged-in session.
    ///   - isSensitive: the call exposes or adds a credential or secret.
    ///   - deadline: the default deadline; a request's own `timeout_ms` wins.
    ///   - userConfirms: what the user confirms on the prompt before the call runs.
    ///   - isOpenToAnyApp: served to an app not approved for the profile.
    ///   - isDaemonOwnerOnly: served only to the daemon's own uid.
    ///   - isCancelledWithCaller: the call's task is cancelled with the call or its connection.
    ///   - claimsProfile: the call makes its caller the owner of a profile nobody owns.
    public init(
        kind: Kind, needsSession: Bool = false, isSensitive: Bool = false, deadline: Duration? = nil,
        userConfirms: String? = nil, isOpenToAnyApp: Bool = false, isDaemonOwnerOnly: Bool = false,
        isCancelledWithCaller: Bool = false, claimsProfile: Bool = true
    ) {
        self.claimsProfile = claimsProfile
        self.kind = kind
        self.needsSession = needsSession
        self.isSensitive = isSensitive
        self.deadline = deadline
        self.userConfirms = userConfirms
        self.isOpenToAnyApp = isOpenToAnyApp
        self.isDaemonOwnerOnly = isDaemonOwnerOnly
        self.isCancelledWithCaller = isCancelledWithCaller
    }

    /// A read (retried).
    public static func read(
        needsSession: Bool = false, isSensitive: Bool = false, deadline: Duration? = nil, isOpenToAnyApp: Bool = false,
        isDaemonOwnerOnly: Bool = false, claimsProfile: Bool = true
    ) -> RoutePolicy {
        RoutePolicy(
            kind: .read, needsSession: needsSession, isSensitive: isSensitive, deadline: deadline, isOpenToAnyApp: isOpenToAnyApp,
            isDaemonOwnerOnly: isDaemonOwnerOnly, claimsProfile: claimsProfile)
    }

    /// A send or mutation (never retried).
    public static func send(
        needsSession: Bool = false, isSensitive: Bool = false, deadline: Duration? = nil, userConfirms: String? = nil,
        isOpenToAnyApp: Bool = false, isDaemonOwnerOnly: Bool = false, isCancelledWithCaller: Bool = false
    ) -> RoutePolicy {
        RoutePolicy(
            kind: .send, needsSession: needsSession, isSensitive: isSensitive, deadline: deadline, userConfirms: userConfirms,
            isOpenToAnyApp: isOpenToAnyApp, isDaemonOwnerOnly: isDaemonOwnerOnly,
            isCancelledWithCaller: isCancelledWithCaller)
    }

    /// Whether a failed call may be repeated.
    public var isRetried: Bool { kind == .read }
}

/// The encoded answer of a `.ready` route for a call (an OK response's payload), or nil when its
/// owner has none now.
public typealias ReadyAnswer<Context> = @Sendable (borrowing Context) -> [UInt8]?

/// The handler of a route; its case is the route's placement. `Context` is what the service
/// supplies for each call (for the device: the call's profile).
public enum RouteHandler<Context: Sendable, Request: WireMessage, Response: WireMessage>: Sendable {
    /// Answered on the loop thread: must not block.
    case loop(@Sendable (Request, Context) throws(RainError) -> Response)
    /// Run in a task, answered when it returns.
    case actor(@Sendable (Request, Context) async throws(RainError) -> Response)
    /// A server stream: registers where its messages go through `RequestContext.responder` (loop
    /// thread); a thrown error answers the call instead.
    case stream(@Sendable (Request, Context, RequestContext) throws(RainError) -> Void)
    /// The encoded answer `ready` returns for the call (loop thread, must not block), without
    /// looking at the request: a route whose request has no fields. Nil from `ready`: the
    /// fallback answers, and must answer what `ready` would have (`RoutePlacement.ready`).
    indirect case ready(ReadyAnswer<Context>, fallback: RouteHandler)

    /// Where this handler runs.
    public var placement: RoutePlacement {
        switch self {
        case .loop: return .loop
        case .actor: return .actor
        case .stream: return .stream
        case .ready: return .ready
        }
    }
}

/// One RPC, declared once: its method name, its request and response messages, its policy, and
/// its handler (whose case is its placement). A `RouteTable` decodes, dispatches and answers it.
///
/// ```swift
/// Route(Method.authLogout, LogoutRequest.self, LogoutResponse.self, policy: .send(needsSession: true),
///       .actor { (_, call) throws(RainError) in try await call.session.logout() })
/// ```
public struct Route<Context: Sendable, Request: WireMessage, Response: WireMessage>: Sendable {
    /// The full method name, for example `/rain.wallet.v1.Auth/Logout`.
    public let method: String
    /// Retries, session, sensitivity, deadline.
    public let policy: RoutePolicy
    /// What refuses a request before anyone is asked to confirm it (`RoutePolicy.userConfirms`):
    /// its input and the configuration it needs. Nil: decoding is the only check. The handler
    /// still checks the same: this only moves the refusal ahead of the prompt.
    public let validate: (@Sendable (Request, Context) async throws(RainError) -> Void)?
    /// What the user reads about this request before confirming it, for a route whose prompt
    /// depends on what the request asks (a signature shows what is signed); run after `validate`,
    /// before the prompt. Nil: the prompt shows `RoutePolicy.userConfirms` alone.
    public let describe: (@Sendable (Request, Context) async throws(RainError) -> ConfirmationDetails)?
    /// What answers the call.
    public let handler: RouteHandler<Context, Request, Response>

    /// Declares a route.
    /// - Parameters:
    ///   - method: the full method name.
    ///   - request: the request message (an undecodable payload is answered with RAIN_102).
    ///   - response: the response message.
    ///   - policy: the route's policy.
    ///   - validate: what refuses a request before the user is asked to confirm it.
    ///   - describe: what the user reads about this request on the prompt, when it depends on the
    ///     request.
    ///   - handler: the handler; its case is the placement.
    public init(
        _ method: String, _ request: Request.Type, _ response: Response.Type, policy: RoutePolicy,
        validate: (@Sendable (Request, Context) async throws(RainError) -> Void)? = nil,
        describe: (@Sendable (Request, Context) async throws(RainError) -> ConfirmationDetails)? = nil,
        _ handler: RouteHandler<Context, Request, Response>
    ) {
        self.method = method
        self.policy = policy
        self.validate = validate
        self.describe = describe
        self.handler = handler
    }

    /// Where the handler runs.
    public var placement: RoutePlacement { handler.placement }
}

/// What the prompt shows about one request whose confirmation depends on what it asks: its own
/// action, the lines decoded from it (shown in pages), and a closing line with a fingerprint of
/// what runs once confirmed. The handler gets it back (`fingerprint`) so that what it carries out
/// is what the user confirmed.
public struct ConfirmationDetails: Sendable, Equatable {
    /// The action, replacing the route's `userConfirms`: "sign a transaction on Base (8453)".
    public var action: String
    /// The lines, in order (already labelled; warnings marked by the route).
    public var lines: [String]
    /// The last line before the code: "SHA-256 of what is signed: …".
    public var closing: String
    /// What the audit log records of the request (never a secret): a kind and the fingerprint.
    public var auditDetail: String
    /// The bytes the handler must find again in what it carries out (a SHA-256).
    public var fingerprint: [UInt8]

    /// Details.
    public init(action: String, lines: [String], closing: String, auditDetail: String, fingerprint: [UInt8]) {
        self.action = action
        self.lines = lines
        self.closing = closing
        self.auditDetail = auditDetail
        self.fingerprint = fingerprint
    }
}
