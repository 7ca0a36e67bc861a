import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainTransport
import RainWire
import Synchronization
import Testing

@testable import RainAuthority
@testable import RainAuthorityServer

/// A monotonic clock the test moves.
final class MovingInstant: Sendable {
    let start = ContinuousClock.now
    private let offset = Mutex(Duration.zero)
    func advance(_ d: Duration) { offset.withLock { $0 += d } }
    var now: ContinuousClock.Instant { start + offset.withLock { $0 } }
}

/// Counts the renewals a lease asks for.
final class RenewalLog: Sendable {
    private let links = Mutex<[UInt64]>([])
    func append(_ link: UInt64) { links.withLock { $0.append(link) } }
    var count: Int { links.withLock { $0.count } }
}

/// The device's end of a read lease, on its own clock: when it holds, what moves its generation.
@Suite("Read lease (device)")
struct ReadLeaseTests {
    let clock = MovingInstant()
    let renewals = RenewalLog()

    func lease() -> (ReadLease, UInt64) {
        let clock = clock
        let lease = ReadLease(now: { clock.now })
        let renewals = renewals
        let link = lease.linked { renewals.append($0) }
        return (lease, link)
    }

    /// Sends a renewal now and has it answered `after` later with `ms`.
    func renew(_ lease: ReadLease, _ link: UInt64, after: Duration = .milliseconds(1), ms: UInt32 = 1000, sequence: UInt64 = 0)
        -> Bool
    {
        guard let (sentAt, _) = lease.renewalStarting(link: link) else { return false }
        clock.advance(after)
        return lease.renewed(link: link, sentAt: sentAt, leaseMilliseconds: ms, changeSequence: sequence)
    }

    @Test("no stamp before a grant; a grant holds from when the request was sent, not from when the answer came")
    func countsFromTheRequest() {
        let (lease, link) = lease()
        #expect(lease.stamp() == nil)
        _ = renew(lease, link, after: .milliseconds(400))
        let stamp = lease.stamp()
        #expect(stamp != nil)
        clock.advance(.milliseconds(599))
        #expect(lease.stamp() == stamp)
        clock.advance(.milliseconds(1))
        // 1 s after the request was sent, though the answer came 400 ms after it.
        #expect(lease.stamp() == nil)
    }

    @Test("an answer that came after the lease it grants ran out grants nothing")
    func lateAnswer() {
        let (lease, link) = lease()
        _ = renew(lease, link, after: .milliseconds(1000))
        #expect(lease.stamp() == nil)
    }

    @Test("a grant over 1 s is held to 1 s; a grant of 0 is none")
    func capped() {
        let (lease, link) = lease()
        _ = renew(lease, link, ms: 60_000)
        clock.advance(.milliseconds(998))
        #expect(lease.stamp() != nil)
        clock.advance(.milliseconds(2))
        #expect(lease.stamp() == nil)
        _ = renew(lease, link, ms: 0)
        #expect(lease.stamp() == nil)
    }

    @Test("renewed before it ran out, the generation stays; after a gap, it moves")
    func gapMovesTheGeneration() {
        let (lease, link) = lease()
        _ = renew(lease, link)
        let first = lease.stamp()
        clock.advance(.milliseconds(600))
        _ = renew(lease, link)
        #expect(lease.stamp() == first)
        clock.advance(.milliseconds(1500))
        #expect(lease.stamp() == nil)
        _ = renew(lease, link)
        let second = lease.stamp()
        #expect(second != nil && second != first)
    }

    @Test("a change notice moves the generation; a renewal that names a notice not seen moves it and asks to acknowledge")
    func notices() {
        let (lease, link) = lease()
        _ = renew(lease, link)
        let first = lease.stamp()
        lease.changed(sequence: 1)
        let second = lease.stamp()
        #expect(second != nil && second != first)
        #expect(lease.seenSequence == 1)
        // Already acted on: nothing moves.
        #expect(!renew(lease, link, sequence: 1))
        #expect(lease.stamp() == second)
        // A notice still on its way when the renewal was answered.
        #expect(renew(lease, link, sequence: 2))
        #expect(lease.stamp() != second)
        #expect(lease.seenSequence == 2)
        // A revocation or a recheck drops what was kept too.
        let third = lease.stamp()
        lease.dropKept()
        #expect(lease.stamp() != third)
    }

    @Test("the link going down ends the lease; a renewal of the old link is ignored; a new link starts afresh")
    func links() throws {
        let (lease, link) = lease()
        let (sentAt, _) = try #require(lease.renewalStarting(link: link))
        lease.unlinked()
        #expect(!lease.renewed(link: link, sentAt: sentAt, leaseMilliseconds: 1000, changeSequence: 5))
        #expect(lease.stamp() == nil)
        #expect(lease.renewalStarting(link: link) == nil)
        let next = lease.linked { _ in }
        #expect(next != link)
        #expect(lease.seenSequence == 0)
        _ = renew(lease, next)
        #expect(lease.stamp() != nil)
    }

