import RainAuthorityAPI
import RainCore
import RainWire

extension DeviceService {
    /// A revocation pushed by the authority, or the revocation stream (re)established
    /// (`appID` nil): every loaded profile of that app (of every app) that has or may have a session
    /// (restoring) asks the authority whether it is still live, each in a task of its own, so
    /// nothing waits here.
    /// - Parameter appID: the app whose sessions on this device were revoked; nil for all.
    public func checkSessions(appID: String?) {
        for entry in profiles.entries() where appID == nil || entry.runtime.settings.appID == appID {
            guard entry.runtime.snapshot().authState != .unauthenticated else { continue }
            let session = entry.session
            Task { await session.checkLiveness() }
        }
    }

    /// What `RevocationFeed` or the embedded authority's `RevocationHub` reports, turned into checks.
    public func handle(_ event: RevocationFeed.Event) {
        let (health, now) = (context.health, context.clock.now)
        switch event {
        case .lost(let error, let stage):
            health.streamDown(error.message, now: now)
            if DeviceBinding.isLocalKeyFailure(error) {
                health.keys(error, now: now)
            } else if stage != "stream", let remote = context.authority as? RemoteAuthority {
                // The stream's connection could not be made or proven: the authority cannot be
                // reached, whether or not a call has tried since.
                remote.noteConnectionFailed(error)
            }
        case .connected:
            health.streamUp(now: now)
            // The stream's connection was proven: the keys sign.
            health.keys(RainError?.none, now: now)
            // Every stored session, loaded first: the stream may come up before the start's restore
            // reached a profile, and a session revoked while the daemon was down is caught here.
            Task {
                await restoreStoredProfiles()
                checkSessions(appID: nil)
            }
        case .revoked(let revocation): checkSessions(appID: revocation.appID)
        // The authority may have missed revocations (its LISTEN connection was lost): every
        // session, as at a reconnect.
        case .recheck: checkSessions(appID: nil)
        }
    }
}
