import RainCore

extension DeviceService {
    /// Pauses this service for good before a live storage migration replaces it: every profile's
    /// refresh timer is disarmed, new refreshes are refused (RAIN_501 `storage_migrating`), and it
    /// returns once the refreshes in flight have saved their tokens. The service that replaces it
    /// restores the sessions from their files.
    public func retire() async {
        for runtime in profiles.entries() {
            await runtime.session.scheduler.retire()
        }
    }
}