    @Test("reads ask for the next lease once less than half is left, one renewal at a time")
    func readsRenew() {
        let (lease, link) = lease()
        #expect(lease.stamp() == nil)
        #expect(lease.stamp() == nil)
        #expect(renewals.count == 1, "one renewal for two reads without a lease")
        _ = renew(lease, link)
        #expect(lease.stamp() != nil)
        #expect(renewals.count == 1, "a fresh lease asks for nothing")
        clock.advance(.milliseconds(600))
        #expect(lease.stamp() != nil)
        #expect(lease.stamp() != nil)
        #expect(renewals.count == 2)
    }
}

/// The authority's end: change notices on the stream, and a change held until the leased reader
/// acknowledged it or its lease ran out. A real server and a raw client that speaks for device A.
@Suite("Read leases (authority)")
struct ReadLeasesAuthorityTests {
    /// A connection that proved device A's key, with its revocation stream open.
    struct Link {
        let connection: ClientConnection
        let streamID: UInt64
        let messages: AsyncThrowingStream<[UInt8], any Error>

        static func open(_ f: RemoteFixture) async throws -> Link {
            let connection = try ClientConnection(tcp: try TCPAddress(parsing: f.server.address, field: "authority"))
            let challenge = try AuthorityBeginDeviceProofResponse.decode(
                try await connection.call(
                    method: AuthorityMethod.beginDeviceProof, payload: try AuthorityBeginDeviceProofRequest().encode())
            ).challenge
            let key = FixtureDevice.key
            let signature = try key.signature(
                for: DeviceBinding.signedMessage(deviceID: RemoteFixture.device, challenge: challenge, channelBinding: []))
            _ = try await connection.call(
                method: AuthorityMethod.proveDevice,
                payload: try AuthorityProveDeviceRequest(
                    deviceID: RemoteFixture.device, devicePublicKey: key.publicKey.rawRepresentation, signature: signature
                ).encode())
            let (streamID, messages) = try connection.openStream(
                method: AuthorityMethod.watchRevocations, payload: try AuthorityWatchRevocationsRequest().encode())
            return Link(connection: connection, streamID: streamID, messages: messages)
        }

        func renew(acked: UInt64 = 0) async throws -> AuthorityRenewLeaseResponse {
            try AuthorityRenewLeaseResponse.decode(
                try await connection.call(
                    method: AuthorityMethod.renewLease, payload: try AuthorityRenewLeaseRequest(ackedSequence: acked).encode()))
        }
    }

    /// What the stream brought, heartbeats left out, and how it ended.
    final class Notices: Sendable {
        let sequences = Mutex<[UInt64]>([])
        let end = Mutex<RainError??>(nil)

        init(_ messages: AsyncThrowingStream<[UInt8], any Error>) {
            Task { [self] in
                do {
                    for try await bytes in messages {
                        let m = try AuthorityRevocation.decode(bytes)
                        if m.changeSequence > 0 { sequences.withLock { $0.append(m.changeSequence) } }
                    }
                    end.withLock { $0 = .some(nil) }
                } catch {
                    end.withLock { $0 = .some(error as? RainError) }
                }
            }
        }
    }

    /// Waits until `condition` holds (checking every 10 ms, for at most 30 s).
    static func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Logs device A in and reads its account on `link`'s device, so A is the account's reader.
    func readAccount(_ f: RemoteFixture) async throws -> String {
        let login = try await f.login()
        _ = try await f.remote.accountInfo(appID: RemoteFixture.app, accessToken: login.tokens.accessToken)
        return login.accountID
    }

    /// Device A's link, having read its account and then renewed its lease (1 s granted), with
    /// when the renewal was sent.
    func leasedReader(_ f: RemoteFixture) async throws -> (Link, Notices, renewed: ContinuousClock.Instant) {
        let link = try await Link.open(f)
        let notices = Notices(link.messages)
        _ = try await readAccount(f)
        let renewed = ContinuousClock.now
        #expect(try await link.renew().leaseMilliseconds == 1000)
        return (link, notices, renewed)
    }

    @Test("the authority lists read-lease and grants at most 1 s; a renewal without a stream is RAIN_202 lease_needs_stream")
    func grants() async throws {
        try await RemoteFixture.with { f in
            #expect(f.service.capabilities.contains(AuthorityCapability.readLease))
            let link = try await Link.open(f)
            let grant = try await link.renew()
            #expect(grant.leaseMilliseconds == 1000)
            #expect(grant.changeSequence == 0)
            let bare = try ClientConnection(tcp: try TCPAddress(parsing: f.server.address, field: "authority"))
            defer { bare.close() }
            let refusal = await rainError {
                _ = try await bare.call(
                    method: AuthorityMethod.renewLease, payload: try AuthorityRenewLeaseRequest().encode())
            }
            #expect(refusal?.code == .unauthorized)
            #expect(refusal?.details.reason == "lease_needs_stream")
            // The stream ended while its lease runs: remembered until the lease ran out (1 s),
            // then forgotten.
            let leases = try #require(f.service.revocationStreams?.leases)
            #expect(leases.linkCount == 1)
            link.connection.cancelStream(link.streamID)
            #expect(await Self.eventually { leases.linkCount == 0 })
            link.connection.close()
        }
    }

