/// Why the authority refused a login or contact-verification code: the `details.reason` of its
/// RAIN_203 (with `attemptsRemaining`) or, for `noPendingCode`, RAIN_102. The raw values are what
/// travels on the wire and what clients match.
public enum CodeRejectionReason: String, Sendable, Equatable, CaseIterable {
    /// The code does not match; `attemptsRemaining` says how many tries are left.
    case wrong
    /// The challenge was already confirmed.
    case used
    /// A newer code (a resend, another contact on the device) replaced this one.
    case retired
    /// Too many wrong codes.
    case locked
    /// Past the code's lifetime.
    case expired
    /// No pending challenge with that id for the app and device (RAIN_102, field `challengeId`).
    case noPendingCode = "no_pending_code"
}

/// Why a call through `RemoteAuthority` got no answer: the `details.reason` of its RAIN_301.
public enum RemoteAuthorityFailure: String, Sendable, Equatable, CaseIterable {
    /// The connection could not be made, or was lost while the call was in flight.
    case unreachable = "authority_unreachable"
    /// No answer within the call timeout (the call may still have taken effect).
    case deadlineExceeded = "deadline_exceeded"
}

/// Why the authority refused an audit head (`Authority.anchorAuditHead`): the `details.reason` of
/// its RAIN_302. Either way the anchor stays as it was.
public enum AuditAnchorRefusal: String, Sendable, Equatable, CaseIterable {
    /// The anchor has more entries than the head: the chain was cut, or is another one.
    case behind = "audit_anchor_behind"
    /// The anchor has as many entries and another last entry: the chain was rewritten, or is another one.
    case conflict = "audit_anchor_conflict"
}
