import RainCore
import Synchronization

/// The device's read lease from a remote authority: while it holds, the device answers Account/Get
/// and Wallet/Get from what it read (`ReadFreshness`); the authority holds every change to an
/// account the device read until the device acknowledged the change or the lease ran out, so a
/// change the authority reported done is never answered stale here.
///
/// - A lease is granted by `Authority/RenewLease` on the `WatchRevocations` connection
///   (`RevocationFeed`) and holds for what the authority grants, at most `longest` (1 s), counted
///   from when the device *sent* the request: however late the answer comes (a network that holds
///   it), the lease ends no later than the authority thinks, since the authority counts from when
///   it received the request.
/// - `stamp()` is the lease's generation while the lease holds, nil otherwise. The generation
///   moves, dropping every read kept under the old one, on a change notice, a revocation or a
///   recheck pushed on the stream, when the link comes up or goes down, and when a lease ran out
///   before the next one was granted (a change made meanwhile is not announced to a device whose
///   lease the authority saw end).
/// - A read while less than half the lease is left asks for the next one; nothing is asked while
///   no read is made, so an idle device costs the authority nothing.
///
/// ```swift
/// let lease = ReadLease()
/// let link = lease.linked { link in renewNow(link) }   // the stream is up, with "read-lease"
/// if let (sentAt, acked) = lease.renewalStarting(link: link) { … send RenewLease(acked) …
///     lease.renewed(link: link, sentAt: sentAt, leaseMilliseconds: 1000, changeSequence: 0) }
/// lease.stamp()                                 // the generation, while the lease holds
/// ```
public final class ReadLease: ReadFreshness {
    /// The longest lease a device takes, whatever the authority grants.
    public static let longest: Duration = .seconds(1)

    private struct State {
        /// The stamp of reads kept under the current lease; moves on every change that may make
        /// them stale.
        var generation: UInt64 = 1
        /// When the lease ends; nil: none.
        var until: ContinuousClock.Instant?
        /// The last lease granted, for when to ask for the next one.
        var granted: Duration = .zero
        /// The highest change notice acted on.
        var seen: UInt64 = 0
        /// The link renewals go through (`linked`); moves with every link.
        var link: UInt64 = 0
        /// Sends a renewal on a link; nil while no link grants leases.
        var renew: (@Sendable (UInt64) -> Void)?
        var renewalsInFlight = 0
        /// A renewal was asked for by a read and not sent yet.
        var isRenewalQueued = false

        /// Drops every read kept so far.
        mutating func drop() { generation &+= 1 }

        /// The renewal to send now, unless one is on its way.
        mutating func renewal() -> (@Sendable () -> Void)? {
            guard renewalsInFlight == 0, !isRenewalQueued, let renew else { return nil }
            isRenewalQueued = true
            let link = link
            return { renew(link) }
        }
    }

    private let state = Mutex(State())
    private let now: @Sendable () -> ContinuousClock.Instant

    /// A lease on no link yet (`stamp()` is nil until `linked` and a grant).
    /// - Parameter now: the monotonic clock (tests move their own).
    public init(now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.now = now
    }

    /// The generation while the lease holds, else nil; asks for the next lease when less than half
    /// of this one is left (or none holds), through the link's `renew`, off the caller's thread.
    public func stamp() -> UInt64? {
        let t = now()
        let (stamp, renew) = state.withLock { s -> (UInt64?, (@Sendable () -> Void)?) in
            guard let until = s.until, t < until else { return (nil, s.renewal()) }
            return (s.generation, until - t < s.granted / 2 ? s.renewal() : nil)
        }
        renew?()
        return stamp
    }

    /// The link to an authority that grants leases is up: what was kept is dropped, and
    /// renewals go through `renew`, given the link (it must not block).
    /// - Returns: the link, for the calls below (a renewal of an older link is ignored).
    @discardableResult
    public func linked(renew: @escaping @Sendable (_ link: UInt64) -> Void) -> UInt64 {
        state.withLock { s in
            s.drop()
            s.link &+= 1
            s.until = nil
            s.seen = 0
            s.renewalsInFlight = 0
            s.isRenewalQueued = false
            s.renew = renew
            return s.link
        }
    }

    /// The link is down: no lease holds, and what was kept is dropped.
    public func unlinked() {
        state.withLock { s in
            s.drop()
            s.link &+= 1
            s.until = nil
            s.renew = nil
            s.renewalsInFlight = 0
            s.isRenewalQueued = false
        }
    }

    /// A renewal is about to be sent on `link`: when it is sent (the lease counts from then) and
    /// the acknowledgement it carries; nil when the link is gone.
    public func renewalStarting(link: UInt64) -> (sentAt: ContinuousClock.Instant, acked: UInt64)? {
        let t = now()
        return state.withLock { s in
            guard s.link == link, s.renew != nil else { return nil }
            s.renewalsInFlight += 1
            s.isRenewalQueued = false
            return (t, s.seen)
        }
    }

    /// A renewal sent at `sentAt` on `link` was answered.
    /// - Returns: true when the answer names a change notice not acted on yet (it and the notice
    ///   crossed): what was kept is dropped, and the caller acknowledges at once.
    @discardableResult
    public func renewed(link: UInt64, sentAt: ContinuousClock.Instant, leaseMilliseconds: UInt32, changeSequence: UInt64)
        -> Bool
    {
        let t = now()
        return state.withLock { s in
            guard s.link == link else { return false }
            s.renewalsInFlight = max(0, s.renewalsInFlight - 1)
            // The lease ran out before this answer: the authority may have made a change meanwhile
            // without telling this device (it saw the lease end), so nothing kept before stands.
            if s.until.map({ t >= $0 }) ?? true { s.drop() }
            var acknowledge = false
            if changeSequence > s.seen {
                s.drop()
                s.seen = changeSequence
                acknowledge = true
            }
            let grant = min(Duration.milliseconds(Int64(leaseMilliseconds)), Self.longest)
            guard grant > .zero else {
                s.until = nil
                return acknowledge
            }
            let end = sentAt + grant
            s.until = max(s.until ?? end, end)
            s.granted = grant
            return acknowledge
        }
    }

    /// A renewal on `link` failed: the lease runs out as granted.
    public func renewalFailed(link: UInt64) {
        state.withLock { s in
            guard s.link == link else { return }
            s.renewalsInFlight = max(0, s.renewalsInFlight - 1)
        }
    }

    /// A change notice arrived on the stream: what was kept is dropped (the caller then
    /// acknowledges with `renewalStarting`'s `acked`).
    public func changed(sequence: UInt64) {
        state.withLock { s in
            s.drop()
            s.seen = max(s.seen, sequence)
        }
    }

    /// A revocation or a recheck arrived: what was kept is dropped.
    public func dropKept() { state.withLock { $0.drop() } }

    /// The highest change notice acted on (tests).
    public var seenSequence: UInt64 { state.withLock { $0.seen } }
}
