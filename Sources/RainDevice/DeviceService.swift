import Dispatch
import Foundation
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

/// The version this build reports through GetInfo.
public let daemonVersion = "0.1.0"

/// Serves the device protocol: checks the caller and the profile, then dispatches through the
/// route table (`DeviceService+Routes.swift`), one declaration per method: cheap answers on the loop
/// thread (snapshot reads, GetInfo), direct reads with an actor fallback (Account/Get, Wallet/Get),
/// and everything that mutates or may block on the profile's session actor.
public final class DeviceService: ServerHandler {
    struct Entry {
        let runtime: ProfileRuntime
        let session: ProfileSession
    }

    private let config: DaemonConfig
    private let context: DeviceContext
    /// The profiles in use (internal for tests of eviction).
    let profiles: ProfileEntries
    private let ownUID = getuid()
    /// Every method's route, built once.
    let routes: RouteTable<DeviceCall>

    public init(config: DaemonConfig, context: DeviceContext, isTestMethodsEnabled: Bool = false) {
        self.config = config
        self.context = context
        self.profiles = ProfileEntries(config: config, context: context)
        self.routes = Self.routes(
            config: config, context: context,
            capabilities: Self.capabilities(config: config, isTestMethodsEnabled: isTestMethodsEnabled),
            isTestMethodsEnabled: isTestMethodsEnabled, logger: context.logger.child("rpc"))
    }

    /// The profile's entry, created (and its restore started) on first use.
    func entry(_ name: String) -> Entry { profiles.entry(name) }

    /// Starts restoring every profile with a stored session (daemon start).
    public func restoreStoredProfiles() async {
        for name in await context.storage.storedProfiles() {
            await entry(name).session.restore()
        }
    }

    /// The session actor of a profile (tests).
    public func session(profile: String) -> ProfileSession { entry(profile).session }

    /// The most outbox entries one ListOutbox returns (the newest).
    static let outboxListLimit = 200

    /// Capabilities reported by GetInfo.
    static func capabilities(config: DaemonConfig, isTestMethodsEnabled: Bool) -> [String] {
        var c = [
            "login-code", "session-state", "watch", "logout", "await-restore", "refresh", "account", "wallet", "export",
            "passkeys", "contacts",
        ]
        if config.authority.isDevOutboxEnabled { c.append("dev-outbox") }
        if isTestMethodsEnabled { c.append("test-methods") }
        return c
    }

    /// Checks the profile name and the caller's uid, then dispatches through the route table (loop thread).
    public func handle(_ request: WireRequest, context ctx: RequestContext) -> HandlerDecision {
        let profile = request.profile ?? ProfileName.defaultName
        do {
            try ProfileName.validate(profile)
        } catch {
            return .respond(.failure(error))
        }
        if ctx.peer.uid != ownUID && !config.allowedUIDs.contains(ctx.peer.uid)
            && !config.settings(for: profile).allowedUIDs.contains(ctx.peer.uid)
        {
            return .respond(.failure(RainError(.unauthorized, "uid \(ctx.peer.uid) may not use profile \(profile)")))
        }
        let lease: ProfileLease?
        do {
            lease = try profiles.admit(profile)
        } catch {
            return .respond(.failure(error))
        }
        let call = DeviceCall(profile: profile, profiles: profiles, lease: lease, peer: ctx.peer)
        return routes.handle(request, context: ctx, call: call)
    }

    /// Waits until the restore is done or the timeout passes on the injected clock; a timeout
    /// returns normally with the state still `loading` (DESIGN §6).
    static func awaitRestore(_ e: Entry, timeout: Duration) async -> SessionSnapshot {
        await e.runtime.awaitRestore(timeout: timeout)
    }

    public func cancel(connection: ConnectionID, requestID: UInt64) {
        routes.callCancelled(connection: connection, requestID: requestID)
        for r in profiles.runtimes() where r.removeWatcher(connection: connection, requestID: requestID) { break }
    }

    public func connectionClosed(_ connection: ConnectionID) {
        routes.connectionClosed(connection)
        for r in profiles.runtimes() { r.removeWatchers(connection: connection) }
    }
}
