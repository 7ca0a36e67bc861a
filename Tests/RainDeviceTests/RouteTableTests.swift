import Foundation
import RainAuthority
import RainAuthorityAPI
import RainConfig
import RainCore
import RainTestSupport
import RainTransport
import RainWire
import Testing

@testable import RainDevice

/// The method names `Method` declares (generated from the service blocks of proto/*.proto).
func declaredMethods() -> Set<String> { Set(Method.declarations.map(\.name)) }

/// The device's route table: one declaration per method, with truthful policies.
@Suite struct DeviceRoutesTests {
    /// The routes of a service on an embedded authority (its directory lives as long as the test).
    static func routes(isTestMethodsEnabled: Bool, in dir: TempDir = TempDir()) async throws -> RouteTable<DeviceCall> {
        let logger = Logger(label: "test", sink: CapturingLogSink())
        let authority = try await EmbeddedAuthority(
            stateDirectory: dir.path, clock: ManualClock(), sender: CapturingCodeSender(), logger: logger)
        let service = DeviceService(
            config: DaemonConfig(),
            context: DeviceContext(
                authority: authority, storage: InMemoryStorage(), clock: ManualClock(), device: try testDevice(),
                logger: logger),
            isTestMethodsEnabled: isTestMethodsEnabled)
        return withExtendedLifetime(dir) { service.routes }
    }

    @Test func everyMethodHasExactlyOneRoute() async throws {
        let declared = declaredMethods()
        let routes = try await Self.routes(isTestMethodsEnabled: true)
        #expect(routes.duplicateMethods.isEmpty)
        #expect(routes.methods.count == routes.routes.count)
        #expect(Set(routes.methods) == declared)
        #expect(routes.methods.count == declared.count)
    }

    @Test func everyRouteTakesTheMessagesItsRPCDeclares() async throws {
        let routes = try await Self.routes(isTestMethodsEnabled: true)
        for declaration in Method.declarations {
            let route = try #require(routes.route(for: declaration.name), "\(declaration.name)")
            #expect(ObjectIdentifier(route.requestType) == ObjectIdentifier(declaration.requestType), "\(declaration.name)")
            #expect(ObjectIdentifier(route.responseType) == ObjectIdentifier(declaration.responseType), "\(declaration.name)")
            #expect((route.placement == .stream) == declaration.isServerStream, "\(declaration.name)")
        }
    }

    @Test func slowEchoIsRoutedOnlyWithTheTestMethods() async throws {
        let routes = try await Self.routes(isTestMethodsEnabled: false)
        #expect(routes.route(for: Method.testSlowEcho) == nil)
        #expect(routes.route(for: Method.devListOutbox) != nil)
        #expect(Set(routes.methods) == declaredMethods().subtracting([Method.testSlowEcho]))
    }

    @Test(
        arguments: [
            (Method.daemonGetInfo, RoutePolicy.read(isOpenToAnyApp: true)),
            (Method.sessionGetState, .read(claimsProfile: false)),
            (Method.sessionAwaitRestore, .read(claimsProfile: false)),
            (Method.devListOutbox, .read(claimsProfile: false)),
            (Method.sessionWatch, .read()),
            (Method.accountGet, .read(needsSession: true)),
            (Method.walletGet, .read(needsSession: true)),
            (Method.authSendLoginCode, .send()),
            (Method.authConfirmLoginCode, .send()),
            (Method.authLogout, .send()),
            (Method.sessionRefresh, .send(needsSession: true)),
            (Method.passkeyFinish, .send()),
            (Method.passkeyBeginAdd, .send(needsSession: true, isSensitive: true, userConfirms: DeviceService.confirmAddPasskey)),
            (
                Method.contactSendVerificationCode,
                .send(needsSession: true, isSensitive: true, userConfirms: DeviceService.confirmAddContact)
            ),
            (Method.contactConfirmVerification, .send(needsSession: true)),
            (
                Method.walletExportRecoveryPhrase,
                .send(needsSession: true, isSensitive: true, userConfirms: DeviceService.confirmExportPhrase)
            ),
            (
                Method.walletExportPrivateKey,
                .send(needsSession: true, isSensitive: true, userConfirms: DeviceService.confirmExportKey)
            ),
            (Method.appsApprove, .send(isOpenToAnyApp: true, isCancelledWithCaller: true)),
            (Method.appsRevoke, .send(isOpenToAnyApp: true, isCancelledWithCaller: true)),
            (Method.settingsConfirm, .send(isOpenToAnyApp: true, isCancelledWithCaller: true)),
            (Method.profileChangePasskeyDomain, .send(isCancelledWithCaller: true)),
            // A security key's ceremony stops (the keys are cancelled) with the app's call.
            (Method.passkeyRun, .send(isCancelledWithCaller: true)),
            (Method.promptRegister, .send(isOpenToAnyApp: true, isCancelledWithCaller: true)),
            (Method.promptGet, .read(isOpenToAnyApp: true)),
            (Method.promptAddKey, .send(isOpenToAnyApp: true, isDaemonOwnerOnly: true, isCancelledWithCaller: true)),
            (Method.promptRemoveKeys, .send(isOpenToAnyApp: true, isDaemonOwnerOnly: true, isCancelledWithCaller: true)),
        ])
    func declaredPolicy(method: String, policy: RoutePolicy) async throws {
        let routes = try await Self.routes(isTestMethodsEnabled: false)
        #expect(routes.policy(for: method) == policy)
    }

