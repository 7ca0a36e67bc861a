import RainAuthorityAPI
import RainCore
import RainWire

extension DeviceService {
    /// A revocation pushed by the authority (issue 19), or the revocation stream (re)established
    /// (`appID` nil): every loaded profile of that app (of every app) with a session asks the
    /// authority whether it is still live, each in a task of its own, so nothing waits here.
    /// Profiles not loaded have no watcher to tell; they check at their next call.
    /// - Parameter appID: the app whose sessions on this device were revoked; nil for all.
    public func checkSessions(appID: String?) {
        for entry in profiles.entries() where appID == nil || entry.runtime.settings.appID == appID {
            guard entry.runtime.snapshot().authState == .authenticated else { continue }
            let session = entry.session
            Task { await session.checkLiveness() }
        }
    }

    /// What `RevocationFeed` or the embedded authority's `RevocationHub` reports, turned into checks.
    public func handle(_ event: RevocationFeed.Event) {
        switch event {
        case .connected: checkSessions(appID: nil)
        case .revoked(let revocation): checkSessions(appID: revocation.appID)
        }
    }
}
