import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

// The refresh rules as a pure function of what the store found, run inside its write transaction,
// and the RAIN_201 reasons they refuse with.
extension EmbeddedAuthority {
    /// What a refresh decided, computed inside the store's transaction.
    struct RefreshVerdict: Sendable {
        enum Outcome: Sendable {
            /// Rotated: the new pair and the new generation number.
            case rotated(SessionTokens, generation: Int)
            /// A repeat within the grace window: the pair issued at the last rotation.
            case replayed(SessionTokens, generation: Int)
            /// Refused with this RAIN_201 reason; `revoked` is the revocation reason when the
            /// refusal also revoked the family.
            case refused(reason: String, revoked: String?)
            /// Refused with RAIN_501 `device_proof_required`: nothing proven, nothing changed.
            case unproven
        }
        var outcome: Outcome
        var sessionID: String?
    }

    /// The refresh rules, as a pure function of what the store found (no I/O: it runs while the
    /// store holds its write lock).
    static func decideRefresh(
        _ candidate: RefreshCandidate?, request: RefreshRequest, proof: DeviceProof, now: Date, keys: AuthorityKeys,
        settings: AuthoritySettings
    ) -> (change: SessionRefreshChange, verdict: RefreshVerdict) {
        func refuse(_ reason: String, sessionID: String?) -> (SessionRefreshChange, RefreshVerdict) {
            (.none, RefreshVerdict(outcome: .refused(reason: reason, revoked: nil), sessionID: sessionID))
        }
        func revoke(_ revokeReason: String, _ reason: String, sessionID: String) -> (
            SessionRefreshChange, RefreshVerdict
        ) {
            (
                .revoke(reason: revokeReason),
                RefreshVerdict(outcome: .refused(reason: reason, revoked: revokeReason), sessionID: sessionID)
            )
        }

        guard let candidate else { return refuse(RefreshRefusal.rejected, sessionID: nil) }
        let session = candidate.session
        if session.revokedAt != nil {
            return refuse(RefreshRefusal.reason(forRevoked: session.revokeReason), sessionID: session.id)
        }
        // The device binding (the connection's proof): no device clock is involved. A proof by
        // another key means the token was copied: the family is burned whichever generation was
        // presented. No proof changes nothing.
        switch binding(of: session, proof: proof) {
        case .unbound:
            return refuse(RefreshRefusal.deviceUnbound, sessionID: session.id)
        case .unproven:
            return (.none, RefreshVerdict(outcome: .unproven, sessionID: session.id))
        case .otherKey:
            return revoke(SessionRevokeReason.stolenToken, RefreshRefusal.rejected, sessionID: session.id)
        case .bound:
            break
        }
        // The right key under another device id: a confused device, not a thief.
        guard request.deviceID == session.deviceID else { return refuse(RefreshRefusal.rejected, sessionID: session.id) }

        if now >= session.refreshIssuedAt.adding(settings.refreshTokenLifetime) {
            return revoke(SessionRevokeReason.refreshExpired, RefreshRefusal.expired, sessionID: session.id)
        }

        switch candidate.generation {
        case .current:
            let next = keys.rotatedTokens(from: request.refreshToken)
            let rotation = SessionRotation(
                accessHash: keys.tokenHash(next.accessToken), refreshHash: keys.tokenHash(next.refreshToken),
                accessExpiresAt: now.adding(settings.accessTokenLifetime), rotatedAt: now)
            let tokens = SessionTokens(
                accessToken: next.accessToken, refreshToken: next.refreshToken,
                accessLifetime: settings.accessTokenLifetime)
            return (
                .rotate(rotation),
                RefreshVerdict(
                    outcome: .rotated(tokens, generation: session.refreshGeneration + 1), sessionID: session.id)
            )
        case .previous:
            let next = keys.rotatedTokens(from: request.refreshToken)
            guard let rotatedAt = session.rotatedAt,
                // Within the grace window (a reply lost in transit), or later while the device has
                // never used the current pair: a device that could not save the pair (a full disk)
                // and restarted asks again with the token it kept. The proof of the session's device
                // key was checked above; once the pair was used, a repeat is reuse, as outside the window.
                abs(now.unixMilliseconds - rotatedAt.unixMilliseconds) <= settings.refreshGraceWindow.milliseconds
                    || !session.isPairUsed,
                // The pair re-derived from the previous token is the current one, unless the master
                // key changed since: then it is not the same pair and must not be handed out.
                constantTimeEquals(keys.tokenHash(next.refreshToken), session.refreshHash)
            else {
                return revoke(SessionRevokeReason.reused, RefreshRefusal.reused, sessionID: session.id)
            }
            // What is left of the access token issued at the rotation.
            let remaining = max(0, session.accessExpiresAt.unixMilliseconds - now.unixMilliseconds)
            let tokens = SessionTokens(
                accessToken: next.accessToken, refreshToken: next.refreshToken,
                accessLifetime: .milliseconds(remaining))
            return (
                .none,
                RefreshVerdict(outcome: .replayed(tokens, generation: session.refreshGeneration), sessionID: session.id)
            )
        case .older:
            return revoke(SessionRevokeReason.reused, RefreshRefusal.reused, sessionID: session.id)
        }
    }

    /// RAIN_201 `details.reason` values of refresh and account reads (the wire strings of
    /// `SessionEndReason`, shared with the device).
    enum RefreshRefusal {
        /// Unknown token, or no valid proof of possession of the device key.
        static let rejected = SessionEndReason.refreshRejected.rawValue
        /// A rotated token presented again outside the grace window.
        static let reused = SessionEndReason.refreshTokenReused.rawValue
        /// The session has no device key.
        static let deviceUnbound = SessionEndReason.deviceUnbound.rawValue
        /// The account logged in on another device.
        static let revokedElsewhere = SessionEndReason.revokedElsewhere.rawValue
        /// Logout, or a newer login on the same device.
        static let revoked = SessionEndReason.revoked.rawValue
        /// Unrefreshed for longer than the refresh-token lifetime.
        static let expired = SessionEndReason.refreshExpired.rawValue
        /// The access token is past its expiry.
        static let accessExpired = SessionEndReason.accessExpired.rawValue
        /// The access token is unknown (or was rotated away).
        static let invalidToken = SessionEndReason.invalidToken.rawValue

        /// The refusal reason for a refresh of a revoked session.
        static func reason(forRevoked revokeReason: String?) -> String {
            switch revokeReason {
            case SessionRevokeReason.revokedElsewhere: revokedElsewhere
            case SessionRevokeReason.reused: reused
            case SessionRevokeReason.stolenToken: rejected
            case SessionRevokeReason.refreshExpired: expired
            default: revoked
            }
        }
    }

    /// RAIN_201 with `reason` in the details and a message for people.
    static func sessionError(_ reason: String) -> RainError {
        let message =
            switch reason {
            case RefreshRefusal.reused:
                "the refresh token was already used; the session was ended for safety; log in again"
            case RefreshRefusal.deviceUnbound:
                "the session is not bound to a device key and cannot be refreshed; log in again"
            case RefreshRefusal.revokedElsewhere: "the account logged in on another device; log in again"
            case RefreshRefusal.revoked: "the session was ended; log in again"
            case RefreshRefusal.expired: "the session expired; log in again"
            case RefreshRefusal.accessExpired: "the access token expired; refresh the session"
            case RefreshRefusal.invalidToken: "the access token is not valid; refresh the session or log in again"
            default: "the refresh was refused; log in again"
            }
        return RainError(.sessionExpired, message, details: RainError.Details(reason: reason))
    }
}
