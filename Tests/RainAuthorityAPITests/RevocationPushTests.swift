import Foundation
import RainAuthorityAPI
import RainAuthorityServer
import RainCore
import RainCrypto
import RainTestSupport
import RainTransport
import RainWire
import Synchronization
import Testing

@testable import RainAuthority
@testable import RainStore

/// What a `RevocationFeed` reported, in order.
final class FeedEvents: Sendable {
    private let events = Mutex<[RevocationFeed.Event]>([])
    func append(_ event: RevocationFeed.Event) { events.withLock { $0.append(event) } }
    var all: [RevocationFeed.Event] { events.withLock { $0 } }
    var connections: Int { all.filter { $0 == .connected }.count }
    var revocations: [AuthorityRevocation] {
        all.compactMap {
            if case .revoked(let r) = $0 { return r }
            return nil
        }
    }

    /// Waits until `condition` holds, checking every 10 ms: at once on an idle machine; the 60 s
    /// deadline is for the whole suite on two busy cores, where a first request can take >10 s.
    func wait(_ condition: (FeedEvents) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition(self) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }
}

/// Revocations pushed on `Authority/WatchRevocations`.
@Suite("Pushed revocations")
struct RevocationPushTests {
    static let fastBackoff = RevocationFeed.Backoff(initialDelay: .milliseconds(20), maxDelay: .milliseconds(100))

    /// Opens `WatchRevocations` on a fresh connection that proved nothing and returns how it ended:
    /// a GetInfo answered after it (one loop, in order) means any refusal was already sent, so the
    /// connection is then closed and the stream read to its end without waiting.
    static func openUnproven(_ address: String) async throws -> RainError? {
        let connection = try ClientConnection(tcp: try TCPAddress(parsing: address, field: "authority"))
        let (_, messages) = try connection.openStream(
            method: AuthorityMethod.watchRevocations, payload: try AuthorityWatchRevocationsRequest().encode())
        _ = try await connection.call(method: AuthorityMethod.getInfo, payload: try GetInfoRequest().encode())
        connection.close()
        do {
            for try await _ in messages {}
        } catch {
            return error as? RainError
        }
        return nil
    }

    func feed(_ f: RemoteFixture, events: FeedEvents, device: any DeviceKeyHolder = FixtureDevice.keys) throws -> RevocationFeed {
        RevocationFeed(
            address: try TCPAddress(parsing: f.server.address, field: "authority"), tls: nil, device: device,
            connectTimeout: .seconds(30), backoff: Self.fastBackoff, logger: f.logger.child("feed")
        ) { events.append($0) }
    }

    @Test("without a device proof the stream is refused RAIN_501 device_proof_required; nothing is subscribed")
    func refusedWithoutProof() async throws {
        try await RemoteFixture.with { f in
            let refusal = try await Self.openUnproven(f.server.address)
            #expect(refusal?.code == .provider)
            #expect(refusal?.details.reason == DeviceBinding.proofRequiredReason)
            #expect(f.embedded.revocations.subscriberCount == 0)
        }
    }

    @Test("an authority served without a hub refuses the stream RAIN_202 revocations_unavailable")
    func refusedWithoutHub() async throws {
        let logger = Logger(label: "test", minimumLevel: .error)
        let service = AuthorityService(authority: SlowAuthority(delay: .seconds(1)), logger: logger)
        let server = try RunningTCPServer(handler: service, logger: logger)
        let refusal = try await Self.openUnproven(server.address)
        try await server.stop()
        #expect(refusal?.code == .unauthorized)
        #expect(refusal?.details.reason == "revocations_unavailable")
    }

