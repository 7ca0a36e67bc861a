import RainCore
import Synchronization

/// What a device route gets for each call: the call's profile, already validated and allowed.
/// Its entry (runtime and session actor) is looked up, or created with its restore started, only
/// when a handler asks for it.
struct DeviceCall: Sendable {
    let profile: String
    let profiles: ProfileEntries

    /// The profile's entry.
    var entry: DeviceService.Entry { profiles.entry(profile) }
    /// The profile's session actor.
    var session: ProfileSession { entry.session }
}

/// The profiles in use, each created (and its restore started) on first use.
final class ProfileEntries: Sendable {
    private let config: DaemonConfig
    private let context: DeviceContext
    private let entries = Mutex<[String: DeviceService.Entry]>([:])

    init(config: DaemonConfig, context: DeviceContext) {
        self.config = config
        self.context = context
    }

    /// The profile's entry, created (and its restore started) on first use.
    func entry(_ name: String) -> DeviceService.Entry {
        let (entry, created) = entries.withLock { p -> (DeviceService.Entry, Bool) in
            if let e = p[name] { return (e, false) }
            let runtime = ProfileRuntime(name: name, settings: config.settings(for: name), clock: context.clock)
            let e = DeviceService.Entry(runtime: runtime, session: ProfileSession(runtime: runtime, context: context))
            p[name] = e
            return (e, true)
        }
        if created {
            let session = entry.session
            Task { await session.restore() }
        }
        return entry
    }

    /// The runtimes of every profile in use.
    func runtimes() -> [ProfileRuntime] { entries.withLock { $0.values.map(\.runtime) } }
}