    @Test("the calls whose handler shows a prompt, and only they, are cancelled with their caller (their prompt withdrawn)")
    func cancelledWithCaller() async throws {
        let routes = try await Self.routes(isTestMethodsEnabled: true)
        let cancelled = Set(routes.routes.filter(\.policy.isCancelledWithCaller).map(\.method))
        #expect(
            cancelled == [
                Method.appsApprove, Method.appsRevoke, Method.settingsConfirm, Method.promptRegister,
                Method.profileChangePasskeyDomain, Method.passkeyRun, Method.promptAddKey, Method.promptRemoveKeys,
            ])
    }

    @Test func readsAreRetriedSendsAreNotAndNoRouteHasADefaultDeadlineYet() async throws {
        let routes = try await Self.routes(isTestMethodsEnabled: true)
        #expect(routes.policy(for: Method.accountGet)?.isRetried == true)
        #expect(routes.policy(for: Method.authSendLoginCode)?.isRetried == false)
        #expect(routes.routes.allSatisfy { $0.policy.deadline == nil })
        #expect(routes.policy(for: "/rain.wallet.v1.Nope/Nothing") == nil)
    }

    @Test("an authority that cannot tell whether an answer still stands (a remote one) is asked every read")
    func readsAskAnAuthorityWithoutFreshness() async throws {
        let f = try await SchedulerFixture()  // its authority offers no ReadFreshness
        #expect(f.service.routes.route(for: Method.accountGet)?.placement == .actor)
        #expect(f.service.routes.route(for: Method.walletGet)?.placement == .actor)
        #expect(f.service.routes.route(for: Method.sessionGetState)?.placement == .ready)
    }

    @Test func placements() async throws {
        let routes = try await Self.routes(isTestMethodsEnabled: true)
        // The reads an app makes most are answered from kept bytes: the embedded authority on
        // SQLite says when an answer still stands.
        let ready = Set(routes.routes.filter { $0.placement == .ready }.map(\.method))
        #expect(ready == [Method.daemonGetInfo, Method.sessionGetState, Method.accountGet, Method.walletGet])
        #expect(routes.routes.allSatisfy { ($0.ready != nil) == ($0.placement == .ready) })
        #expect(routes.route(for: Method.sessionWatch)?.placement == .stream)
        let onTheActor = Set(routes.routes.filter { $0.placement == .actor }.map(\.method))
        #expect(
            onTheActor.isSuperset(of: [
                Method.authSendLoginCode, Method.authConfirmLoginCode, Method.authLogout, Method.sessionAwaitRestore,
                Method.sessionRefresh,
                Method.profileConfigure, Method.passkeyFinish, Method.walletExportRecoveryPhrase, Method.devListOutbox,
                Method.testSlowEcho,
            ]))
        let account = try #require(routes.route(for: Method.accountGet))
        #expect(ObjectIdentifier(account.requestType) == ObjectIdentifier(GetAccountRequest.self))
        #expect(ObjectIdentifier(account.responseType) == ObjectIdentifier(AccountResponse.self))
    }

    @Test func anUnknownMethodIsRefusedNamingAtMost200ScalarsOfIt() async throws {
        let f = try await SchedulerFixture()
        try await ServedHandler.serve(f) { c in
            let long = "/rain.wallet.v1.Nope/" + String(repeating: "é", count: 300)
            let error = await #expect(throws: RainError.self) { _ = try await c.call(method: long, payload: []) }
            #expect(error?.code == .invalidArgument)
            #expect(error?.details.reason == "unknown_method")
            #expect(error.map { !$0.message.contains(long) } == true)
            let short = await #expect(throws: RainError.self) {
                _ = try await c.call(method: "/rain.wallet.v1.Nope/Nothing", payload: [])
            }
            #expect(short?.details.reason == "unknown_method")
        }
    }

    @Test(arguments: [
        Method.sessionGetState, Method.authLogout, Method.accountGet, Method.sessionWatch, Method.sessionAwaitRestore,
    ])
    func anUndecodablePayloadIsRAIN102(method: String) async throws {
        let f = try await SchedulerFixture()
        try await ServedHandler.serve(f) { c in
            // Field 1, length-delimited, 5 bytes announced and 1 present.
            let error = await #expect(throws: RainError.self) {
                _ = try await c.call(method: method, payload: [0x0A, 0x05, 0x01])
            }
            #expect(error?.code == .invalidArgument)
            #expect(error?.details.reason == "undecodable_payload")
        }
    }
}

