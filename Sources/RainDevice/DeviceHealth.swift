import FoundationEssentials
import RainCore
import Synchronization

/// How the daemon stands, as `status`, `GetInfo` and `Watch` tell it: the link to the authority
/// (as the authority's client found it, overlaid with failing refreshes), the revocation stream,
/// and whether the daemon's own keys work.
///
/// Each part has its one source: the remote authority's client for the link, the revocation feed
/// for the stream, the key provider's successes and failures (a proof signed or not, keys that
/// open or not) for storage, and the refreshes for their own failures. A refresh that fails while
/// the authority answers makes the link `degraded` with that refresh's error, so "connected" is
/// never shown while every refresh fails; the next refresh that works clears it.
public final class DeviceHealth: Sendable {
    /// What changed, for the observers.
    public enum Change: Sendable, Equatable {
        /// The composed link (or its stream).
        case link(AuthorityLinkState)
        /// The daemon's keys.
        case storage(StorageHealthState)
    }

    private struct State {
        /// The authority client's own view; nil with an embedded authority.
        var link: AuthorityLinkState?
        var stream: RevocationStreamState?
        var refreshFailure: (message: String, since: Date)?
        var storage: StorageHealthState
        var observers: [@Sendable (Change) -> Void] = []
        /// The last composed link told to the observers.
        var composed: AuthorityLinkState?
    }

    private let state: Mutex<State>
    /// Moves with every change the observers are told of, inside the same lock: GetInfo's kept
    /// answer holds while it is the same.
    private let changes = Atomic<UInt64>(0)

    /// A number that moves whenever the link, its stream or the keys' state change. Read it before
    /// what it stands for: what is read after it is at least as new.
    public var version: UInt64 { changes.load(ordering: .acquiring) }

    /// A daemon whose keys work and whose link is `link` (nil: an embedded authority).
    public init(now: Date, link: AuthorityLinkState? = nil) {
        var s = State(link: link, storage: StorageHealthState(isAvailable: true, since: now))
        s.composed = Self.compose(s)
        state = Mutex(s)
    }

    /// The link as status shows it: the client's view, `degraded` while refreshes fail, with the
    /// revocation stream. Nil with an embedded authority.
    public var authorityLink: AuthorityLinkState? { state.withLock { Self.compose($0) } }

    /// Whether the daemon's keys work now.
    public var storage: StorageHealthState { state.withLock { $0.storage } }

    /// Calls `observer` with each change, on the thread that made it; it must not block.
    public func observe(_ observer: @escaping @Sendable (Change) -> Void) {
        state.withLock { $0.observers.append(observer) }
    }

    /// The authority client's view of the link changed.
    public func linkChanged(_ link: AuthorityLinkState) {
        update { $0.link = link }
    }

    /// The revocation stream opened.
    public func streamUp(now: Date) {
        update { s in
            if s.stream?.isUp != true { s.stream = RevocationStreamState(isUp: true, since: now) }
        }
    }

    /// The revocation stream closed or could not be opened, for `message`.
    public func streamDown(_ message: String, now: Date) {
        update { s in
            let since = s.stream?.isUp == false ? s.stream?.since ?? now : now
            s.stream = RevocationStreamState(isUp: false, lastError: message, since: since)
        }
    }

    /// A refresh failed without ending the session (the authority answered with a failure, or the
    /// device's keys could not sign).
    public func refreshFailed(_ message: String, now: Date) {
        update { s in s.refreshFailure = (message, s.refreshFailure?.since ?? now) }
    }

    /// A refresh worked.
    public func refreshWorked() {
        update { $0.refreshFailure = nil }
    }

    /// The daemon's keys failed (`error` from the key provider), or worked again (nil).
    public func keys(_ error: RainError?, now: Date) {
        update { s in
            if let error {
                let since = s.storage.isAvailable ? now : s.storage.since
                s.storage = StorageHealthState(isAvailable: false, lastError: error.message, since: since)
            } else if !s.storage.isAvailable {
                s.storage = StorageHealthState(isAvailable: true, since: now)
            }
        }
    }

    private func update(_ change: (inout State) -> Void) {
        let (changes, observers) = state.withLock { s -> ([Change], [@Sendable (Change) -> Void]) in
            let storageBefore = s.storage
            change(&s)
            var changes: [Change] = []
            let composed = Self.compose(s)
            if composed != s.composed, let composed {
                s.composed = composed
                changes.append(.link(composed))
            }
            if s.storage != storageBefore { changes.append(.storage(s.storage)) }
            if !changes.isEmpty { self.changes.add(1, ordering: .releasing) }
            return (changes, s.observers)
        }
        for change in changes {
            for observer in observers { observer(change) }
        }
    }

    private static func compose(_ s: State) -> AuthorityLinkState? {
        guard var link = s.link else { return nil }
        if link.phase == .connected, let failure = s.refreshFailure {
            link = AuthorityLinkState(phase: .degraded, lastError: "refreshes fail: \(failure.message)", since: failure.since)
        }
        link.revocationStream = s.stream
        return link
    }
}
