import Dispatch
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

/// The read leases the authority grants on its `WatchRevocations` connections, and the fences that
/// hold a change's answer until no device can still answer a read the change made stale.
///
/// - A device renews its lease on its stream's connection (`renew`); the lease holds `duration`
///   from when the device sent the request, so here it holds at most `duration` from when the
///   request arrived, plus `margin` for clocks that run at slightly different rates.
/// - Each device that was answered a call about an account (`noteReaders`) is one of the
///   account's readers while it holds a lease.
/// - A change to accounts (`fence`) sends a change notice on the stream of each of their readers
///   whose lease holds, and waits for each to acknowledge it (a renewal that carries its number)
///   or for its lease to run out: the device drops what it kept before it acknowledges, and a
///   device whose lease ran out keeps nothing from before. A link that let its lease run out
///   unacknowledged has its stream ended, so the device reconnects and checks its sessions.
/// - Only the accounts of the change are fenced: a device that holds its lease and never
///   acknowledges delays only changes to accounts it read, which its own sessions gave it, and
///   each by at most one lease.
///
/// The state is behind one `Mutex`: a renewal, the notices of a fence and the links they go to
/// are ordered by it, so a renewal answered after a fence's notice names that notice
/// (`change_sequence`), however the two travel.
final class ReadLeases: Sendable {
    /// How long a lease holds from the device's request (at most `ReadLease.longest`); zero
    /// grants none.
    let duration: Duration
    /// How much longer than `duration` a fence waits for a lease to run out.
    static let margin: Duration = .milliseconds(50)

    private struct Link {
        var deviceID: String
        /// The stream's responder; nil once the stream ended (the lease may still hold).
        var responder: Responder?
        /// When the last renewal arrived; nil before the first.
        var renewedAt: ContinuousClock.Instant?
        /// The last change notice sent, and the highest acknowledged.
        var sent: UInt64 = 0
        var acked: UInt64 = 0
        /// The fences waiting on this link, with the notice each waits for.
        var waiting: [(sequence: UInt64, fence: Fence)] = []
    }

    private struct State {
        var links: [ConnectionID: Link] = [:]
        /// Each account's readers (device ids), pruned of devices that hold no lease.
        var readers: [String: Set<String>] = [:]
        var notesSincePrune = 0
    }

    private let state = Mutex(State())
    private let now: @Sendable () -> ContinuousClock.Instant
    /// The links that let a lease run out unacknowledged (device ids only).
    private let logger: Logger?
    private let queue = DispatchQueue(label: "rain.authority.read-leases")
    /// Fences by outcome per link: acknowledged, or run out.
    let acknowledged = MetricCounter(
        "rainwallet_authority_lease_fences_acknowledged_total",
        help: "Change notices a leased device acknowledged before its lease ran out.")
    let ranOut = MetricCounter(
        "rainwallet_authority_lease_fences_ran_out_total",
        help: "Change notices not acknowledged before the device's read lease ran out (its stream is then ended).")

    /// Leases of `duration` (capped at `ReadLease.longest`).
    init(
        duration: Duration, logger: Logger? = nil,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.duration = min(max(duration, .zero), ReadLease.longest)
        self.logger = logger
        self.now = now
    }

    /// Whether leases are granted at all.
    var isGranting: Bool { duration > .zero }

    /// The stream of `deviceID` on `connection` opened: its link.
    func linkOpened(_ connection: ConnectionID, deviceID: String, responder: Responder) {
        state.withLock { s in
            var link = s.links[connection] ?? Link(deviceID: deviceID)
            link.deviceID = deviceID
            link.responder = responder
            s.links[connection] = link
        }
    }

