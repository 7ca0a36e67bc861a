import Foundation
import RainClientTransport
import RainTestSupport
import RainWallet
import Testing

/// A daemon that is not there is a state an app can show, not a wait: `serviceState` against a
/// real socket path where no daemon runs, then a daemon started there, stopped, and one that
/// refuses the app.
@Suite(.timeLimit(.minutes(2))) struct ServiceStateTests {
    static let backoff = ClientStreamTests.backoff

    @Test("with no daemon at the socket, serviceState says not running at once and follows the daemon started later")
    func missingDaemonIsAStateUntilItStarts() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let p = RainProvider(RainWalletConfig(socketPath: h.socketPath), reconnectBackoff: Self.backoff)
        let service = StreamLog(p.serviceState)
        let gate = StreamLog(p.authState)
        #expect(await until { service.values.all.last != nil })
        guard case .notRunning(let error)? = service.values.all.last else {
            Issue.record("expected notRunning first, got \(service.values.all)")
            return
        }
        #expect(error.code == .notInitialized)
        #expect(error.details.reason == UnixSocket.daemonNotRunningReason)
        // The test runner was built in this checkout: the message names what starts the daemon here.
        guard case .checkout = DaemonInstallation.current else {
            Issue.record("the test runner is not seen as a checkout build: \(DaemonInstallation.current)")
            return
        }
        #expect(error.message.contains(DaemonInstallation.current.startAdvice), "\(error.message)")
        // Each stream is read by a task of its own: the gate's first value may come a moment later.
        #expect(await until { gate.values.all == [.loading] }, "\(gate.values.all)")

        // Calls fail at once rather than wait, a long restore wait included (the suite's time limit
        // is shorter than the wait asked for).
        for restore in [{ try await p.awaitSessionRestore() }, { try await p.awaitSessionRestore(timeoutMs: 600_000) }] {
            let refused = await rainError { try await restore() }
            #expect(refused?.code == .notInitialized)
            #expect(refused?.details.reason == UnixSocket.daemonNotRunningReason)
        }

        try await h.start()
        #expect(await service.waitForLatest(.running))
        #expect(await gate.waitForLatest(.unauthenticated))
        #expect(service.values.all == [.notRunning(.notInitialized), .running])
        #expect(gate.values.all == [.loading, .unauthenticated])

        // Stopped: not running again once the provider's next attempt finds no daemon.
        try await h.stop()
        #expect(await gate.waitForLatest(.loading))
        #expect(await service.waitForLatest(.notRunning(.notInitialized)))
        try await h.start()
        #expect(await service.waitForLatest(.running))
        #expect(await gate.waitForLatest(.unauthenticated))
    }

    @Test("a daemon that answers but does not serve the app is refused, not missing, until the app is approved")
    func refusedAppIsNotAMissingDaemon() async throws {
        let h = try await DaemonHarness.start(access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        // The CLI uses the profile first and owns it: the test runner is another app.
        let sent = try await h.runCLI(["code", "send", "--email", "refused-service@example.com"])
        #expect(sent.status == 0, "\(sent)")
        let p = RainProvider(RainWalletConfig(socketPath: h.socketPath), reconnectBackoff: Self.backoff)
        let service = StreamLog(p.serviceState)
        let gate = StreamLog(p.authState)
        #expect(await until { service.values.all.last != nil })
        guard case .refused(let error)? = service.values.all.last else {
            Issue.record("expected refused, got \(service.values.all)")
            return
        }
        #expect(error.code == .unauthorized)
        #expect(error.details.reason == "app_not_approved")
        #expect(await until { gate.values.all == [.loading] }, "\(gate.values.all)")

        let approved = try await h.runCLI(["apps", "approve", DaemonHarness.testRunnerPath])
        #expect(approved.status == 0, "\(approved)")
        #expect(await service.waitForLatest(.running))
        #expect(await gate.waitForLatest(.unauthenticated))
        #expect(service.values.all == [.refused(.unauthorized), .running])
    }

    @Test("close() ends the streams and makes every call throw provider_closed")
    func closeMakesTheProviderInert() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = RainProvider(RainWalletConfig(socketPath: h.socketPath), reconnectBackoff: Self.backoff)
        let gate = StreamLog(p.authState)
        let service = StreamLog(p.serviceState)
        #expect(await gate.waitForLatest(.unauthenticated))
        #expect(await service.waitForLatest(.running))
        p.close()
        p.close()
        #expect(p.isClosed)
        let ended = Recorder<AuthState>()
        for await state in p.authState { ended.append(state) }  // ends at once
        #expect(ended.all.isEmpty)
        for call in [{ _ = try await p.currentSession() }, { try await p.awaitSessionRestore() }, { _ = try p.events() }] {
            let error = await rainError { try await call() }
            #expect(error?.code == .invalidArgument, "\(String(describing: error))")
            #expect(error?.details.reason == "provider_closed")
        }
        // The daemon's session is another matter: a new provider uses it as before.
        let other = RainProvider(RainWalletConfig(socketPath: h.socketPath))
        #expect(try await other.currentAuthState() == .unauthenticated)
    }
}
