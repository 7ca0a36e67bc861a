import Dispatch
import FoundationEssentials
import RainConfig
import RainCore
import RainTransport
import RainWire
import Synchronization

/// The part of a profile the event loop reads without waiting: a `Mutex`-guarded view of the
/// session that the session manager publishes, and the profile's watchers (ARCHITECTURE.md).
public final class ProfileRuntime: Sendable {
    /// What the snapshot is computed from.
    struct SessionView: Equatable {
        var expiresAt: Date
        var lifetime: Duration
        var accountID: String
        var walletID: String
        var contact: RainWalletContact?
        /// The session's tokens are not saved yet (a full disk): calls wait for the session actor,
        /// which saves them first (`ProfileSession`), and the snapshot carries a storage warning.
        var isUnsaved = false
    }

    struct Watcher {
        var send: @Sendable ([UInt8]) -> Void
        var nextSequence: UInt64 = 1
    }

    struct WatcherKey: Hashable {
        var connection: ConnectionID
        var requestID: UInt64
    }

    /// A caller of `awaitRestore` waiting for the restore to finish.
    struct RestoreWaiter {
        var continuation: CheckedContinuation<Void, Never>
        /// Its timeout; the timer only lives while this handle does.
        var timer: (any RainTimer)?
    }

    /// The encoded snapshot kept for the quick lane, with the span of time it holds for.
    struct EncodedSnapshot {
        var bytes: [UInt8]
        /// From when (inclusive) to when (exclusive) the clock gives the same snapshot.
        var validFrom: Date
        var validUntil: Date
    }

    /// The authority reads a profile keeps encoded (`kept(_:stamp:)`).
    enum KeptRead: Int {
        case account = 0
        case wallet = 1
    }

    /// An answer read from the authority, with the authority's `ReadFreshness` stamp taken
    /// before it was asked.
    struct KeptAnswer {
        var bytes: [UInt8]
        var stamp: UInt64
    }

    /// Which session a read was asked for (`readTicket()`): an answer is kept only for the session
    /// it was read under.
    struct ReadTicket {
        var session: UInt64
    }

    struct State {
        // Every property the snapshot is computed from drops the encoded one when it changes.
        var isLoading = true {
            didSet {
                encoded = nil
                kept = [nil, nil]
            }
        }
        /// Resumed by the first publish (the restore finished) or by their timeout.
        var restoreWaiters: [Int: RestoreWaiter] = [:]
        var nextWaiterID = 0
        /// Any change of session drops the kept reads: they were the old session's.
        var session: SessionView? {
            didSet {
                encoded = nil
                kept = [nil, nil]
                sessionSerial &+= 1
            }
        }
        /// Moves with every change of `session`.
        var sessionSerial: UInt64 = 0
        /// Account/Get and Wallet/Get as last read for this session, by `KeptRead`.
        var kept: [KeptAnswer?] = [nil, nil]
        /// Set when the session ended without logout; cleared by the next login or a logout.
        var endedReason: ExpiryReason? { didSet { encoded = nil } }
        var watchers: [WatcherKey: Watcher] = [:]
        var lastPublished: SessionSnapshot?
        /// When the last challenge pending on the profile (a login or verification code, a passkey
        /// ceremony) expires; nil when none is pending. Set by the session actor.
        var pendingChallengesUntil: Date?
        /// The session policy in effect: the config's, with a client's `Profile/Configure` values
        /// where the config sets none.
        var sessionPolicy: RainWalletSessionPolicy { didSet { encoded = nil } }
        /// The link to the authority, carried by every snapshot.
        var link: AuthorityLinkState? { didSet { encoded = nil } }
        /// Whether the daemon's keys work, carried by every snapshot.
        var storage: StorageHealthState? { didSet { encoded = nil } }
        /// The snapshot's bytes for `encodedSnapshot()`; nil until asked for, and after any change.
        var encoded: EncodedSnapshot?

        init(sessionPolicy: RainWalletSessionPolicy) { self.sessionPolicy = sessionPolicy }
    }

