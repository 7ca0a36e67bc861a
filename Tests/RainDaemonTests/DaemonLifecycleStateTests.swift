import Foundation
import RainCore
import RainTransport
import RainWire
import Synchronization
import Testing

@testable import RainDaemon

/// A handler that is never called: these tests only start and stop the server.
final class IdleHandler: ServerHandler {
    func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision { .deferred }
    func cancel(connection: ConnectionID, requestID: UInt64) {}
    func connectionClosed(_ connection: ConnectionID) {}
}

/// A role whose preparation waits for a gate, and which records what the lifecycle called.
final class GatedRole: DaemonRole {
    let displayName = "test"
    let label = "test"
    let event = "test"
    let logLevel = LogLevel.error
    let socketPath: String
    /// Yields once when preparation starts, once when the server is ready, once when finished.
    let events: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    /// Preparation waits until the test opens it.
    let gate: AsyncStream<Void>
    let gateOpener: AsyncStream<Void>.Continuation

    init(socketPath: String) {
        self.socketPath = socketPath
        (events, continuation) = AsyncStream.makeStream()
        (gate, gateOpener) = AsyncStream.makeStream()
    }

    func takeEnvironment(logger: Logger) throws(RainError) -> RoleEnvironment { RoleEnvironment() }

    func prepare(_ environment: RoleEnvironment, logger: Logger) async throws(RainError) -> PreparedServer {
        continuation.yield("preparing")
        for await _ in gate { break }
        let fd = try UnixSocket.listen(path: socketPath, mode: 0o600)
        let server = try EventLoopServer(listeningSocket: fd, options: ServerOptions(), handler: IdleHandler(), logger: logger)
        let events = continuation
        return PreparedServer(
            server: server, drainTimeout: .milliseconds(100), notifier: nil,
            ready: { events.yield("ready") }, finish: { events.yield("finished") })
    }
}

extension RoleEnvironment {
    init() { self.init(notifier: nil, activated: nil) }
}

@Suite struct DaemonLifecycleStateTests {
    func socketPath() -> String { "/tmp/rwlc-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock" }

    @Test func aStopWhileStartingIsNotLostAndNeverServes() async throws {
        let path = socketPath()
        defer { unlink(path) }
        let role = GatedRole(socketPath: path)
        let lifecycle = DaemonLifecycle(logger: Logger(label: "test", minimumLevel: .error), isHandlingSignals: false)
        async let run: Void = lifecycle.run(role, environment: RoleEnvironment())
        var events = role.events.makeAsyncIterator()
        #expect(await events.next() == "preparing")
        guard case .starting = await lifecycle.state else {
            Issue.record("not starting")
            return
        }
        await lifecycle.stop(signal: "TERM")
        role.gateOpener.yield()
        try await run
        // Re-checked after the preparation's await: the server is closed, never marked ready.
        #expect(await events.next() == "finished")
        guard case .stopped = await lifecycle.state else {
            Issue.record("not stopped")
            return
        }
    }

    @Test func aStopWhileRunningDrainsThenStops() async throws {
        let path = socketPath()
        defer { unlink(path) }
        let role = GatedRole(socketPath: path)
        let lifecycle = DaemonLifecycle(logger: Logger(label: "test", minimumLevel: .error), isHandlingSignals: false)
        role.gateOpener.yield()
        async let run: Void = lifecycle.run(role, environment: RoleEnvironment())
        var events = role.events.makeAsyncIterator()
        #expect(await events.next() == "preparing")
        #expect(await events.next() == "ready")
        guard case .running = await lifecycle.state else {
            Issue.record("not running")
            return
        }
        await lifecycle.stop(signal: "TERM")
        guard case .draining = await lifecycle.state else {
            Issue.record("not draining")
            return
        }
        try await run
        #expect(await events.next() == "finished")
        guard case .stopped = await lifecycle.state else {
            Issue.record("not stopped")
            return
        }
        // Running twice is refused.
        await #expect(throws: RainError.self) { try await lifecycle.run(role, environment: RoleEnvironment()) }
    }
}
