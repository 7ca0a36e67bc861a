import Foundation
import RainTestSupport
import RainWallet
import Synchronization
import Testing

/// Collects a stream's values in the background, for as long as it lives.
final class StreamLog<T: Sendable & Equatable>: Sendable {
    let values = Recorder<T>()
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<T>) {
        let values = self.values
        task = Task {
            for await value in stream { values.append(value) }
        }
    }

    deinit { task.cancel() }

    /// Waits until the latest value is `value`.
    func waitForLatest(_ value: T) async -> Bool {
        await until { values.all.last == value }
    }
}

/// Waits until `condition` holds, checking it every 10 ms. No deadline of its own: a loaded machine
/// slows the test down without failing it, and the suite's time limit ends one that would hang
/// (the task is cancelled: then it returns false).
func until(_ condition: () async throws -> Bool) async rethrows -> Bool {
    while try await !condition() {
        if Task.isCancelled { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}

/// The library's streams and `onSessionExpired` against a real daemon that stops, restarts and
/// starts late under a subscribed client.
@Suite(.timeLimit(.minutes(2))) struct ClientStreamTests {
    /// Short, so that a test does not wait long for the reconnection.
    static let backoff = ReconnectBackoff(initial: .milliseconds(20), maximum: .milliseconds(200))

    /// Sessions of 60 s that are not refreshed: moving the daemon's clock past them ends them.
    static let shortSessions = """
        {"authority": {"accessTokenLifetimeSeconds": 60},
         "profiles": {"default": {"sessionPolicy": {"autoRefresh": false}}}}
        """

    static func provider(_ h: DaemonHarness) -> RainProvider {
        RainProvider(RainWalletConfig(socketPath: h.socketPath), reconnectBackoff: backoff)
    }

    /// A test clock file beside the harness directories, and a daemon that reads it.
    static func startWithClock(config: String) async throws -> (DaemonHarness, TestClockFile) {
        let clock = try TestClockFile(path: "/tmp/rwclock-\(UInt32.random(in: 0...UInt32.max))")
        do {
            let h = try await DaemonHarness.start(config: config, environment: clock.environment.mapValues { Optional($0) })
            return (h, clock)
        } catch {
            try? FileManager.default.removeItem(atPath: clock.path)
            throw error
        }
    }

    /// Moves the daemon's clock and waits until it applied the move.
    static func advance(_ clock: TestClockFile, by delta: Duration, _ h: DaemonHarness) async throws {
        try clock.advance(by: delta)
        let line = "clock.advanced offsetMilliseconds=\(clock.elapsed.milliseconds)"
        #expect(await until { h.log.contains(line) })
    }

    @Test("authState shows loading while the daemon restarts, then the session again")
    func authStateSurvivesARestart() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = Self.provider(h)
        try await h.logIn(p, .email("restart-gate@example.com"))
        let gate = StreamLog(p.authState)
        #expect(await gate.waitForLatest(.authenticated))
        try await h.stop()
        #expect(await gate.waitForLatest(.loading))
        try await h.start()
        #expect(await gate.waitForLatest(.authenticated))
        // And again: the stream reconnects every time, not once.
        try await h.stop()
        #expect(await gate.waitForLatest(.loading))
        try await h.start()
        #expect(await gate.waitForLatest(.authenticated))
        #expect(gate.values.all == [.authenticated, .loading, .authenticated, .loading, .authenticated])
        // Still live: a logout shows.
        try await p.logout()
        #expect(await gate.waitForLatest(.unauthenticated))
    }

    @Test("authState and sessionState show loading until a late daemon starts, then follow it")
    func streamsWaitForALateDaemon() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let p = Self.provider(h)
        let gate = StreamLog(p.authState)
        let session = StreamLog(p.sessionState)
        #expect(await gate.waitForLatest(.loading))
        #expect(await session.waitForLatest(.loading))
        try await h.start()
        #expect(await gate.waitForLatest(.unauthenticated))
        #expect(await session.waitForLatest(SessionState.none))
        let login = try await h.logIn(p, .email("late-daemon@example.com"))
        let expiresAt = try #require(login.session.expiresAt)
        #expect(await gate.waitForLatest(.authenticated))
        #expect(await session.waitForLatest(.active(expiresAt: expiresAt)))
        #expect(gate.values.all == [.loading, .unauthenticated, .authenticated])
    }

    @Test("sessionState reports the active session and its expiry, loading across a restart, none after logout")
    func sessionStateFollowsTheSession() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = Self.provider(h)
        try await h.logIn(p, .email("session-state@example.com"))
        let expiresAt = try #require(try await p.currentSession().expiresAt)
        let session = StreamLog(p.sessionState)
        #expect(await session.waitForLatest(.active(expiresAt: expiresAt)))
        try await h.stop()
        #expect(await session.waitForLatest(.loading))
        try await h.start()
        #expect(await session.waitForLatest(.active(expiresAt: expiresAt)))
        try await p.logout()
        #expect(await session.waitForLatest(SessionState.none))
        #expect(session.values.all == [.active(expiresAt: expiresAt), .loading, .active(expiresAt: expiresAt), .none])
    }

    @Test("sessionState shows expired when the session runs out")
    func sessionStateShowsExpiry() async throws {
        let (h, clock) = try await Self.startWithClock(config: Self.shortSessions)
        defer {
            h.shutdown()
            try? FileManager.default.removeItem(atPath: clock.path)
        }
        let p = Self.provider(h)
        try await h.logIn(p, .email("session-expiry@example.com"))
        let session = StreamLog(p.sessionState)
        let gate = StreamLog(p.authState)
        #expect(await gate.waitForLatest(.authenticated))
        try await Self.advance(clock, by: .seconds(61), h)
        #expect(await session.waitForLatest(.expired))
        #expect(await gate.waitForLatest(.unauthenticated))
    }

    @Test("onSessionExpired fires once when the session expires, and a daemon restart is no expiry")
    func expiryHookFiresOnceAndNotForARestart() async throws {
        let (h, clock) = try await Self.startWithClock(config: Self.shortSessions)
        defer {
            h.shutdown()
            try? FileManager.default.removeItem(atPath: clock.path)
        }
        let p = Self.provider(h)
        try await h.logIn(p, .email("expiry-hook@example.com"))
        let fired = Recorder<ExpiryReason>()
        p.onSessionExpired { fired.append($0) }
        #expect(await until { p.expiryWatchStatus.hasSeenActiveSession })
        try await h.stop()
        try await h.start()
        #expect(
            await until {
                p.expiryWatchStatus.connections >= 2 && p.expiryWatchStatus.hasSeenActiveSession
            })
        #expect(fired.all.isEmpty)
        try await Self.advance(clock, by: .seconds(61), h)
        #expect(await until { fired.count == 1 })
        #expect(!p.expiryWatchStatus.hasSeenActiveSession)
        // Once per session: the restart after the end reports nothing more.
        let connections = p.expiryWatchStatus.connections
        try await h.stop()
        try await h.start()
        #expect(await until { p.expiryWatchStatus.connections > connections })
        // A new session ends on its own and is reported on its own.
        try await h.logIn(p, .email("expiry-hook@example.com"))
        #expect(await until { p.expiryWatchStatus.hasSeenActiveSession })
        try await Self.advance(clock, by: .seconds(61), h)
        #expect(await until { fired.count == 2 })
        #expect(fired.all == [.expired, .expired])
    }

    @Test("onSessionExpired does not fire for logout")
    func expiryHookIgnoresLogout() async throws {
        let (h, clock) = try await Self.startWithClock(config: Self.shortSessions)
        defer {
            h.shutdown()
            try? FileManager.default.removeItem(atPath: clock.path)
        }
        let p = Self.provider(h)
        try await h.logIn(p, .email("expiry-logout@example.com"))
        let fired = Recorder<ExpiryReason>()
        p.onSessionExpired { fired.append($0) }
        #expect(await until { p.expiryWatchStatus.hasSeenActiveSession })
        try await p.logout()
        #expect(await until { !p.expiryWatchStatus.hasSeenActiveSession })
        // Past the old session's expiry: nothing ends, nothing fires; a new session's end does.
        try await Self.advance(clock, by: .seconds(61), h)
        try await h.logIn(p, .email("expiry-logout@example.com"))
        #expect(await until { p.expiryWatchStatus.hasSeenActiveSession })
        try await Self.advance(clock, by: .seconds(61), h)
        #expect(await until { fired.count == 1 })
        #expect(fired.all == [.expired])
    }

    @Test("a session that ended while the daemon was down is reported once the provider reconnects")
    func expiryWhileAwayIsReportedOnReconnect() async throws {
        let (h, clock) = try await Self.startWithClock(config: Self.shortSessions)
        defer {
            h.shutdown()
            try? FileManager.default.removeItem(atPath: clock.path)
        }
        let p = Self.provider(h)
        try await h.logIn(p, .email("expiry-away@example.com"))
        let fired = Recorder<ExpiryReason>()
        p.onSessionExpired { fired.append($0) }
        #expect(await until { p.expiryWatchStatus.hasSeenActiveSession })
        try await h.stop()
        // Down past the refresh token's lifetime (30 days): the restore cannot save the session.
        try clock.advance(by: .seconds(31 * 86_400))
        try await h.start()
        #expect(await until { fired.count == 1 })
        // The restore's refresh was refused: the daemon ends the session as not refreshable.
        #expect(fired.all == [.refreshFailed])
        #expect(try await p.currentSession().authState == .unauthenticated)
        // Reported once: another restart (the daemon no longer knows the session ended) adds nothing.
        let connections = p.expiryWatchStatus.connections
        try await h.stop()
        try await h.start()
        #expect(await until { p.expiryWatchStatus.connections > connections })
        #expect(fired.all == [.refreshFailed])
    }

    @Test("a login on another device while this device's daemon was down is reported once, as revokedElsewhere")
    func revocationWhileAwayIsReportedAfterReconnecting() async throws {
        let h = try await MultiDevice.up(devices: 2, lifetime: 60)  // no refresh during the test
        defer { h.down() }
        _ = try await h.logIn(0)
        let device = h.devices[0]
        let p = RainProvider(RainWalletConfig(socketPath: device.socket), reconnectBackoff: Self.backoff)
        let fired = Recorder<ExpiryReason>()
        p.onSessionExpired { fired.append($0) }
        #expect(await until { p.expiryWatchStatus.hasSeenActiveSession })

        // Device 1's daemon stops; meanwhile the user logs in on device 2, which revokes device 1's session.
        let pid = try #require(h.pid("device1"))
        // Started again later exactly as the harness started it (whatever flags it uses).
        let commandLine = try #require(FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"))
        let arguments = commandLine.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        let executable = try #require(arguments.first)
        kill(pid, SIGTERM)
        #expect(await until { kill(pid, 0) != 0 })
        _ = try await h.logIn(1)

        // Device 1's daemon comes back with the session it stored. Once its revocation
        // stream is up it asks the authority whether the session is still live, finds it revoked
        // and ends it, without any call from the app; the provider reports it once.
        let daemon = try TestProcess(
            executable, Array(arguments.dropFirst()), environment: h.daemonEnvironment, stderr: .file(device.log))
        try "\(daemon.pid)\n".write(toFile: "\(h.dir)/device1.pid", atomically: true, encoding: .utf8)
        #expect(await until { fired.count == 1 })
        #expect(fired.all == [.revokedElsewhere])
        #expect(await until { (try? await p.currentSession().authState) == .unauthenticated })
        let error = await rainError { _ = try await p.account() }
        #expect(error?.code == .sessionExpired)
        #expect(fired.all == [.revokedElsewhere])
    }
}
