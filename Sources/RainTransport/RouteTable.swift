import Dispatch
import RainCore
import RainWire
import Synchronization

/// A route with its message types erased, as a `RouteTable` holds it.
public final class AnyRoute<Context: Sendable>: Sendable {
    /// The full method name.
    public let method: String
    /// Where the handler runs.
    public let placement: RoutePlacement
    /// Retries, session, sensitivity, deadline.
    public let policy: RoutePolicy
    /// The request message type.
    public let requestType: any WireMessage.Type
    /// The response message type.
    public let responseType: any WireMessage.Type
    /// The route's `validate` over an encoded request (decoded first: RAIN_102 when it does not
    /// decode); nil when the route declares none.
    public let validate: (@Sendable ([UInt8], Context) async throws(RainError) -> Void)?
    /// The route's `describe` over an encoded request; nil when the route declares none.
    public let describe: (@Sendable ([UInt8], Context) async throws(RainError) -> ConfirmationDetails)?
    /// The encoded answer of a route placed `.ready`, when its owner has one for the call; nil
    /// for every other placement.
    public let ready: ReadyAnswer<Context>?
    /// The method name's UTF-8 bytes, for the quick lane's comparison with a request's.
    public let methodUTF8: [UInt8]
    @usableFromInline let dispatch: @Sendable (WireRequest, RequestContext, Context, RouteRunner) -> HandlerDecision

    /// Erases a route's message types.
    /// Inlinable, so each declaration's dispatch is specialized for its messages where the table is
    /// built: no generic metadata is looked up per call.
    @inlinable
    public init<Request, Response>(_ route: Route<Context, Request, Response>) {
        method = route.method
        placement = route.placement
        policy = route.policy
        requestType = Request.self
        responseType = Response.self
        if let check = route.validate {
            validate = { (payload, call) async throws(RainError) in try await check(try Request.decode(payload), call) }
        } else {
            validate = nil
        }
        if let details = route.describe {
            describe = { (payload, call) async throws(RainError) in try await details(try Request.decode(payload), call) }
        } else {
            describe = nil
        }
        if case .ready(let answer, _) = route.handler { ready = answer } else { ready = nil }
        methodUTF8 = Array(route.method.utf8)
        dispatch = { request, context, call, runner in route.dispatch(request, context, call, runner) }
    }
}

/// Collects route declarations; `if` includes a route only where it is enabled.
@resultBuilder
public enum RouteTableBuilder<Context: Sendable> {
    @inlinable
    public static func buildExpression<Request, Response>(_ route: Route<Context, Request, Response>) -> [AnyRoute<Context>] {
        [AnyRoute(route)]
    }
    public static func buildExpression(_ route: AnyRoute<Context>) -> [AnyRoute<Context>] { [route] }
    public static func buildExpression(_ routes: [AnyRoute<Context>]) -> [AnyRoute<Context>] { routes }
    public static func buildBlock(_ parts: [AnyRoute<Context>]...) -> [AnyRoute<Context>] { parts.flatMap { $0 } }
    public static func buildOptional(_ part: [AnyRoute<Context>]?) -> [AnyRoute<Context>] { part ?? [] }
    public static func buildEither(first: [AnyRoute<Context>]) -> [AnyRoute<Context>] { first }
    public static func buildEither(second: [AnyRoute<Context>]) -> [AnyRoute<Context>] { second }
    public static func buildArray(_ parts: [[AnyRoute<Context>]]) -> [AnyRoute<Context>] { parts.flatMap { $0 } }
}

/// The answer to a method no route declares: RAIN_102 `unknown_method`, naming the method (at most
/// `maximumEchoedScalars` of it) and the info call that lists what the service supports.
public struct UnknownMethodAnswer: Sendable {
    /// The method that lists capabilities, for example `/rain.wallet.v1.Daemon/GetInfo`.
    public var infoMethod: String
    /// What the message calls the service ("daemon", "authority").
    public var serviceName: String
    /// The most scalars of the method name echoed back. A method of almost 1 MiB would otherwise
    /// make an answer larger than the maximum frame, which clients refuse.
    public var maximumEchoedScalars: Int

