import Foundation
import RainAuthorityAPI
import RainCore
import RainTestSupport
import RainTransport
import RainWallet
import RainWire
import Synchronization
import Testing

@testable import RainStore

/// A login on device B ends device A's session at once, pushed by the
/// authority on A's `WatchRevocations` stream, without any call from A or its client. Each test
/// watches A through the client library only (`onSessionExpired`, `authState`) and makes no call
/// to A after A's login; the latency bound is 10 s (CI), the figure on an idle machine is under
/// one second (`scripts/revocation-latency`).
@Suite("Pushed revocations (real daemons)", .serialized)
struct RevocationPushIntegrationTests {
    /// The latency bound CI asserts.
    static let bound: Duration = .seconds(10)

    /// A's client, watching: the expiry hook and the auth state, once the session is seen active.
    struct Watched {
        let provider: RainProvider
        let expiries = Recorder<ExpiryReason>()
        let auth: StreamLog<AuthState>

        init(_ provider: RainProvider) async throws {
            self.provider = provider
            let expiries = expiries
            provider.onSessionExpired { expiries.append($0) }
            auth = StreamLog(provider.authState)
            #expect(await eventually { auth.values.all.last == .authenticated })
            #expect(await eventually { provider.expiryWatchStatus.hasSeenActiveSession })
        }

        /// Waits (within the bound) for one expiry and the unauthenticated state.
        func expectExpired(_ reason: ExpiryReason?, since start: ContinuousClock.Instant) async {
            #expect(await eventually(timeout: RevocationPushIntegrationTests.bound) { expiries.count == 1 })
            let elapsed = ContinuousClock.now - start
            if let reason { #expect(expiries.all == [reason]) }
            #expect(await eventually(timeout: .seconds(2)) { auth.values.all.last == .unauthenticated })
            #expect(elapsed < RevocationPushIntegrationTests.bound, "expiry after \(elapsed)")
        }
    }

    @Test("a login on device B: A's client gets onSessionExpired(revokedElsewhere) and authState unauthenticated, A idle")
    func loginElsewhereEndsTheOtherDevice() async throws {
        // A lifetime of 10 minutes: no refresh timer of A can fire during the test.
        let h = try await MultiDevice.up(devices: 2, lifetime: 600)
        defer { h.down() }
        let email = "pushed@example.com"
        _ = try await h.logIn(0, email: email)
        #expect(await eventually { h.log(0).contains("revocations.connected") })
        let a = try await Watched(h.provider(0))
        let start = ContinuousClock.now
        _ = try await h.logIn(1, email: email)
        await a.expectExpired(.revokedElsewhere, since: start)
        // The check the push triggered ended it (nothing polled: no timer, no call from the client).
        #expect(await eventually(timeout: .seconds(2)) { h.log(0).contains("session.checked") })
        #expect(h.log(0).contains("session.ended"))
        #expect(try await h.provider(1).currentSession().authState == .authenticated)
    }

