import RainAuthorityAPI
import RainCore
import RainStore
import RainWire

extension EmbeddedAuthority {
    /// Announces the sessions a login revoked, after the store committed them: each
    /// other device is pushed one `revoked_elsewhere`, and the login's own device one `replaced`
    /// when it replaced an older session there (another profile of the app); each then asks
    /// whether its sessions are still live.
    /// The login's account is noted for the read leases (`TouchedAccounts`): its answer waits
    /// until the devices that read the account dropped what they kept.
    func publishRevocations(of record: LoginRecord, appID: String, deviceID: String) {
        TouchedAccounts.note(record.accountID)
        var pushed = record.revokedDeviceIDs.map {
            AuthorityRevocation(appID: appID, deviceID: $0, reason: SessionRevokeReason.revokedElsewhere)
        }
        if record.isReplacedOnDevice {
            pushed.append(AuthorityRevocation(appID: appID, deviceID: deviceID, reason: SessionRevokeReason.replaced))
        }
        guard !pushed.isEmpty else { return }
        revocations.publish(pushed)
        logger.debug("revocations.published", ["app": appID, "devices": String(pushed.count)])
    }

    /// Announces one revoked session (a family revoked as stolen: a token presented with another
    /// device's key) to the device it belongs to, which then finds it revoked.
    func publishRevocation(of session: SessionRecord, reason: String) {
        revocations.publish([AuthorityRevocation(appID: session.appID, deviceID: session.deviceID, reason: reason)])
    }

    /// Announces and logs a session family revoked as stolen (a token presented with another
    /// device's key), and returns the RAIN_201 `refresh_rejected` the call is refused with.
    func stolenFamilyRevoked(_ session: SessionRecord) -> RainError {
        TouchedAccounts.note(session.accountID)
        publishRevocation(of: session, reason: SessionRevokeReason.stolenToken)
        logger.warning(
            "session.family_revoked",
            [
                "app": session.appID, "session": session.id, "device": session.deviceID,
                "reason": SessionRevokeReason.stolenToken,
            ])
        return Self.sessionError(RefreshRefusal.rejected)
    }
}