    /// The answer.
    public init(infoMethod: String, serviceName: String, maximumEchoedScalars: Int = 200) {
        self.infoMethod = infoMethod
        self.serviceName = serviceName
        self.maximumEchoedScalars = maximumEchoedScalars
    }

    /// The error for `method`.
    public func error(for method: String) -> RainError {
        let scalars = method.unicodeScalars
        let shown =
            scalars.count <= maximumEchoedScalars
            ? method : String(String.UnicodeScalarView(scalars.prefix(maximumEchoedScalars))) + "…"
        return RainError(
            .invalidArgument, "unknown method \(shown); call \(infoMethod) to see what this \(serviceName) supports",
            details: .init(reason: "unknown_method"))
    }
}

/// How a table logs the outcome of a call answered from a task (`.actor`). Loop and
/// stream routes answer at once and log nothing. Nothing from a payload is ever logged.
public enum RouteOutcomeLog: Sendable {
    /// Every call at debug level (`call`: method, status, reason, error message); an internal error
    /// (RAIN_502) also at error level (`call.failed`), and the caller gets a generic message that
    /// points at the log instead of the internal one. Messages never hold a secret.
    case everyCall(Logger)
    /// Failures only (`call.failed`: method, code, reason), at error level for an internal error and
    /// info otherwise; every error goes on the wire as it is.
    case failures(Logger)
}

/// Routes declared once, dispatched by method name: decodes the payload (RAIN_102 when undecodable),
/// answers an unknown method, arms the deadline, runs the handler where its placement says and
/// answers and logs the outcome. The service supplies a `Context` for each call.
///
/// Dispatch runs on the loop thread and never blocks. The first route of a method wins; a method
/// declared twice is listed in `duplicateMethods` (a test keeps it empty).
public struct RouteTable<Context: Sendable>: Sendable {
    /// The routes in declaration order (the first of each method).
    public let routes: [AnyRoute<Context>]
    /// Methods declared more than once (only the first declaration is served).
    public let duplicateMethods: [String]
    @usableFromInline let byMethod: [String: AnyRoute<Context>]
    /// The routes by the UTF-8 length of their method, for `handle`: a name is found by comparing it with
    /// the one or two names of its length, cheaper per call than hashing it (measured with
    /// `scripts/bench-instructions`).
    @usableFromInline let byLength: [[AnyRoute<Context>]]
    /// The routes placed `.ready`, by the UTF-8 length of their method (`readyRoute(method:)`).
    let readyByLength: [[AnyRoute<Context>]]
    @usableFromInline let runner: RouteRunner
    @usableFromInline let unknownMethod: UnknownMethodAnswer

    /// Builds a table.
    /// - Parameters:
    ///   - deadlineClock: arms deadlines (a request's `timeout_ms`, else the route's default); nil
    ///     arms none (a service whose clients keep their own deadlines).
    ///   - outcomeLog: how outcomes are logged and internal errors answered.
    ///   - unknownMethod: the answer to a method without a route.
    ///   - callMetrics: counts each answered call by method and outcome and times it; nil counts
    ///     nothing (and reads no clock).
    ///   - routes: the declarations.
    public init(
        deadlineClock: (any RainClock)?, outcomeLog: RouteOutcomeLog, unknownMethod: UnknownMethodAnswer,
        callMetrics: CallMetrics? = nil, @RouteTableBuilder<Context> routes: () -> [AnyRoute<Context>]
    ) {
        self.init(
            deadlineClock: deadlineClock, outcomeLog: outcomeLog, unknownMethod: unknownMethod, callMetrics: callMetrics,
            routes: routes())
    }