    @Test("no lease without a count of every change (as on PostgreSQL, shared by instances) or with --read-lease 0")
    func noLeaseWithoutACount() async throws {
        let logger = Logger(label: "test", minimumLevel: .error)
        let hub = RevocationHub()
        // An authority that tells no `ReadFreshness`: it cannot see the changes others make.
        let blind = AuthorityService(authority: SlowAuthority(delay: .seconds(1)), logger: logger, revocations: hub)
        #expect(!blind.capabilities.contains(AuthorityCapability.readLease))
        #expect(blind.revocationStreams?.leases.isGranting == false)
        try await RemoteFixture.with { f in
            let off = AuthorityService(
                authority: f.embedded, logger: logger, revocations: f.embedded.revocations, readLease: .zero)
            #expect(!off.capabilities.contains(AuthorityCapability.readLease))
            #expect(off.revocationStreams?.leases.isGranting == false)
            // Held to 1 s however long the flag asks.
            let long = AuthorityService(
                authority: f.embedded, logger: logger, revocations: f.embedded.revocations, readLease: .seconds(5))
            #expect(long.revocationStreams?.leases.duration == .seconds(1))
        }
    }

    @Test("a login elsewhere waits for the leased reader's acknowledgement, and a renewal meanwhile names the notice")
    func acknowledgementReleasesTheChange() async throws {
        try await RemoteFixture.with { f in
            let (link, notices, _) = try await leasedReader(f)
            let answered = Mutex(false)
            let login = Task {
                defer { answered.withLock { $0 = true } }
                return try await f.login(device: "device-b")
            }
            #expect(await Self.eventually { notices.sequences.withLock { $0 } == [1] })
            // Not answered: the change waits for A.
            try await Task.sleep(for: .milliseconds(50))
            #expect(!answered.withLock { $0 })
            // A renewal that crossed the notice names it (the device drops what it kept).
            #expect(try await link.renew().changeSequence == 1)
            _ = try await link.renew(acked: 1)
            _ = try await login.value
            #expect(f.service.metricText.contains("rainwallet_authority_lease_fences_acknowledged_total 1"))
            link.connection.close()
        }
    }

    @Test("a reader that never acknowledges holds the change until its lease ran out, then its stream is ended")
    func silentReaderRunsOut() async throws {
        try await RemoteFixture.with { f in
            let (link, notices, renewed) = try await leasedReader(f)
            _ = try await f.login(device: "device-b")
            // Answered only once A's lease (1 s from its renewal) ran out.
            #expect(ContinuousClock.now - renewed >= .milliseconds(1000))
            #expect(notices.sequences.withLock { $0 } == [1])
            #expect(await Self.eventually { notices.end.withLock { $0 } != nil })
            #expect(notices.end.withLock { $0 }??.code == .network)
            #expect(notices.end.withLock { $0 }??.details.reason == "lease_not_acknowledged")
            #expect(f.service.metricText.contains("rainwallet_authority_lease_fences_ran_out_total 1"))
            #expect(f.logSink.captured.contains { $0.contains("lease.ran_out") && $0.contains(RemoteFixture.device) })
            link.connection.close()
        }
    }

    @Test("a device that read no account of the change, or holds no lease, does not hold it")
    func onlyLeasedReaders() async throws {
        try await RemoteFixture.with { f in
            let link = try await Link.open(f)
            let notices = Notices(link.messages)
            // A holds a lease but read nothing: a login to the account is not held.
            _ = try await link.renew()
            _ = try await f.login()
            #expect(notices.sequences.withLock { $0 }.isEmpty)
            // A's lease runs out (no renewal since); then A reads the account: a device that read
            // it but holds no lease is not held for, neither for its own read's write (the tokens
            // marked used) nor for a login elsewhere.
            try await Task.sleep(for: .milliseconds(1100))
            let fences = f.service.leaseFenceCounts
            _ = try await readAccount(f)
            _ = try await f.login(device: "device-b")
            #expect(notices.sequences.withLock { $0 }.isEmpty)
            #expect(f.service.leaseFenceCounts == fences)
            // Its stream is still open: it was never ended for a lease it let run out.
            #expect(notices.end.withLock { $0 } == nil)
            link.connection.close()
        }
    }
}

extension AuthorityService {
    /// The service's metrics as Prometheus text (tests).
    /// The lease fence counters' lines (tests).
    var leaseFenceCounts: [Substring] {
        metricText.split(separator: "\n").filter { $0.hasPrefix("rainwallet_authority_lease_fences") }
    }

    var metricText: String {
        var text = ""
        for family in metricFamilies { family.render(into: &text) }
        return text
    }
}