    @Test("a login on device B is pushed to device A's feed (revoked_elsewhere), not to B's; closing the feed unsubscribes")
    func loginElsewhereIsPushed() async throws {
        try await RemoteFixture.with { f in
            _ = try await f.login(device: "device-a")
            let eventsA = FeedEvents()
            let eventsB = FeedEvents()
            let feedA = try feed(f, events: eventsA)
            let feedB = try feed(f, events: eventsB, device: TestDeviceKeys(deviceID: "device-b", keys: [FixtureDevice.key]))
            feedA.start()
            feedB.start()
            #expect(await eventsA.wait { $0.connections == 1 })
            #expect(await eventsB.wait { $0.connections == 1 })
            #expect(f.embedded.revocations.subscriberCount == 2)

            _ = try await f.login(device: "device-b")
            #expect(await eventsA.wait { !$0.revocations.isEmpty })
            #expect(
                eventsA.revocations == [
                    AuthorityRevocation(appID: RemoteFixture.app, deviceID: "device-a", reason: "revoked_elsewhere")
                ])
            #expect(eventsB.revocations.isEmpty)

            feedA.stop()
            feedB.stop()
            #expect(await eventsA.wait { _ in f.embedded.revocations.subscriberCount == 0 })
        }
    }

    @Test("the authority stopped and restarted: the feed reconnects with backoff and reports .connected again")
    func reconnects() async throws {
        try await RemoteFixture.with { f in
            let events = FeedEvents()
            let feed = try feed(f, events: events)
            feed.start()
            defer { feed.stop() }
            #expect(await events.wait { $0.connections == 1 })
            let port = f.server.port
            try await f.server.stop()
            #expect(f.embedded.revocations.subscriberCount == 0)
            let restarted = try RunningTCPServer(handler: f.service, port: port, logger: f.logger.child("loop2"))
            #expect(await events.wait { $0.connections == 2 })
            #expect(feed.connectCount == 2)
            #expect(f.embedded.revocations.subscriberCount == 1)
            feed.stop()
            try await restarted.stop()
        }
    }

    @Test("the backoff doubles from its initial delay up to its cap; a jittered wait is between half and all of it")
    func backoff() {
        let b = RevocationFeed.Backoff(initialDelay: .milliseconds(200), maxDelay: .seconds(10))
        #expect(
            (1...8).map { b.delay(afterFailures: $0) } == [
                .milliseconds(200), .milliseconds(400), .milliseconds(800), .milliseconds(1600), .milliseconds(3200),
                .milliseconds(6400), .seconds(10), .seconds(10),
            ])
        #expect(b.delay(afterFailures: 1000) == .seconds(10))
        for failures in [1, 3, 50] {
            let full = b.delay(afterFailures: failures)
            for _ in 0..<50 {
                let d = b.jitteredDelay(afterFailures: failures)
                #expect(d >= full / 2 && d <= full)
            }
        }
    }

    @Test("the hub delivers each revocation to its device's subscribers and to the all-devices ones, and relays it")
    func hub() {
        let hub = RevocationHub()
        let seen = Mutex<[String]>([])
        let relayed = Mutex<[AuthorityRevocation]>([])
        let a = hub.subscribe(deviceID: "a") { r in seen.withLock { $0.append("a:\(r.deviceID)") } }
        _ = hub.subscribe(deviceID: nil) { r in seen.withLock { $0.append("*:\(r.deviceID)") } }
        hub.setRelay { r in relayed.withLock { $0.append(r) } }
        let ra = AuthorityRevocation(appID: "app", deviceID: "a", reason: "revoked_elsewhere")
        let rb = AuthorityRevocation(appID: "app", deviceID: "b", reason: "revoked_elsewhere")
        hub.publish([ra, rb])
        #expect(seen.withLock { $0 }.sorted() == ["*:a", "*:b", "a:a"])
        #expect(relayed.withLock { $0 } == [ra, rb])
        // What another instance published is delivered here, never relayed back.
        hub.deliver([ra])
        #expect(relayed.withLock { $0 }.count == 2)
        // A recheck goes to every subscriber, whatever its device, and is never relayed.
        seen.withLock { $0 = [] }
        let rechecks = Mutex(0)
        _ = hub.subscribe(deviceID: "c") { r in if r.isRecheck { rechecks.withLock { $0 += 1 } } }
        hub.recheckAll()
        #expect(seen.withLock { $0 }.sorted() == ["*:", "a:"])
        #expect(rechecks.withLock { $0 } == 1)
        #expect(relayed.withLock { $0 }.count == 2)
        hub.unsubscribe(a)
        #expect(hub.subscriberCount == 2)
    }

    @Test("heartbeats and rechecks survive the wire; a revocation is neither")
    func streamMessageKinds() throws {
        let heartbeat = AuthorityRevocation.heartbeat(interval: .milliseconds(1500))
        #expect(heartbeat.heartbeatIntervalMilliseconds == 1500 && heartbeat.isHeartbeat && !heartbeat.isRecheck)
        #expect(try AuthorityRevocation.decode(try heartbeat.encode()) == heartbeat)
        let recheck = try AuthorityRevocation.decode(try AuthorityRevocation.recheck.encode())
        #expect(recheck.isRecheck && !recheck.isHeartbeat)
        let revocation = AuthorityRevocation(appID: "app", deviceID: "d", reason: "logout")
        let decoded = try AuthorityRevocation.decode(try revocation.encode())
        #expect(decoded == revocation && !decoded.isHeartbeat && !decoded.isRecheck)
    }

    @Test("a recheck from the hub reaches the feed as .recheck, not as a revocation")
    func recheckIsPushed() async throws {
        try await RemoteFixture.with { f in
            let events = FeedEvents()
            let feed = try feed(f, events: events)
            feed.start()
            #expect(await events.wait { $0.connections == 1 })
            f.embedded.revocations.recheckAll()
            #expect(await events.wait { $0.all.contains(.recheck) })
            #expect(events.revocations.isEmpty)
            feed.stop()
        }
    }
}