    /// The stream on `connection` ended: nothing more is sent on it, but its lease holds as
    /// granted (the device may not know the stream ended); the link is forgotten once the lease
    /// ran out and no fence waits on it.
    func linkClosed(_ connection: ConnectionID) {
        let now = now()
        let end = state.withLock { s -> ContinuousClock.Instant? in
            s.links[connection]?.responder = nil
            return forgetIfDone(connection, in: &s, at: now) ? nil : s.links[connection].flatMap { leaseEnd($0) }
        }
        guard let end else { return }
        at(end + .milliseconds(1)) { [self] in
            let now = self.now()
            state.withLock { _ = forgetIfDone(connection, in: &$0, at: now) }
        }
    }

    /// How many links are remembered (tests: a closed one is forgotten once its lease ran out).
    var linkCount: Int { state.withLock { $0.links.count } }

    /// A renewal on `connection`, acknowledging notices up to `acked`.
    /// - Throws: RAIN_202 `lease_needs_stream` on a connection without a stream.
    func renew(_ connection: ConnectionID, acked: UInt64) throws(RainError) -> AuthorityRenewLeaseResponse {
        let arrived = now()
        let (answer, settled) = state.withLock { s -> (AuthorityRenewLeaseResponse?, [Fence]) in
            guard var link = s.links[connection], link.responder != nil else { return (nil, []) }
            if isGranting { link.renewedAt = arrived }
            let settled = Self.acknowledge(&link, upTo: acked)
            s.links[connection] = link
            let grant = UInt32(clamping: duration.milliseconds)
            return (AuthorityRenewLeaseResponse(leaseMilliseconds: grant, changeSequence: link.sent), settled)
        }
        settled.forEach { $0.settle() }
        if !settled.isEmpty { acknowledged.increment(by: UInt64(settled.count)) }
        guard let answer else {
            throw RainError(
                .unauthorized, "renew a read lease on the connection of a WatchRevocations stream",
                details: .init(reason: "lease_needs_stream"))
        }
        return answer
    }

    /// Counts `deviceID` among the readers of `accounts` (a call about them was answered to it).
    func noteReaders(_ deviceID: String, of accounts: Set<String>) {
        guard isGranting, !deviceID.isEmpty, !accounts.isEmpty else { return }
        let now = now()
        state.withLock { s in
            for account in accounts { s.readers[account, default: []].insert(deviceID) }
            s.notesSincePrune += 1
            if s.notesSincePrune >= 1024 {
                s.notesSincePrune = 0
                prune(&s, at: now)
            }
        }
    }

    /// Holds a change to `accounts` until each of their readers whose lease holds acknowledged
    /// its notice or its lease ran out.
    func fence(_ accounts: Set<String>) async {
        guard isGranting, !accounts.isEmpty else { return }
        let start = now()
        let fence = Fence()
        let deadlines = state.withLock { s -> [(ConnectionID, ContinuousClock.Instant)] in
            var devices = Set<String>()
            for account in accounts { devices.formUnion(s.readers[account] ?? []) }
            guard !devices.isEmpty else { return [] }
            var deadlines: [(ConnectionID, ContinuousClock.Instant)] = []
            for (connection, var link) in s.links where devices.contains(link.deviceID) {
                guard let end = leaseEnd(link), start < end else { continue }
                link.sent += 1
                link.waiting.append((link.sent, fence))
                // Sent under the lock: a renewal answered after it names it.
                if let bytes = try? AuthorityRevocation(changeSequence: link.sent).encode() {
                    link.responder?.send(streamPayload: bytes)
                }
                s.links[connection] = link
                deadlines.append((connection, end))
            }
            fence.expect(deadlines.count)
            return deadlines
        }
        guard !deadlines.isEmpty else { return }
        for (connection, deadline) in deadlines {
            at(deadline) { [self] in runOut(connection, fence: fence) }
        }
        await fence.wait()
    }