    @Test("two authority instances on PostgreSQL: a login through instance 0 reaches a device connected to instance 1")
    func acrossInstances() async throws {
        // device0 (A) uses authority 1; device1 (B) uses authority 0.
        let c = try await SharedStoreCluster.up(devices: [1, 0], sendCooldown: 0)
        defer { c.down() }
        try await c.waitForLog("device0", "revocations.connected", occurrences: 1)
        let email = "pushed-shared@example.com"
        let onA = c.provider(0)
        try await onA.sendLoginCode(to: .email(email))
        _ = try await onA.confirmLoginCodeReturningSession(try #require(try await onA.devOutbox().last?.code))
        let a = try await Watched(onA)
        #expect(c.log("authority1").contains("revocations.listening"))
        #expect(await eventually { c.log("authority0").contains("revocations.listening") })
        let onB = c.provider(1)
        let start = ContinuousClock.now
        try await onB.sendLoginCode(to: .email(email))
        _ = try await onB.confirmLoginCodeReturningSession(try #require(try await onB.devOutbox().last?.code))
        await a.expectExpired(.revokedElsewhere, since: start)
    }

    @Test("a push lost while A's authority was down is caught when A reconnects")
    func lostPushCaughtAtReconnect() async throws {
        let c = try await SharedStoreCluster.up(devices: [1, 0], sendCooldown: 0)
        defer { c.down() }
        try await c.waitForLog("device0", "revocations.connected", occurrences: 1)
        let email = "pushed-lost@example.com"
        let onA = c.provider(0)
        try await onA.sendLoginCode(to: .email(email))
        _ = try await onA.confirmLoginCodeReturningSession(try #require(try await onA.devOutbox().last?.code))
        let a = try await Watched(onA)
        // A's authority dies: its stream is lost, and so is any NOTIFY sent meanwhile.
        await c.killAuthority(1)
        try await c.waitForLog("device0", "revocations.lost", occurrences: 1)
        let onB = c.provider(1)
        try await onB.sendLoginCode(to: .email(email))
        _ = try await onB.confirmLoginCodeReturningSession(try #require(try await onB.devOutbox().last?.code))
        #expect(a.expiries.count == 0)
        let start = ContinuousClock.now
        _ = try await c.startAuthority(1, sendCooldown: 0)
        // The reconnect's check finds the session revoked.
        await a.expectExpired(.revokedElsewhere, since: start)
        try await c.waitForLog("device0", "revocations.connected", occurrences: 2)
    }

    @Test("a hung authority (SIGSTOP): A's silent stream is dropped after 2.5 heartbeats, and A reconnects once it runs again")
    func hungAuthorityIsDropped() async throws {
        // Heartbeats every 200 ms: the device drops a stream silent for 500 ms.
        let h = try await MultiDevice.up(
            devices: 1, lifetime: 600, arguments: ["--authority-flag", "--revocation-heartbeat", "--authority-flag", "0.2"])
        defer { h.down() }
        func connections() -> Int { h.log(0).components(separatedBy: "revocations.connected").count - 1 }
        #expect(await eventually { connections() == 1 })
        // Stopped before its first heartbeat reached the device, the authority would leave the
        // device no interval to bound the silence by (a loaded machine did that once).
        #expect(await eventually(timeout: Self.bound) { h.log(0).contains("revocations.armed") })
        let pid = try #require(h.pid("authority"))
        // A stopped process keeps its sockets open: no FIN, no RST; only the silence tells.
        kill(pid, SIGSTOP)
        defer { kill(pid, SIGCONT) }  // before `down`, which could not stop a stopped process
        #expect(await eventually(timeout: Self.bound) { h.log(0).contains("revocations.idle") })
        #expect(connections() == 1)
        kill(pid, SIGCONT)
        // The reconnect's `.connected` is what makes the device check its sessions.
        #expect(await eventually(timeout: Self.bound) { connections() == 2 })
    }

    @Test("instance 1 lost its LISTEN while instance 0 revoked A's session: at the LISTEN reconnect A rechecks and ends it")
    func listenReconnectRechecks() async throws {
        // device0 (A) uses authority 1; device1 (B) uses authority 0.
        let c = try await SharedStoreCluster.up(devices: [1, 0], sendCooldown: 0)
        defer { c.down() }
        try await c.waitForLog("device0", "revocations.connected", occurrences: 1)
        let email = "pushed-relisten@example.com"
        let onA = c.provider(0)
        let onB = c.provider(1)
        func logIn(_ p: RainProvider) async throws {
            try await p.sendLoginCode(to: .email(email))
            _ = try await p.confirmLoginCodeReturningSession(try #require(try await p.devOutbox().last?.code))
        }
        // B twice: the second login replaces B's first session, so instance 0 has NOTIFYed once
        // (its NOTIFY connection is open before new connections are refused).
        try await logIn(onB)
        try await logIn(onB)
        try await logIn(onA)
        let a = try await Watched(onA)
        #expect(await eventually { c.log("authority0").contains("revocations.listening") })
        #expect(await eventually { c.log("authority1").contains("revocations.listening") })

        // Both instances lose their LISTEN connection and cannot open it again yet.
        // A database's connections are switched off from another one (the server's own).
        let admin = try PostgresConnection(url: c.storeURL)
        let server = try PostgresConnection(url: try await PostgresTestCluster.serverURL())
        let databaseName = try admin.query("SELECT current_database()", operation: "name").first?.values.first.flatMap {
            if case .text(let t) = $0 { return t }
            return nil
        }
        let database = try #require(databaseName)
        try server.executeSimple("ALTER DATABASE \(database) ALLOW_CONNECTIONS false", operation: "close")
        _ = try admin.query(
            """
            SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = current_database() \
            AND query = 'LISTEN rain_revocations'
            """, operation: "terminate")
        // B logs in again through instance 0: its NOTIFY reaches no instance.
        try await logIn(onB)
        #expect(a.expiries.count == 0)
        let start = ContinuousClock.now
        try server.executeSimple("ALTER DATABASE \(database) ALLOW_CONNECTIONS true", operation: "open")
        try await c.waitForLog("authority1", "revocations.recheck", occurrences: 1)
        await a.expectExpired(.revokedElsewhere, since: start)
        // The stream was never lost: the recheck, not a reconnect, caught it.
        #expect(c.log("device0").components(separatedBy: "revocations.connected").count - 1 == 1)
    }

    /// A daemon with two profiles of one app (the harness reads a profile's outbox by its app id:
    /// "first"), the first logged in as `email`.
    static func twoProfilesOfOneApp(_ email: String) async throws -> (DaemonHarness, first: RainProvider) {
        let h = try await DaemonHarness.start(config: #"{"profiles": {"second": {"appID": "first"}}}"#)
        let first = h.provider(profile: "first")
        do {
            try await h.logIn(first, .email(email))
        } catch {
            h.shutdown()
            throw error
        }
        return (h, first)
    }

    /// The same account logs in on the profile "second"; returns once that login completed.
    static func logInOnSecond(_ h: DaemonHarness, _ email: String) async throws {
        let second = h.provider(profile: "second")
        try await second.sendLoginCode(to: .email(email))
        let code = try await h.waitForCode(for: email, count: 2, profile: "first")
        _ = try await second.confirmLoginCodeReturningSession(code)
    }

    @Test("embedded authority: a login on another profile of the same app ends the first one in-process")
    func embeddedInProcess() async throws {
        let (h, first) = try await Self.twoProfilesOfOneApp("pushed-embedded@example.com")
        defer { h.shutdown() }
        let a = try await Watched(first)
        let start = ContinuousClock.now
        try await Self.logInOnSecond(h, "pushed-embedded@example.com")
        // The same device replaced the session: the authority refuses it as revoked, which the
        // device reports as a session that could not go on.
        await a.expectExpired(nil, since: start)
        #expect(try await h.provider(profile: "second").currentSession().authState == .authenticated)
    }

    @Test("embedded authority: a kept Account/Get or Wallet/Get is never answered once a login elsewhere completed")
    func keptReadsEndWithTheLoginElsewhere() async throws {
        let (h, first) = try await Self.twoProfilesOfOneApp("kept-reads@example.com")
        defer { h.shutdown() }
        // Read twice: the second is answered from what the daemon keeps, on its quick lane.
        let account = try await first.account()
        #expect(try await first.account() == account)
        _ = try await first.getWallet()
        _ = try await first.getWallet()
        try await Self.logInOnSecond(h, "kept-reads@example.com")
        // The login completed: the very next reads of the first profile are refused, not kept.
        let account2 = await rainError { _ = try await first.account() }
        #expect(account2?.code == .sessionExpired, "\(String(describing: account2))")
        let wallet = await rainError { _ = try await first.getWallet() }
        #expect(wallet?.code == .sessionExpired, "\(String(describing: wallet))")
        #expect(try await h.provider(profile: "second").account().accountID == account.accountID)
    }

    @Test("reconnects leak no descriptor: after three authority restarts the device holds no more than before")
    func noDescriptorLeakAcrossReconnects() async throws {
        let h = try await MultiDevice.up(devices: 1, lifetime: 600)
        defer { h.down() }
        let pid = try #require(h.pid("device1"))
        func connections() -> Int { h.log(0).components(separatedBy: "revocations.connected").count - 1 }
        func descriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1 }
        #expect(await eventually { connections() == 1 })
        let before = descriptors()
        for round in 2...4 {
            try h.killAuthority()
            try await h.restartAuthority()
            #expect(await eventually(timeout: Self.bound) { connections() == round })
        }
        // A closed connection's descriptor goes when its reader thread has ended.
        #expect(await eventually(timeout: .seconds(2)) { descriptors() <= before }, "\(descriptors()) > \(before)")
    }

    @Test("the stream is refused without a device proof (RAIN_501 device_proof_required) by a real authority")
    func refusedWithoutProof() async throws {
        let h = try await MultiDevice.up(devices: 1, lifetime: 600)
        defer { h.down() }
        let connection = try ClientConnection(tcp: try TCPAddress(parsing: h.authority, field: "authority"))
        defer { connection.close() }
        let (_, messages) = try connection.openStream(
            method: AuthorityMethod.watchRevocations, payload: try AuthorityWatchRevocationsRequest().encode())
        // Answered after the stream's request (one loop, in order): its refusal was sent before.
        _ = try await connection.call(method: AuthorityMethod.getInfo, payload: try GetInfoRequest().encode())
        connection.close()
        var refusal: RainError?
        do {
            for try await _ in messages {}
        } catch {
            refusal = error as? RainError
        }
        #expect(refusal?.code == .provider)
        #expect(refusal?.details.reason == DeviceBinding.proofRequiredReason)
    }
}
