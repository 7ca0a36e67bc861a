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

/// Issue 19: revocations pushed on `Authority/WatchRevocations`.
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
        await server.stop()
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
            await f.server.stop()
            #expect(f.embedded.revocations.subscriberCount == 0)
            let restarted = try RunningTCPServer(handler: f.service, port: port, logger: f.logger.child("loop2"))
            #expect(await events.wait { $0.connections == 2 })
            #expect(feed.connectCount == 2)
            #expect(f.embedded.revocations.subscriberCount == 1)
            feed.stop()
            await restarted.stop()
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
        hub.unsubscribe(a)
        #expect(hub.subscriberCount == 1)
    }
}

/// The feed's backoff on the injected clock: no attempt before the clock moves.
@Suite("Revocation feed backoff")
struct RevocationFeedBackoffTests {
    @Test("nothing listening: one attempt per backoff wait, none while the clock stands still (no busy loop)")
    func noBusyLoop() async throws {
        // A port that was just listening and is closed now: connects are refused at once.
        let fd = try TCPSocket.listen(try TCPAddress(parsing: "127.0.0.1:0", field: "listen"))
        let port = try TCPSocket.localPort(of: fd)
        close(fd)
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