/// Answers every request from a route table; the call's context is its profile.
final class TableHandler: ServerHandler {
    let table: RouteTable<String>
    init(_ table: RouteTable<String>) { self.table = table }
    func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision {
        table.handle(request, context: context, call: request.profile ?? "none")
    }
    func cancel(connection: ConnectionID, requestID: UInt64) { table.callCancelled(connection: connection, requestID: requestID) }
    func connectionClosed(_ connection: ConnectionID) { table.connectionClosed(connection) }
}

/// The generic table: what a route declared in a test is answered with.
@Suite struct RouteTableTests {
    static let loop = "/test.v1.T/Loop"
    static let actor = "/test.v1.T/Actor"
    static let slow = "/test.v1.T/Slow"
    static let broken = "/test.v1.T/Broken"
    static let ready = "/test.v1.T/Ready"

    static func table(clock: ManualClock, log: RouteOutcomeLog) -> RouteTable<String> {
        RouteTable(
            deadlineClock: clock, outcomeLog: log,
            unknownMethod: UnknownMethodAnswer(infoMethod: "/test.v1.T/Info", serviceName: "test")
        ) {
            Route(
                loop, SlowEchoRequest.self, SlowEchoResponse.self, policy: .read(),
                .loop { (r, call) throws(RainError) in SlowEchoResponse(data: r.data + Array("loop:\(call)".utf8)) })
            Route(
                actor, SlowEchoRequest.self, SlowEchoResponse.self, policy: .send(),
                .actor { (r, call) throws(RainError) in SlowEchoResponse(data: r.data + Array("actor:\(call)".utf8)) })
            Route(
                slow, SlowEchoRequest.self, SlowEchoResponse.self, policy: .read(deadline: .milliseconds(50)),
                .actor { (r, _) throws(RainError) in
                    await clock.sleep(for: .seconds(3600))
                    return SlowEchoResponse(data: r.data)
                })
            Route(
                broken, GetInfoRequest.self, GetInfoResponse.self, policy: .read(),
                .actor { (_, _) throws(RainError) in throw RainError(.internalError, "disk detail 4711") })
            // Kept bytes for the call "p1" only; any other call is answered by the fallback.
            Route(
                ready, SlowEchoRequest.self, SlowEchoResponse.self, policy: .read(),
                .ready(
                    { call in call == "p1" ? try? SlowEchoResponse(data: Array("kept:\(call)".utf8)).encode() : nil },
                    fallback: .actor { (r, call) throws(RainError) in
                        SlowEchoResponse(data: r.data + Array("fallback:\(call)".utf8))
                    }))
            // A second declaration of a method is not served.
            Route(
                loop, GetInfoRequest.self, GetInfoResponse.self, policy: .send(),
                .loop { (_, _) throws(RainError) in throw RainError(.internalError, "never") })
        }
    }