    /// Builds a table from erased routes.
    public init(
        deadlineClock: (any RainClock)?, outcomeLog: RouteOutcomeLog, unknownMethod: UnknownMethodAnswer,
        callMetrics: CallMetrics? = nil, routes declared: [AnyRoute<Context>]
    ) {
        var byMethod: [String: AnyRoute<Context>] = [:]
        var routes: [AnyRoute<Context>] = []
        var duplicates: [String] = []
        for route in declared {
            if byMethod[route.method] == nil {
                byMethod[route.method] = route
                routes.append(route)
            } else {
                duplicates.append(route.method)
            }
        }
        self.byMethod = byMethod
        var byLength: [[AnyRoute<Context>]] = Array(repeating: [], count: (routes.map(\.method.utf8.count).max() ?? 0) + 1)
        for route in routes { byLength[route.method.utf8.count].append(route) }
        self.byLength = byLength
        self.readyByLength = byLength.map { $0.filter { $0.ready != nil } }
        self.routes = routes
        self.duplicateMethods = duplicates
        self.runner = RouteRunner(clock: deadlineClock, outcomeLog: outcomeLog, callMetrics: callMetrics)
        self.unknownMethod = unknownMethod
    }

    /// The methods served, in declaration order.
    public var methods: [String] { routes.map(\.method) }

    /// The route of `method`, or nil.
    @inlinable
    public func route(for method: String) -> AnyRoute<Context>? {
        // By length, then by comparison: cheaper than hashing the name (a method read from the wire
        // is most often the very string the route holds, which compares at once).
        let length = method.utf8.count
        guard length < byLength.count else { return nil }
        for route in byLength[length] where route.method == method { return route }
        return nil
    }

    /// The route placed `.ready` whose method is `method`'s bytes, or nil: the quick lane's lookup,
    /// on bytes read from a frame, without making a string of them.
    public func readyRoute(method: UnsafeBufferPointer<UInt8>) -> AnyRoute<Context>? {
        guard method.count < readyByLength.count else { return nil }
        for route in readyByLength[method.count]
        where route.methodUTF8.withUnsafeBufferPointer({ QuickRequest.equals($0, method) }) {
            return route
        }
        return nil
    }

    /// The declared policy of `method`, or nil for an unknown method.
    public func policy(for method: String) -> RoutePolicy? { byMethod[method]?.policy }

    /// The client cancelled a call (loop thread): its deadline is dropped with its timer, and
    /// its task is cancelled when its route says so (`RoutePolicy.isCancelledWithCaller`).
    public func callCancelled(connection: ConnectionID, requestID: UInt64) {
        runner.cancelDeadline(connection: connection, requestID: requestID)
        runner.cancelTask(connection: connection, requestID: requestID)
    }

    /// A connection closed (loop thread): the deadlines of its calls are dropped with their
    /// timers, and the tasks of those cancelled with their caller are cancelled.
    public func connectionClosed(_ connection: ConnectionID) {
        runner.cancelDeadlines(connection: connection)
        runner.cancelTasks(connection: connection)
    }

    /// The number of tasks running calls that end with their caller (tests: none once they ended).
    package var cancellableTaskCount: Int { runner.cancellableTaskCount }

    /// The number of deadlines armed for calls in flight (tests: none once every call ended).
    package var armedDeadlineCount: Int { runner.armedDeadlineCount }

    /// Dispatches one request (loop thread; never blocks).
    /// - Parameters:
    ///   - request: the request.
    ///   - context: the server's context of the call (its responder).
    ///   - call: what the service supplies to the handler.
    @inlinable
    public func handle(_ request: WireRequest, context: RequestContext, call: Context) -> HandlerDecision {
        let length = request.method.utf8.count
        if length < byLength.count {
            for route in byLength[length] where route.method == request.method {
                return route.dispatch(request, context, call, runner)
            }
        }
        // Counted under one name: the methods a caller makes up must not grow the metrics.
        runner.callMetrics?.record(method: "unknown", code: RainError.Code.invalidArgument.rawValue, duration: .zero)
        return .respond(.failure(unknownMethod.error(for: request.method)))
    }