    public let name: String
    public let settings: ProfileSettings
    let clock: any RainClock
    private let state: Mutex<State>

    init(name: String, settings: ProfileSettings, clock: any RainClock) {
        self.name = name
        self.settings = settings
        self.clock = clock
        self.state = Mutex(State(sessionPolicy: settings.sessionPolicy))
    }

    /// The session policy in effect (the config's until a client's `Profile/Configure` sets more).
    public var sessionPolicy: RainWalletSessionPolicy { state.withLock { $0.sessionPolicy } }

    /// Replaces the policy in effect (the session actor, which also re-arms its refresh timer).
    func setSessionPolicy(_ policy: RainWalletSessionPolicy) { state.withLock { $0.sessionPolicy = policy } }

    /// The current snapshot, computed against the clock (so an expired session reads as expired).
    public func snapshot() -> SessionSnapshot { state.withLock { compute($0) } }

    /// The snapshot's encoded bytes (`SessionState`), as `snapshot().encode()` gives them, kept
    /// until the session, the policy or the link change or the clock reaches the next moment
    /// where the snapshot would read differently (the session stops being active, or expires):
    /// the quick lane's answer to Session/GetState. Nil when encoding fails.
    public func encodedSnapshot() -> [UInt8]? {
        let now = clock.now
        return state.withLock { s -> [UInt8]? in
            if let e = s.encoded, e.validFrom <= now, now < e.validUntil { return e.bytes }
            guard let bytes = try? compute(s, now: now).encode() else { return nil }
            let (from, until) = Self.validity(s, now: now)
            s.encoded = EncodedSnapshot(bytes: bytes, validFrom: from, validUntil: until)
            return bytes
        }
    }

    /// The encoded answer of `kind` read for the current session, while the authority's stamp is
    /// still `stamp` (nothing changed there since it was read) and the session is live and saved;
    /// nil otherwise, and the read goes to the authority (which refreshes an expired session and
    /// saves an unsaved one first, as it always did).
    func kept(_ kind: KeptRead, stamp: UInt64) -> [UInt8]? {
        let now = clock.now
        return state.withLock { s -> [UInt8]? in
            guard let k = s.kept[kind.rawValue], k.stamp == stamp, !s.isLoading, let v = s.session, !v.isUnsaved,
                now < v.expiresAt
            else { return nil }
            return k.bytes
        }
    }

    /// The session a read is about to be asked for; take it, and the authority's stamp, before
    /// asking.
    func readTicket() -> ReadTicket { state.withLock { ReadTicket(session: $0.sessionSerial) } }

    /// Keeps `bytes`, the answer of `kind` read with `ticket` under the authority's `stamp`, unless
    /// the session changed meanwhile (the answer was another session's).
    func keep(_ kind: KeptRead, _ bytes: [UInt8], stamp: UInt64, ticket: ReadTicket) {
        state.withLock { s in
            guard s.sessionSerial == ticket.session, s.session != nil else { return }
            s.kept[kind.rawValue] = KeptAnswer(bytes: bytes, stamp: stamp)
        }
    }

    /// The span around `now` in which `compute` gives the same snapshot: between the two moments
    /// where a session's snapshot changes by itself (`hasActiveSession` turns false at expiry
    /// minus the active threshold; the session expires at expiry).
    static func validity(_ s: State, now: Date) -> (from: Date, until: Date) {
        guard !s.isLoading, let v = s.session else { return (.distantPast, .distantFuture) }
        let threshold = s.sessionPolicy.effectiveActiveThreshold(lifetime: v.lifetime).timeInterval
        var from = Date.distantPast
        var until = Date.distantFuture
        for moment in [v.expiresAt.addingTimeInterval(-threshold), v.expiresAt] {
            if moment <= now { from = max(from, moment) } else { until = min(until, moment) }
        }
        return (from, until)
    }

    private func compute(_ s: State, now: Date? = nil) -> SessionSnapshot {
        var snapshot = computeSession(s, now: now)
        snapshot.authorityLink = s.link
        snapshot.storage = s.storage
        return snapshot
    }

