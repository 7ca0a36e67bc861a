import FoundationEssentials
import RainAccess
import RainConfig
import RainCore
import RainTransport
import Synchronization

/// What a device route gets for each call: the call's profile, already validated and allowed.
/// Its entry (runtime and session actor) is looked up, or created with its restore started, only
/// when a handler asks for it.
///
/// Its fields live in one immutable object: a call is copied into every closure that answers it
/// (the quick lane's ready answers on every call), and a copy is then one retain rather than one
/// per field. The two fields set after the call is made (`identity`, `confirmation`) replace the
/// object, once per call at most, on the ordinary path.
struct DeviceCall: Sendable {
    private final class Fields: Sendable {
        let profile: String
        let profiles: ProfileEntries
        let lease: ProfileLease?
        let peer: PeerCredentials
        let caller: CallerHandle?
        let identity: CallerIdentity?
        let confirmation: ConfirmationDetails?
        let knownRuntime: ProfileRuntime?

        init(
            profile: String, profiles: ProfileEntries, lease: ProfileLease?, peer: PeerCredentials,
            caller: CallerHandle?, identity: CallerIdentity?, confirmation: ConfirmationDetails?,
            knownRuntime: ProfileRuntime?
        ) {
            self.profile = profile
            self.profiles = profiles
            self.lease = lease
            self.peer = peer
            self.caller = caller
            self.identity = identity
            self.confirmation = confirmation
            self.knownRuntime = knownRuntime
        }

        func with(identity: CallerIdentity?, confirmation: ConfirmationDetails?) -> Fields {
            Fields(
                profile: profile, profiles: profiles, lease: lease, peer: peer, caller: caller, identity: identity,
                confirmation: confirmation, knownRuntime: knownRuntime)
        }
    }

    private var fields: Fields

    /// The profile's name.
    var profile: String { fields.profile }
    var profiles: ProfileEntries { fields.profiles }
    /// Keeps a profile the config does not name from being evicted while the call lives (nil for
    /// a named profile, which is never evicted).
    var lease: ProfileLease? { fields.lease }
    /// The caller's socket credentials (the audit log records its pid and uid).
    var peer: PeerCredentials { fields.peer }
    /// The connection the call came on (per-app access).
    var caller: CallerHandle? { fields.caller }
    /// The caller's identity when per-app access read it (the audit log records its path and hash).
    var identity: CallerIdentity? {
        get { fields.identity }
        set { fields = fields.with(identity: newValue, confirmation: fields.confirmation) }
    }
    /// What the user confirmed of this request, for a route that describes its prompt (a
    /// signature): its handler carries out only what matches `fingerprint`.
    var confirmation: ConfirmationDetails? {
        get { fields.confirmation }
        set { fields = fields.with(identity: fields.identity, confirmation: newValue) }
    }

    /// A call; `runtime` is the profile's runtime when the caller found it already (the quick lane
    /// keeps it per connection), so a ready answer looks nothing up.
    init(
        profile: String, profiles: ProfileEntries, lease: ProfileLease? = nil, peer: PeerCredentials,
        caller: CallerHandle? = nil, identity: CallerIdentity? = nil, runtime: ProfileRuntime? = nil
    ) {
        fields = Fields(
            profile: profile, profiles: profiles, lease: lease, peer: peer, caller: caller, identity: identity,
            confirmation: nil, knownRuntime: runtime)
    }

    /// The profile's entry.
    var entry: DeviceService.Entry { profiles.entry(profile) }
    /// The profile's runtime: what the loop reads without waiting.
    var runtime: ProfileRuntime {
        if let known = fields.knownRuntime { return known }
        return entry.runtime
    }
    /// The profile's session actor.
    var session: ProfileSession { entry.session }
}

/// A call's hold on a profile the config does not name: released when the last copy of its
/// `DeviceCall` goes (the handler's task ended).
final class ProfileLease: Sendable {
    let name: String
    let profiles: ProfileEntries

    fileprivate init(name: String, profiles: ProfileEntries) {
        self.name = name
        self.profiles = profiles
    }

    deinit { profiles.release(name) }
}

/// The profiles in use, each created (and its restore started) on first use.
///
/// Profiles the config names (and `default`) stay for the daemon's life. Of the others, any caller
/// may invent names: at most `maximumUnnamedProfiles` are held. A new name past that evicts the
/// least recently used one that is idle (restored, no session, no watcher, no pending code or
/// ceremony, no call in flight), or is refused with RAIN_302 when none is. An evicted profile
/// loses nothing: its next call restores it from storage like a daemon start.
final class ProfileEntries: Sendable {
    /// The most profiles not named in the config held at once.
    static let maximumUnnamedProfiles = 32

    struct Held {
        var entry: DeviceService.Entry
        /// Calls in flight holding it (`ProfileLease`s).
        var leases = 0
        /// When it was last used, by a counter (for least-recently-used eviction).
        var lastUse: UInt64 = 0
    }