    /// Dispatches `request` to `route`, found already with `route(for:)` for its method.
    @inlinable
    public func handle(_ request: WireRequest, route: AnyRoute<Context>, context: RequestContext, call: Context)
        -> HandlerDecision
    {
        route.dispatch(request, context, call, runner)
    }
}

extension Route {
    /// Decodes the payload and runs the handler where its placement says.
    @inlinable
    func dispatch(_ request: WireRequest, _ context: RequestContext, _ call: Context, _ runner: RouteRunner) -> HandlerDecision {
        // Read only when counted: a table without metrics reads no clock per call.
        let started: ContinuousClock.Instant? = runner.callMetrics == nil ? nil : .now
        let decision = decide(request, context, call, runner, started)
        if let started, let metrics = runner.callMetrics {
            switch decision {
            case .respond(let response):
                metrics.record(method: request.method, code: response.status.code, duration: .now - started)
            case .stream:
                // A stream is counted when it opens: it may stay open for the connection's life.
                metrics.record(method: request.method, code: 0, duration: .now - started)
            case .deferred:
                break  // counted by `RouteRunner.finish`
            }
        }
        return decision
    }

    @inlinable
    func decide(
        _ request: WireRequest, _ context: RequestContext, _ call: Context, _ runner: RouteRunner,
        _ started: ContinuousClock.Instant?
    ) -> HandlerDecision {
        let decoded: Request
        do {
            decoded = try Request.decode(request.payload)
        } catch {
            return .respond(.failure(error))
        }
        return decide(handler, decoded, request, context, call, runner, started)
    }

    @inlinable
    func decide(
        _ handler: RouteHandler<Context, Request, Response>, _ decoded: Request, _ request: WireRequest,
        _ context: RequestContext, _ call: Context, _ runner: RouteRunner, _ started: ContinuousClock.Instant?
    ) -> HandlerDecision {
        switch handler {
        case .ready(let answer, let fallback):
            if let payload = answer(call) { return .respond(.ok(payload)) }
            return decide(fallback, decoded, request, context, call, runner, started)
        case .loop(let body):
            do {
                return .respond(.ok(try body(decoded, call).encode()))
            } catch {
                return .respond(.failure(error))
            }
        case .stream(let body):
            do {
                try body(decoded, call, context)
            } catch {
                return .respond(.failure(error))
            }
            return .stream
        case .actor(let body):
            runner.armDeadline(request, policy, context.responder)
            runner.run(
                decoded, call, request.method, context.responder, body,
                isCancelledWithCaller: policy.isCancelledWithCaller, started: started)
            return .deferred
        }
    }
}

/// What a table's task-run routes share: the deadline clock, the outcome log and the deadlines
/// armed for calls in flight.
@usableFromInline
final class RouteRunner: Sendable {
    let clock: (any RainClock)?
    let outcomeLog: RouteOutcomeLog
    /// Counts and times each answered call; nil counts nothing.
    @usableFromInline let callMetrics: CallMetrics?

    /// A deadline armed for one call: its timer, and the server's token of the call (a client may
    /// reuse a request id once the call ended).
    struct ArmedDeadline {
        var token: UInt64
        /// Set just after the entry is made, so a timer that fires at once finds it.
        var timer: (any RainTimer)?
    }

    /// The armed deadlines by connection and request id. An entry leaves when the call ends (its
    /// answer, its deadline), when the client cancels it and when the connection closes, and its
    /// timer is cancelled then: a call with a `timeout_ms` of days holds nothing once it is over.
    private let deadlines = Mutex<[ConnectionID: [UInt64: ArmedDeadline]]>([:])

    /// Where deadline timers fire (they only post an answer).
    private static let deadlineQueue = DispatchQueue(label: "rain.route.deadlines")