    private func computeSession(_ s: State, now givenNow: Date?) -> SessionSnapshot {
        if s.isLoading { return .loading }
        guard let v = s.session else {
            return s.endedReason == nil ? .unauthenticated : SessionSnapshot(authState: .unauthenticated, sessionState: .expired)
        }
        let now = givenNow ?? clock.now
        if now >= v.expiresAt {
            return SessionSnapshot(
                authState: .unauthenticated, sessionState: .expired, accountID: v.accountID, walletID: v.walletID,
                contact: v.contact, hasActiveSession: false)
        }
        let threshold = s.sessionPolicy.effectiveActiveThreshold(lifetime: v.lifetime)
        return SessionSnapshot(
            authState: .authenticated, sessionState: .active(expiresAt: v.expiresAt), accountID: v.accountID,
            walletID: v.walletID, contact: v.contact,
            hasActiveSession: v.expiresAt.timeIntervalSince(now) > threshold.timeInterval,
            storageWarning: v.isUnsaved ? SessionSnapshot.sessionNotPersisted : nil)
    }

    /// Whether the restore is still running.
    var isLoading: Bool { state.withLock { $0.isLoading } }

    /// Where the timeouts of `awaitRestore` fire.
    private static let timeoutQueue = DispatchQueue(label: "rainwallet.await-restore")