    struct State {
        var held: [String: Held] = [:]
        /// The number of profiles in `held` the config does not name.
        var unnamedCount = 0
        var useCounter: UInt64 = 0
    }

    private let config: DaemonConfig
    private let context: DeviceContext
    private let state = Mutex(State())

    init(config: DaemonConfig, context: DeviceContext) {
        self.config = config
        self.context = context
    }

    /// Whether the config names the profile (or it is `default`): never evicted, never counted.
    func isNamed(_ name: String) -> Bool {
        name == ProfileName.defaultName || config.profiles[name] != nil
    }

    /// Admits one call for `name` (loop thread): for a profile the config does not name, makes
    /// sure its entry is held (evicting an idle one at the limit) and returns a lease that keeps it
    /// while the call lives; nil for a named profile.
    /// - Throws: RAIN_302 (`too_many_profiles`) when `maximumUnnamedProfiles` profiles not named in
    ///   the config are all in use.
    func admit(_ name: String) throws(RainError) -> ProfileLease? {
        guard !isNamed(name) else { return nil }
        let created = try state.withLock { s throws(RainError) -> DeviceService.Entry? in
            s.useCounter += 1
            if s.held[name] != nil {
                s.held[name]?.leases += 1
                s.held[name]?.lastUse = s.useCounter
                return nil
            }
            if s.unnamedCount >= Self.maximumUnnamedProfiles && !evictOne(&s) {
                throw RainError(
                    .refused,
                    "\(Self.maximumUnnamedProfiles) profiles not named in the daemon's config are in use (each has a "
                        + "session, a watcher, a pending code or a call in flight); name profile \(name) under "
                        + "\"profiles\" in the config, or log out of one",
                    details: .init(reason: "too_many_profiles"))
            }
            let entry = makeEntry(name)
            s.held[name] = Held(entry: entry, leases: 1, lastUse: s.useCounter)
            s.unnamedCount += 1
            return entry
        }
        if let created { startRestore(created) }
        return ProfileLease(name: name, profiles: self)
    }

    /// Ends one lease of `name`.
    fileprivate func release(_ name: String) {
        state.withLock { s in
            if let leases = s.held[name]?.leases, leases > 0 { s.held[name]?.leases = leases - 1 }
        }
    }

    /// The profile's entry, created (and its restore started) on first use.
    func entry(_ name: String) -> DeviceService.Entry {
        let (entry, created) = state.withLock { s -> (DeviceService.Entry, Bool) in
            s.useCounter += 1
            if let i = s.held.index(forKey: name) {
                s.held.values[i].lastUse = s.useCounter
                return (s.held.values[i].entry, false)
            }
            let e = makeEntry(name)
            s.held[name] = Held(entry: e, lastUse: s.useCounter)
            if !isNamed(name) { s.unnamedCount += 1 }
            return (e, true)
        }
        if created { startRestore(entry) }
        return entry
    }

    /// The runtime of a profile the config names (or `default`) that is in use already; nil
    /// otherwise. The quick lane's lookup: it creates nothing and, as for every named profile,
    /// keeps no use count.
    func namedRuntime(_ name: String) -> ProfileRuntime? {
        guard isNamed(name) else { return nil }
        return state.withLock { $0.held[name]?.entry.runtime }
    }

    /// Every profile in use.
    func entries() -> [DeviceService.Entry] { state.withLock { $0.held.values.map(\.entry) } }

    /// The runtimes of every profile in use.
    func runtimes() -> [ProfileRuntime] { state.withLock { $0.held.values.map(\.entry.runtime) } }

    /// The names of the profiles held (tests).
    var heldNames: Set<String> { state.withLock { Set($0.held.keys) } }

    /// Removes the least recently used idle profile not named in the config.
    /// - Returns: false when every one is in use.
    private func evictOne(_ s: inout State) -> Bool {
        var victim: (name: String, lastUse: UInt64)?
        for (name, held) in s.held where held.leases == 0 && !isNamed(name) && held.entry.runtime.isEvictable {
            if victim.map({ held.lastUse < $0.lastUse }) ?? true { victim = (name, held.lastUse) }
        }
        guard let victim else { return false }
        s.held.removeValue(forKey: victim.name)
        s.unnamedCount -= 1
        return true
    }

    private func makeEntry(_ name: String) -> DeviceService.Entry {
        let runtime = ProfileRuntime(name: name, settings: config.settings(for: name), clock: context.clock)
        if let link = context.health.authorityLink { runtime.publish(link: link) }
        runtime.publish(storage: context.health.storage)
        return DeviceService.Entry(runtime: runtime, session: ProfileSession(runtime: runtime, context: context))
    }

    private func startRestore(_ entry: DeviceService.Entry) {
        let session = entry.session
        Task { await session.restore() }
    }
}