    init(clock: (any RainClock)?, outcomeLog: RouteOutcomeLog, callMetrics: CallMetrics?) {
        self.clock = clock
        self.outcomeLog = outcomeLog
        self.callMetrics = callMetrics
    }

    /// With a `timeout_ms` (else the route's default deadline), answers RAIN_501 `deadline_exceeded`
    /// when it passes first. The work itself goes on (a sent code cannot be unsent); the server drops
    /// whichever answer comes later. The timer is cancelled as soon as the call ends.
    @usableFromInline
    func armDeadline(_ request: WireRequest, _ policy: RoutePolicy, _ responder: Responder) {
        guard let clock else { return }
        let milliseconds: Int64
        if request.timeoutMilliseconds > 0 {
            milliseconds = Int64(request.timeoutMilliseconds)
        } else if let deadline = policy.deadline, deadline.milliseconds > 0 {
            milliseconds = deadline.milliseconds
        } else {
            return
        }
        let method = request.method
        let (connection, requestID, token) = (responder.connection, responder.requestID, responder.token)
        let replaced = deadlines.withLock { d -> ArmedDeadline? in
            d[connection, default: [:]].updateValue(ArmedDeadline(token: token, timer: nil), forKey: requestID)
        }
        replaced?.timer?.cancel()
        let timer = clock.schedule(after: .milliseconds(milliseconds), on: Self.deadlineQueue) { [weak self] in
            // Only a deadline still armed answers: the call may have ended as the timer fired.
            guard self?.disarm(responder) == true else { return }
            responder.fail(
                RainError(
                    .provider, "\(method) did not finish within \(milliseconds) ms",
                    details: .init(reason: "deadline_exceeded")))
        }
        let isArmed = deadlines.withLock { d -> Bool in
            guard d[connection]?[requestID]?.token == token else { return false }
            d[connection]?[requestID]?.timer = timer
            return true
        }
        // The call ended (or its deadline fired) meanwhile: nothing is left to time.
        if !isArmed { timer.cancel() }
    }

    /// Removes the deadline of the responder's call and cancels its timer (a fired one too: a
    /// Dispatch timer is released only once cancelled).
    /// - Returns: whether a deadline of this very call was armed.
    @discardableResult
    func disarm(_ responder: Responder) -> Bool {
        let armed = deadlines.withLock { d -> ArmedDeadline? in
            guard let a = d[responder.connection]?[responder.requestID], a.token == responder.token else { return nil }
            d[responder.connection]?.removeValue(forKey: responder.requestID)
            if d[responder.connection]?.isEmpty == true { d.removeValue(forKey: responder.connection) }
            return a
        }
        armed?.timer?.cancel()
        return armed != nil
    }

    /// Drops the deadline of a call the client cancelled.
    func cancelDeadline(connection: ConnectionID, requestID: UInt64) {
        let armed = deadlines.withLock { d -> ArmedDeadline? in
            let a = d[connection]?.removeValue(forKey: requestID)
            if d[connection]?.isEmpty == true { d.removeValue(forKey: connection) }
            return a
        }
        armed?.timer?.cancel()
    }

    /// Drops the deadlines of every call of a closed connection.
    func cancelDeadlines(connection: ConnectionID) {
        let armed = deadlines.withLock { $0.removeValue(forKey: connection) }
        armed?.values.forEach { $0.timer?.cancel() }
    }