/// Heartbeats on the stream: a device tells a dead link (a partition, a hung authority,
/// a NAT that forgot the connection) from a quiet one. The authority's heartbeats and the feed's
/// idle bound run on manual clocks of their own: an authority whose clock never moves is one that
/// sends nothing after the stream's opening heartbeat, as a hung one.
@Suite("Revocation heartbeats")
struct RevocationHeartbeatTests {
    static let interval: Duration = .milliseconds(100)

    /// An authority service on `f`'s authority, with heartbeats every `interval` on `clock` (none for nil).
    static func server(_ f: RemoteFixture, heartbeat: Duration?, clock: ManualClock) throws -> RunningTCPServer {
        let service = AuthorityService(
            authority: f.embedded, version: "test", logger: f.logger.child("service-hb"), revocations: f.embedded.revocations,
            revocationHeartbeat: heartbeat, clock: clock)
        return try RunningTCPServer(handler: service, logger: f.logger.child("loop-hb"))
    }

    static func feed(_ server: RunningTCPServer, _ f: RemoteFixture, clock: ManualClock, events: FeedEvents) throws
        -> RevocationFeed
    {
        RevocationFeed(
            address: try TCPAddress(parsing: server.address, field: "authority"), tls: nil, device: FixtureDevice.keys,
            connectTimeout: .seconds(30), backoff: RevocationPushTests.fastBackoff, clock: clock, logger: f.logger.child("feed")
        ) { events.append($0) }
    }

    @Test("the idle bound is 2.5 announced intervals, an interval counted as at least 50 ms")
    func idleBound() {
        #expect(RevocationFeed.idleBound(heartbeatInterval: .seconds(15)) == .milliseconds(37_500))
        #expect(RevocationFeed.idleBound(heartbeatInterval: .milliseconds(100)) == .milliseconds(250))
        #expect(RevocationFeed.idleBound(heartbeatInterval: .milliseconds(1)) == .milliseconds(125))
    }