    /// The lease of `connection` ran out before it acknowledged `fence`'s notice: the fence stops
    /// waiting for it, and its stream is ended (the device reconnects and checks its sessions).
    private func runOut(_ connection: ConnectionID, fence: Fence) {
        let now = now()
        let ended = state.withLock { s -> (responder: Responder?, deviceID: String)? in
            guard var link = s.links[connection], let i = link.waiting.firstIndex(where: { $0.fence === fence }) else {
                return nil
            }
            link.waiting.remove(at: i)
            let responder = link.responder
            link.responder = nil
            s.links[connection] = link
            _ = forgetIfDone(connection, in: &s, at: now)
            return (responder, link.deviceID)
        }
        guard let (responder, deviceID) = ended else { return }
        ranOut.increment()
        logger?.warning(
            "lease.ran_out",
            [
                "device": deviceID, "connection": connection.description,
                "hint": "a change waited out this device's read lease: its link is silent or stuck; its stream is ended",
            ])
        fence.settle()
        responder?.fail(
            RainError(
                .network, "the device did not acknowledge a change before its read lease ran out",
                details: .init(reason: "lease_not_acknowledged")))
    }

    /// Resolves the fences `link` acknowledged (its notices up to `acked`).
    private static func acknowledge(_ link: inout Link, upTo acked: UInt64) -> [Fence] {
        link.acked = max(link.acked, acked)
        let done = link.waiting.filter { $0.sequence <= link.acked }.map(\.fence)
        link.waiting.removeAll { $0.sequence <= link.acked }
        return done
    }

    /// When `link`'s lease surely ended, as this side counts it; nil before any renewal.
    private func leaseEnd(_ link: Link) -> ContinuousClock.Instant? {
        link.renewedAt.map { $0 + duration + Self.margin }
    }

    /// Whether `link`'s lease may still hold at `t`.
    private func isLive(_ link: Link, at t: ContinuousClock.Instant) -> Bool {
        leaseEnd(link).map { t < $0 } ?? false
    }

    /// Whether `link` can be forgotten at `t`: its stream ended, its lease ran out, and no fence
    /// waits on it.
    private func isDone(_ link: Link, at t: ContinuousClock.Instant) -> Bool {
        link.responder == nil && !isLive(link, at: t) && link.waiting.isEmpty
    }

    /// Forgets the link of `connection` when it is done; true when it is gone.
    private func forgetIfDone(_ connection: ConnectionID, in s: inout State, at t: ContinuousClock.Instant) -> Bool {
        guard let link = s.links[connection] else { return true }
        guard isDone(link, at: t) else { return false }
        s.links[connection] = nil
        return true
    }

    /// Runs `body` on the leases' queue at `instant` (real time: leases are counted on both ends'
    /// monotonic clocks, never the injected one).
    private func at(_ instant: ContinuousClock.Instant, _ body: @escaping @Sendable () -> Void) {
        let wait = max(instant - now(), .zero)
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(wait.clampedNanoseconds)), execute: body)
    }

    /// Drops links that are done, and readers that hold no lease.
    private func prune(_ s: inout State, at t: ContinuousClock.Instant) {
        s.links = s.links.filter { !isDone($0.value, at: t) }
        let leased = Set(s.links.values.filter { isLive($0, at: t) }.map(\.deviceID))
        s.readers = s.readers.compactMapValues { devices in
            let kept = devices.intersection(leased)
            return kept.isEmpty ? nil : kept
        }
    }

    /// The readers of `account` (tests).
    func readers(of account: String) -> Set<String> { state.withLock { $0.readers[account] ?? [] } }

    /// The metric families of the fences.
    var metricFamilies: [any MetricFamily] { [acknowledged, ranOut] }
}

/// One fence's wait: how many links it still waits for, and the task waiting.
private final class Fence: Sendable {
    private struct State {
        var remaining = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    /// Sets how many links the fence waits for, under the leases' lock: before any of them can
    /// settle, and before `wait`.
    func expect(_ count: Int) {
        state.withLock { $0.remaining += count }
    }

    /// One link acknowledged or ran out.
    func settle() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.remaining -= 1
            guard s.remaining <= 0 else { return nil }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Returns once every link settled.
    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let isDone = state.withLock { s -> Bool in
                if s.remaining <= 0 { return true }
                s.waiter = c
                return false
            }
            if isDone { c.resume() }
        }
    }
}