    /// The number of deadlines armed for calls in flight.
    var armedDeadlineCount: Int { deadlines.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Runs `body` in a task and answers with its outcome. With `isCancelledWithCaller`, the task
    /// is kept by connection and request id until it ends, for `cancelTask` and `cancelTasks`.
    @usableFromInline
    func run<Context: Sendable, Request: WireMessage, Response: WireMessage>(
        _ request: Request, _ call: Context, _ method: String, _ responder: Responder,
        _ body: @escaping @Sendable (Request, Context) async throws(RainError) -> Response,
        isCancelledWithCaller: Bool = false, started: ContinuousClock.Instant? = nil
    ) {
        guard isCancelledWithCaller else {
            Task {
                do throws(RainError) {
                    finish(.success(try await body(request, call)), method, responder, started: started)
                } catch {
                    finish(Result<Response, RainError>.failure(error), method, responder, started: started)
                }
            }
            return
        }
        let (connection, requestID, token) = (responder.connection, responder.requestID, responder.token)
        // Made under the lock its end takes, so a task that ends at once is still removed (kept
        // after its end, it would stay forever).
        tasks.withLock { tasks in
            let task = Task {
                defer { self.forgetTask(connection: connection, requestID: requestID, token: token) }
                do throws(RainError) {
                    finish(.success(try await body(request, call)), method, responder, started: started)
                } catch {
                    finish(Result<Response, RainError>.failure(error), method, responder, started: started)
                }
            }
            tasks[connection, default: [:]][requestID] = RunningTask(token: token, task: task)
        }
    }

    /// A task of a call that ends with its caller, and the server's token of the call.
    struct RunningTask {
        var token: UInt64
        var task: Task<Void, Never>
    }

    /// The running tasks of calls cancelled with their caller, by connection and request id.
    private let tasks = Mutex<[ConnectionID: [UInt64: RunningTask]]>([:])

    private func forgetTask(connection: ConnectionID, requestID: UInt64, token: UInt64) {
        tasks.withLock { t in
            guard t[connection]?[requestID]?.token == token else { return }
            t[connection]?.removeValue(forKey: requestID)
            if t[connection]?.isEmpty == true { t.removeValue(forKey: connection) }
        }
    }

    /// Cancels the task of a call the client cancelled, if it ends with its caller.
    func cancelTask(connection: ConnectionID, requestID: UInt64) {
        tasks.withLock { $0[connection]?[requestID] }?.task.cancel()
    }

    /// Cancels the tasks of a closed connection's calls that end with their caller.
    func cancelTasks(connection: ConnectionID) {
        tasks.withLock { $0.removeValue(forKey: connection) }?.values.forEach { $0.task.cancel() }
    }

    /// The number of tasks kept for `cancelTask`.
    var cancellableTaskCount: Int { tasks.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Answers a call and logs its outcome.
    func finish<Response: WireMessage>(
        _ result: Result<Response, RainError>, _ method: String, _ responder: Responder,
        started: ContinuousClock.Instant? = nil
    ) {
        disarm(responder)
        if let started, let callMetrics {
            let code: UInt32
            switch result {
            case .success: code = 0
            case .failure(let error): code = error.code.rawValue
            }
            callMetrics.record(method: method, code: code, duration: .now - started)
        }
        do throws(RainError) {
            let response = try result.get()
            responder.respond(.ok(try response.encode()))
            if case .everyCall(let logger) = outcomeLog {
                logger.debug("call", ["method": method, "status": "ok"])
            }
        } catch {
            switch outcomeLog {
            case .everyCall(let logger):
                // Messages never hold a code, token or key (the secret-scanning tests check this log).
                logger.debug(
                    "call",
                    [
                        "method": method, "status": error.code.description, "reason": error.details.reason ?? "",
                        "error": error.message,
                    ])
                // An internal error with a reason was written for the client (RAIN_502
                // `session_not_persisted`, logged once where it arose): it goes as it is.
                if error.code == .internalError, error.details.reason == nil {
                    logger.error("call.failed", ["method": method, "error": error.message])
                    responder.fail(RainError(.internalError, "internal error in \(method); see the daemon log"))
                } else {
                    responder.fail(error)
                }
            case .failures(let logger):
                let level: LogLevel = error.code == .internalError ? .error : .info
                logger.log(
                    level, "call.failed",
                    ["method": method, "code": error.code.description, "reason": error.details.reason ?? "-"])
                responder.fail(error)
            }
        }
    }
}
