import FoundationEssentials
import RainCore

/// The kind of a call to a remote authority: it decides the call's bound, whether it may be
/// retried, and what a missing answer means (docs/operations.md "Bounded waits").
public enum AuthorityCallKind: String, Sendable, Equatable, CaseIterable {
    /// No effect at the authority (`account`, `wallet`, an export, `GetInfo`): answers or fails
    /// with RAIN_301 within `AuthorityDeadlines.read`, the device's retries included.
    case read
    /// An effect at the authority (codes, confirms, logout, passkey ceremonies, key moves): never
    /// retried; answers or fails within `AuthorityDeadlines.send`. When the request left and no
    /// answer came, RAIN_501 `outcome_unknown`.
    case send
    /// A session refresh: each attempt within `AuthorityDeadlines.refresh`, retried on the session
    /// policy's schedule (a repeat within the refresh grace window is safe).
    case refresh
}

/// How long each kind of call to a remote authority may wait. The bounds run on the
/// injected `RainClock`; the daemon sets them with `--authority-read-deadline`,
/// `--authority-send-deadline` and `--authority-refresh-deadline` (milliseconds), so tests use
/// short ones.
public struct AuthorityDeadlines: Sendable, Hashable {
    /// A read, its retries included (4 s).
    public var read: Duration
    /// A send (9 s); never retried.
    public var send: Duration
    /// One refresh attempt (5 s); the session policy spaces the attempts.
    public var refresh: Duration

    /// The documented bounds: read 4 s, send 9 s, refresh 5 s per attempt. What the app or the CLI
    /// is promised (a read answered or failed within 5 s, a send within 10 s) is a second more: the
    /// daemon's own bound leaves that second for the local hop, a CLI's start-up and a loaded
    /// machine (scripts/netfault checks it at the CLI).
    public static let standard = AuthorityDeadlines(read: .seconds(4), send: .seconds(9), refresh: .seconds(5))

    /// Bounds per kind of call.
    public init(read: Duration, send: Duration, refresh: Duration) {
        self.read = read
        self.send = send
        self.refresh = refresh
    }

    /// The bound of one kind of call.
    public func bound(_ kind: AuthorityCallKind) -> Duration {
        switch kind {
        case .read: read
        case .send: send
        case .refresh: refresh
        }
    }

    /// The end of the operation the current task runs for (a read and its retries), on the
    /// injected clock's wall time: a remote call waits no longer than this, whatever its own bound.
    /// Set by the device around a read with `$operationDeadline.withValue(_:operation:)`.
    @TaskLocal public static var operationDeadline: Date?
}

/// Why a send's outcome is not known: the `details.reason` of its RAIN_501.
public enum AuthorityOutcome {
    /// The request left, and no answer came within the send's bound or before the connection was
    /// lost: it may or may not have taken effect at the authority.
    public static let unknownReason = "outcome_unknown"
}