    @Test("a hung authority: the stream silent for 2.5 intervals is dropped, and the feed reconnects (.connected: the check)")
    func silentStreamIsDropped() async throws {
        try await RemoteFixture.with { f in
            let serverClock = ManualClock()  // never moved: nothing after the opening heartbeat
            let server = try Self.server(f, heartbeat: Self.interval, clock: serverClock)
            let clock = ManualClock()
            let events = FeedEvents()
            let feed = try Self.feed(server, f, clock: clock, events: events)
            feed.start()
            #expect(await events.wait { _ in feed.heartbeatCount == 1 })
            #expect(events.connections == 1)
            let bound = RevocationFeed.idleBound(heartbeatInterval: Self.interval)
            // Due timers run inside `advance`: these checks need no wait.
            clock.advance(by: bound - .milliseconds(10))
            #expect(feed.idleDropCount == 0)
            clock.advance(by: .milliseconds(10))
            #expect(feed.idleDropCount == 1)
            // Then the backoff wait, and the reconnect with its check.
            #expect(await events.wait { _ in clock.pendingTimerCount == 1 })
            clock.advance(by: .seconds(1))
            #expect(await events.wait { $0.connections == 2 })
            #expect(await events.wait { _ in feed.heartbeatCount == 2 })
            #expect(f.logSink.captured.contains { $0.contains("revocations.idle") })
            feed.stop()
            try await server.stop()
        }
    }

    @Test("an authority that announces heartbeats and hangs before the first: dropped after the connect timeout")
    func hungBeforeTheFirstHeartbeat() async throws {
        try await RemoteFixture.with { f in
            let service = AuthorityService(
                authority: f.embedded, version: "test", logger: f.logger.child("service-hb"),
                revocations: f.embedded.revocations, revocationHeartbeat: Self.interval, clock: ManualClock())
            #expect(service.capabilities.contains(AuthorityCapability.revocationHeartbeat))
            // Its GetInfo lists the capability; its streams stay open and bring nothing.
            let server = try RunningTCPServer(handler: MuteStreams(service), logger: f.logger.child("loop-mute"))
            let clock = ManualClock()
            let events = FeedEvents()
            let connectTimeout: Duration = .seconds(5)
            let feed = RevocationFeed(
                address: try TCPAddress(parsing: server.address, field: "authority"), tls: nil, device: FixtureDevice.keys,
                connectTimeout: connectTimeout, backoff: RevocationPushTests.fastBackoff, clock: clock,
                logger: f.logger.child("feed")
            ) { events.append($0) }
            feed.start()
            #expect(await events.wait { $0.connections == 1 })
            // The first-heartbeat bound, armed once the stream is up (its only timer then).
            #expect(await events.wait { _ in clock.pendingTimerCount == 1 })
            clock.advance(by: connectTimeout - .milliseconds(10))
            #expect(feed.idleDropCount == 0)
            clock.advance(by: .milliseconds(10))
            #expect(feed.idleDropCount == 1)
            #expect(feed.heartbeatCount == 0)
            #expect(f.logSink.captured.contains { $0.contains("revocations.idle") && $0.contains("no first heartbeat") })
            // Then the backoff wait, and the reconnect with its check.
            #expect(await events.wait { _ in clock.pendingTimerCount == 1 })
            clock.advance(by: .seconds(1))
            #expect(await events.wait { $0.connections == 2 })
            feed.stop()
            try await server.stop()
        }
    }

    @Test("heartbeats keep a quiet stream open: each one moves the bound")
    func heartbeatsKeepTheStream() async throws {
        try await RemoteFixture.with { f in
            let serverClock = ManualClock()
            let server = try Self.server(f, heartbeat: Self.interval, clock: serverClock)
            let clock = ManualClock()
            let events = FeedEvents()
            let feed = try Self.feed(server, f, clock: clock, events: events)
            feed.start()
            #expect(await events.wait { _ in feed.heartbeatCount == 1 })
            for n in 2...8 {
                serverClock.advance(by: Self.interval)
                #expect(await events.wait { _ in feed.heartbeatCount == n })
                clock.advance(by: Self.interval)
            }
            // 700 ms of the feed's time, well past one bound (250 ms): never dropped.
            #expect(feed.idleDropCount == 0)
            #expect(events.connections == 1)
            feed.stop()
            try await server.stop()
        }
    }

