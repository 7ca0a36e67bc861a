import RainAuthorityAPI
import RainCore
import RainStore
import RainWire

extension EmbeddedAuthority {
    /// Announces the sessions a login revoked on other devices (issue 19), after the store
    /// committed them: each device is pushed one `revoked_elsewhere`, and asks whether its
    /// sessions are still live.
    func publishRevocations(of record: LoginRecord, appID: String) {
        guard !record.revokedDeviceIDs.isEmpty else { return }
        revocations.publish(
            record.revokedDeviceIDs.map {
                AuthorityRevocation(appID: appID, deviceID: $0, reason: SessionRevokeReason.revokedElsewhere)
            })
        logger.debug("revocations.published", ["app": appID, "devices": String(record.revokedDeviceIDs.count)])
    }
}