    static func serve(_ table: RouteTable<String>, _ body: (ClientConnection) async throws -> Void) async throws {
        let dir = TempDir()
        try await ServedHandler.serve(
            TableHandler(table), directory: dir.path, logger: Logger(label: "test", sink: CapturingLogSink()), body)
    }

    static func echo(
        _ c: ClientConnection, _ method: String, _ selector: UInt32 = 0, profile: String = "p1", timeout: UInt32 = 0
    ) async throws -> String {
        let payload = try SlowEchoRequest(delayMilliseconds: selector, data: Array("in|".utf8)).encode()
        let answer = try await c.call(
            method: method, payload: payload, metadata: [MetadataEntry(key: profileMetadataKey, value: profile)],
            timeoutMilliseconds: timeout)
        return String(decoding: try SlowEchoResponse.decode(answer).data, as: UTF8.self)
    }

    @Test func aRouteAddedInATableIsDispatchedWhereItsPlacementSays() async throws {
        let log = RouteOutcomeLog.everyCall(Logger(label: "t", sink: CapturingLogSink()))
        let table = Self.table(clock: ManualClock(), log: log)
        #expect(table.duplicateMethods == [Self.loop])
        #expect(table.policy(for: Self.loop) == .read(), "the first declaration wins")
        #expect(table.methods == [Self.loop, Self.actor, Self.slow, Self.broken, Self.ready])
        // Only a route placed .ready is found by its method's bytes (the quick lane's lookup).
        func readyRoute(_ method: String) -> String? {
            Array(method.utf8).withUnsafeBufferPointer { table.readyRoute(method: $0)?.method }
        }
        #expect(readyRoute(Self.ready) == Self.ready)
        #expect(readyRoute(Self.loop) == nil)
        #expect(readyRoute("/test.v1.T/Readx") == nil)
        try await Self.serve(table) { c in
            let loop = try await Self.echo(c, Self.loop)
            let actor = try await Self.echo(c, Self.actor, profile: "p2")
            #expect(loop == "in|loop:p1")
            #expect(actor == "in|actor:p2")
            #expect(try await Self.echo(c, Self.ready) == "kept:p1", "the kept bytes, the request unread")
            #expect(try await Self.echo(c, Self.ready, profile: "p2") == "in|fallback:p2", "none kept: the fallback")
            let unknown = await #expect(throws: RainError.self) { _ = try await Self.echo(c, "/test.v1.T/Missing") }
            #expect(unknown?.details.reason == "unknown_method")
            let undecodable = await #expect(throws: RainError.self) {
                _ = try await c.call(method: Self.actor, payload: [0x0A, 0x05, 0x01])
            }
            #expect(undecodable?.details.reason == "undecodable_payload")
        }
    }

    @Test func theRouteDefaultDeadlineAnswersWhenTheRequestHasNone() async throws {
        let clock = ManualClock()
        let table = Self.table(clock: clock, log: .everyCall(Logger(label: "t", sink: CapturingLogSink())))
        try await Self.serve(table) { c in
            let answer = Task { try await Self.echo(c, Self.slow) }
            // The handler's sleep and the deadline.
            await eventually("the handler and the deadline wait") { clock.pendingTimerCount == 2 }
            clock.advance(by: .milliseconds(50))
            let error = await #expect(throws: RainError.self) { _ = try await answer.value }
            #expect(error?.code == .provider)
            #expect(error?.details.reason == "deadline_exceeded")
            clock.advance(by: .seconds(3600))
        }
    }

    /// A day-long `timeout_ms` must not leave a sleeping task behind every call until the day is
    /// over: the deadline's timer goes with the call.
    @Test func aCallWithADayLongTimeoutLeavesNoDeadlineBehind() async throws {
        let clock = ManualClock()
        let table = Self.table(clock: clock, log: .everyCall(Logger(label: "t", sink: CapturingLogSink())))
        let day: UInt32 = 86_400_000
        try await Self.serve(table) { c in
            for i in 0..<1000 {
                _ = try await Self.echo(c, Self.actor, UInt32(i % 2), timeout: day)
            }
            #expect(clock.pendingTimerCount == 0, "no timer is left of 1,000 finished calls")
            #expect(table.armedDeadlineCount == 0)
        }
    }

    /// Calls still running when their client leaves (the connection closes) drop their deadlines;
    /// the work itself goes on.
    @Test func aClientThatLeavesTakesItsDeadlinesWithIt() async throws {
        let clock = ManualClock()
        let table = Self.table(clock: clock, log: .everyCall(Logger(label: "t", sink: CapturingLogSink())))
        try await Self.serve(table) { c in
            let calls = (0..<10).map { _ in Task { try await Self.echo(c, Self.slow, timeout: 86_400_000) } }
            await eventually("10 handlers and 10 deadlines wait") { clock.pendingTimerCount == 20 }
            #expect(table.armedDeadlineCount == 10)
            c.close()
            for call in calls { _ = await call.result }
            await eventually("the deadlines are gone, the handlers still sleep") {
                clock.pendingTimerCount == 10 && table.armedDeadlineCount == 0
            }
            clock.advance(by: .seconds(3600))
        }
    }

    @Test func withoutADeadlineOrTimeoutNoneIsArmed() async throws {
        let clock = ManualClock()
        let log = RouteOutcomeLog.everyCall(Logger(label: "t", sink: CapturingLogSink()))
        let table = RouteTable<String>(
            deadlineClock: clock, outcomeLog: log, unknownMethod: UnknownMethodAnswer(infoMethod: "/i", serviceName: "test")
        ) {
            Route(
                Self.slow, SlowEchoRequest.self, SlowEchoResponse.self, policy: .read(),
                .actor { (r, _) throws(RainError) in
                    await clock.sleep(for: .seconds(1))
                    return SlowEchoResponse(data: r.data)
                })
        }
        try await Self.serve(table) { c in
            let answer = Task { try await Self.echo(c, Self.slow) }
            await eventually("the handler waits") { clock.pendingTimerCount == 1 }
            #expect(clock.pendingTimerCount == 1, "no deadline armed")
            clock.advance(by: .seconds(1))
            let echoed = try await answer.value
            #expect(echoed == "in|")
        }
    }

    @Test func anInternalErrorIsLoggedAndAnsweredGenericallyWithEveryCallLogging() async throws {
        let sink = CapturingLogSink()
        let table = Self.table(clock: ManualClock(), log: .everyCall(Logger(label: "t", minimumLevel: .debug, sink: sink)))
        try await Self.serve(table) { c in
            let error = await #expect(throws: RainError.self) {
                _ = try await c.call(method: Self.broken, payload: try GetInfoRequest().encode())
            }
            #expect(error?.code == .internalError)
            #expect(error.map { !$0.message.contains("4711") } == true, "the detail stays in the log")
            _ = try await Self.echo(c, Self.actor)
        }
        let lines = sink.captured
        #expect(lines.contains { $0.contains("call.failed") && $0.contains("4711") && $0.contains("error") })
        #expect(lines.contains { $0.contains(" call ") && $0.contains("status=ok") })
    }

    @Test func failuresLoggingPassesEveryErrorOnAsItIs() async throws {
        let sink = CapturingLogSink()
        let table = Self.table(clock: ManualClock(), log: .failures(Logger(label: "t", minimumLevel: .debug, sink: sink)))
        try await Self.serve(table) { c in
            let error = await #expect(throws: RainError.self) {
                _ = try await c.call(method: Self.broken, payload: try GetInfoRequest().encode())
            }
            #expect(error?.code == .internalError)
            #expect(error.map { $0.message.contains("4711") } == true)
            _ = try await Self.echo(c, Self.actor)
        }
        let lines = sink.captured
        #expect(lines.count == 1)
        #expect(lines.first?.contains("call.failed") == true)
    }

    @Test func anUnknownMethodEchoesAtMostItsLimit() {
        let answer = UnknownMethodAnswer(infoMethod: "/x.v1.D/GetInfo", serviceName: "daemon")
        let exact = String(repeating: "a", count: 200)
        #expect(answer.error(for: exact).message.contains(exact + ";"))
        let over = answer.error(for: exact + "b")
        #expect(over.code == .invalidArgument)
        #expect(over.details.reason == "unknown_method")
        #expect(over.message.contains(exact + "…;"))
        #expect(!over.message.contains("b;"))
    }
}