    /// Waits until the restore has finished or `timeout` passed on the injected clock, whichever
    /// comes first, and returns the snapshot then: a timeout returns normally with the state still
    /// `loading` (docs/user-guide.md "Sessions"). The restore's first publish resumes every waiter at once.
    func awaitRestore(timeout: Duration) async -> SessionSnapshot {
        let id = state.withLock { s -> Int? in
            guard s.isLoading else { return nil }
            s.nextWaiterID += 1
            return s.nextWaiterID
        }
        if let id, timeout > .zero {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let isWaiting = state.withLock { s -> Bool in
                    guard s.isLoading else { return false }
                    s.restoreWaiters[id] = RestoreWaiter(continuation: c)
                    return true
                }
                guard isWaiting else { return c.resume() }
                let timer = clock.schedule(after: timeout, on: Self.timeoutQueue) { [weak self] in
                    self?.resumeRestoreWaiter(id)
                }
                let isArmed = state.withLock { s -> Bool in
                    guard s.restoreWaiters[id] != nil else { return false }
                    s.restoreWaiters[id]?.timer = timer
                    return true
                }
                // Resumed already (restored, or timed out at once): the timer has nothing to do.
                if !isArmed { timer.cancel() }
            }
        }
        return snapshot()
    }

    /// Resumes one waiter of `awaitRestore` (its timeout passed).
    private func resumeRestoreWaiter(_ id: Int) {
        let waiter = state.withLock { $0.restoreWaiters.removeValue(forKey: id) }
        waiter?.continuation.resume()
    }

    /// Number of callers waiting in `awaitRestore` (tests).
    var restoreWaiterCount: Int { state.withLock { $0.restoreWaiters.count } }

    /// Why the session ended, if it ended without logout (RAIN_201 details).
    var endedReason: ExpiryReason? { state.withLock { $0.endedReason } }

    /// Publishes a new session view (nil: no session) and tells watchers what changed. With
    /// `expiry`, the session ended without logout: every watcher gets one session-expired event.
    /// `isUnsaved`: the session's tokens could not be saved yet (see `SessionView.isUnsaved`).
    func publish(session: StoredSession?, expiry: ExpiryReason? = nil, isUnsaved: Bool = false) {
        let restored = state.withLock { s -> [RestoreWaiter] in
            s.isLoading = false
            let waiters = Array(s.restoreWaiters.values)
            s.restoreWaiters = [:]
            s.endedReason = session == nil ? expiry : nil
            s.session = session.map {
                SessionView(
                    expiresAt: $0.expiresAt, lifetime: .milliseconds(Int64($0.lifetimeSeconds * 1000)), accountID: $0.accountID,
                    walletID: $0.walletID, contact: $0.contact, isUnsaved: isUnsaved)
            }
            let now = compute(s)
            let before = s.lastPublished
            s.lastPublished = now
            if let expiry {
                broadcast(&s, kind: .sessionExpired, state: now, reason: expiry)
            }
            if before?.authState != now.authState {
                broadcast(&s, kind: .authState, state: now, reason: nil)
            }
            if before?.sessionState != now.sessionState {
                broadcast(&s, kind: .sessionState, state: now, reason: nil)
            }
            return waiters
        }
        // The restore finished: wake its waiters, outside the lock.
        for waiter in restored {
            waiter.timer?.cancel()
            waiter.continuation.resume()
        }
    }

    /// Records the link to the authority and tells watchers (an `authorityLink` event) when it
    /// changed.
    func publish(link: AuthorityLinkState) {
        state.withLock { s in
            guard s.link != link else { return }
            s.link = link
            let now = compute(s)
            s.lastPublished = now
            broadcast(&s, kind: .authorityLink, state: now, reason: nil)
        }
    }

    /// Records whether the daemon's keys work and tells watchers (a `storage` event) when it changed.
    func publish(storage: StorageHealthState) {
        state.withLock { s in
            guard s.storage != storage else { return }
            s.storage = storage
            let now = compute(s)
            s.lastPublished = now
            broadcast(&s, kind: .storage, state: now, reason: nil)
        }
    }

    private func broadcast(_ s: inout State, kind: WatchEvent.Kind, state snapshot: SessionSnapshot, reason: ExpiryReason?) {
        for key in Array(s.watchers.keys) {
            guard var w = s.watchers[key] else { continue }
            deliver(&w, kind: kind, state: snapshot, reason: reason)
            s.watchers[key] = w
        }
    }

    private func deliver(_ w: inout Watcher, kind: WatchEvent.Kind, state snapshot: SessionSnapshot, reason: ExpiryReason?) {
        let event = WatchEvent(sequence: w.nextSequence, kind: kind, state: snapshot, expiryReason: reason)
        w.nextSequence += 1
        // Encoding an event never fails (no user strings with NUL reach it); drop it if it did.
        guard let bytes = try? event.encode() else { return }
        w.send(bytes)
    }

    /// Adds a watcher and sends it the current state first (sequence 1). `send` receives each
    /// encoded `Event` in order.
    func addWatcher(connection: ConnectionID, requestID: UInt64, send: @escaping @Sendable ([UInt8]) -> Void) {
        state.withLock { s in
            var w = Watcher(send: send)
            deliver(&w, kind: .authState, state: compute(s), reason: nil)
            s.watchers[WatcherKey(connection: connection, requestID: requestID)] = w
        }
    }

    /// Removes one watcher (cancelled). Returns whether it existed.
    @discardableResult
    func removeWatcher(connection: ConnectionID, requestID: UInt64) -> Bool {
        state.withLock { $0.watchers.removeValue(forKey: WatcherKey(connection: connection, requestID: requestID)) != nil }
    }

    /// Removes every watcher of a closed connection.
    func removeWatchers(connection: ConnectionID) {
        state.withLock { s in s.watchers = s.watchers.filter { $0.key.connection != connection } }
    }

    /// Number of watchers (tests, logs).
    var watcherCount: Int { state.withLock { $0.watchers.count } }

    /// Records until when challenges are pending on the profile (nil: none).
    func setPendingChallenges(until date: Date?) {
        state.withLock { $0.pendingChallengesUntil = date }
    }

    /// Whether the profile holds nothing a caller could lose if it were dropped and restored later:
    /// restored, no session, no watcher, nobody awaiting the restore, no unexpired challenge.
    var isEvictable: Bool {
        state.withLock { s in
            !s.isLoading && s.session == nil && s.watchers.isEmpty && s.restoreWaiters.isEmpty
                && (s.pendingChallengesUntil.map { clock.now >= $0 } ?? true)
        }
    }
}