    @Test("an authority that sends no heartbeat (older) is never timed out")
    func noHeartbeatNoBound() async throws {
        try await RemoteFixture.with { f in
            let quiet = AuthorityService(
                authority: f.embedded, version: "test", logger: f.logger.child("service-quiet"),
                revocations: f.embedded.revocations, revocationHeartbeat: nil)
            #expect(!quiet.capabilities.contains(AuthorityCapability.revocationHeartbeat))
            let server = try Self.server(f, heartbeat: nil, clock: ManualClock())
            let clock = ManualClock()
            let events = FeedEvents()
            let feed = try Self.feed(server, f, clock: clock, events: events)
            feed.start()
            #expect(await events.wait { $0.connections == 1 })
            #expect(await events.wait { _ in clock.pendingTimerCount == 0 })
            clock.advance(by: .seconds(3600))
            #expect(feed.idleDropCount == 0)
            #expect(feed.heartbeatCount == 0)
            #expect(events.connections == 1)
            feed.stop()
            try await server.stop()
        }
    }

    @Test("the heartbeat timer runs only while a stream is open")
    func heartbeatTimerStopsWithTheStreams() async throws {
        try await RemoteFixture.with { f in
            let serverClock = ManualClock()
            let server = try Self.server(f, heartbeat: Self.interval, clock: serverClock)
            #expect(serverClock.pendingTimerCount == 0)
            let events = FeedEvents()
            let feed = try Self.feed(server, f, clock: ManualClock(), events: events)
            feed.start()
            #expect(await events.wait { _ in feed.heartbeatCount == 1 })
            #expect(serverClock.pendingTimerCount == 1)
            feed.stop()
            #expect(await events.wait { _ in f.embedded.revocations.subscriberCount == 0 })
            serverClock.advance(by: Self.interval)
            #expect(serverClock.pendingTimerCount == 0)
            try await server.stop()
        }
    }
}

/// The feed's backoff on the injected clock: no attempt before the clock moves.
@Suite("Revocation feed backoff")
struct RevocationFeedBackoffTests {
    @Test("nothing listening: one attempt per backoff wait, none while the clock stands still (no busy loop)")
    func noBusyLoop() async throws {
        // A port nothing listens on: connects are refused at once (and no test running alongside
        // can be given the port meanwhile).
        let refused = try RefusedPort()
        let port = refused.port
        defer { withExtendedLifetime(refused) {} }
        let clock = ManualClock()
        let events = FeedEvents()
        let feed = RevocationFeed(
            address: try TCPAddress(parsing: "127.0.0.1:\(port)", field: "authority"), tls: nil,
            device: FixtureDevice.keys, connectTimeout: .seconds(1),
            backoff: RevocationFeed.Backoff(initialDelay: .milliseconds(200), maxDelay: .seconds(10)), clock: clock,
            logger: Logger(label: "test", minimumLevel: .error)
        ) { events.append($0) }
        feed.start()
        defer { feed.stop() }
        for expected in 2...5 {
            // The feed waits on its backoff timer: until the clock moves, no other attempt.
            #expect(await events.wait { _ in clock.pendingTimerCount == 1 })
            #expect(feed.attemptCount == expected - 1)
            // Past the longest jittered wait.
            clock.advance(by: .seconds(10))
            #expect(await events.wait { _ in feed.attemptCount == expected })
        }
        #expect(feed.attemptCount == 5)
        #expect(events.connections == 0)
    }
}

/// An authority whose `WatchRevocations` streams open and then bring nothing, not even the opening
/// heartbeat its `GetInfo` promises: a hung one, seen from the device. Everything else is `inner`'s.
private final class MuteStreams: ServerHandler {
    let inner: AuthorityService
    init(_ inner: AuthorityService) { self.inner = inner }

    func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision {
        request.method == AuthorityMethod.watchRevocations ? .stream : inner.handle(request, context: context)
    }
    func cancel(connection: ConnectionID, requestID: UInt64) { inner.cancel(connection: connection, requestID: requestID) }
    func connectionClosed(_ connection: ConnectionID) { inner.connectionClosed(connection) }
}
