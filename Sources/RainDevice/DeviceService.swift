import Dispatch
import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainConfig
import RainCore
import RainTransport
import RainWire
import Synchronization

// `daemonVersion`, the version this build reports through GetInfo, is generated from the VERSION
// file by Plugins/BuildInfoPlugin (scripts/gen-build-info --version-only).

/// Serves the device protocol: checks the caller and the profile, then dispatches through the
/// route table (`DeviceService+Routes.swift`), one declaration per method: cheap answers on the loop
/// thread (snapshot reads, GetInfo, Account/Get and Wallet/Get answers kept per session), and
/// everything that mutates or may block on the profile's session actor.
public final class DeviceService: ServerHandler {
    struct Entry {
        let runtime: ProfileRuntime
        let session: ProfileSession
    }

    private let config: DaemonConfig
    let context: DeviceContext
    /// The profiles in use (internal for tests of eviction).
    let profiles: ProfileEntries
    private let ownUID = getuid()
    /// Every method's route, built once.
    let routes: RouteTable<DeviceCall>
    /// Per-app access; nil serves every caller of an allowed uid (unit tests).
    let access: DeviceAccess?
    /// This service among those of the process (a live migration or a reopening of the keys makes
    /// a new one): what the quick lane keeps for a connection answers only for the service that
    /// found it. An object's address can be reused; this number is not.
    private let serial = DeviceService.serials.wrappingAdd(1, ordering: .relaxed).oldValue
    private static let serials = Atomic<UInt64>(1)
    /// The quick lane's part of the service (`QuickLane`).
    public let quickLane: QuickLane
    /// Calls waiting for per-app access (the identity read, a prompt), by connection and request
    /// id, so that a cancel or a closed connection withdraws them.
    private let waiting = Mutex<[ConnectionID: [UInt64: Task<Void, Never>]]>([:])

    /// A service.
    /// - Parameters:
    ///   - access: per-app access; nil serves every caller of an allowed uid (unit tests).
    ///   - storage: the key provider in use (GetInfo's `storageProvider`) and what answers the
    ///     storage methods; nil answers them RAIN_501 (a service without the daemon's keys, in tests).
    public init(
        config: DaemonConfig, context: DeviceContext, access: DeviceAccess? = nil, isTestMethodsEnabled: Bool = false,
        storage: (provider: String, control: any StorageControl)? = nil
    ) {
        self.config = config
        self.context = context
        self.access = access
        self.profiles = ProfileEntries(config: config, context: context)
        // A remote authority's link changes, its revocation stream's and the keys' reach every
        // profile's snapshot and watchers.
        let (health, clock) = (context.health, context.clock)
        context.authority.observeLink { link in health.linkChanged(link) }
        (context.authority as? RemoteAuthority)?.observeDeviceKeys { error in health.keys(error, now: clock.now) }
        health.observe { [weak profiles] change in
            for runtime in profiles?.runtimes() ?? [] {
                switch change {
                case .link(let link): runtime.publish(link: link)
                case .storage(let storage): runtime.publish(storage: storage)
                }
            }
        }
        let routes = Self.routes(
            config: config, context: context, access: access,
            capabilities: Self.capabilities(config: config, isTestMethodsEnabled: isTestMethodsEnabled),
            isTestMethodsEnabled: isTestMethodsEnabled, storage: storage, logger: context.logger.child("rpc"))
        self.routes = routes
        self.quickLane = QuickLane(
            ownUID: ownUID, profiles: profiles, apps: access?.apps, routes: routes, serial: serial,
            callMetrics: context.metrics?.calls)
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
            "sign",
        ]
        // Only where ListOutbox answers: the outbox is on and it is the code sender.
        if config.authority.isDevOutboxEnabled, config.codeSender == .outbox { c.append("dev-outbox") }
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
        // The daemon's keys and its audit log are its user's alone: a uid the config lets use a
        // profile may not read, back up or move them.
        let route = routes.route(for: request.method)
        if ctx.peer.uid != ownUID, route?.policy.isDaemonOwnerOnly == true {
            return .respond(.failure(RoutePolicy.notDaemonOwner(uid: ctx.peer.uid, method: request.method)))
        }
        let lease: ProfileLease?
        do {
            lease = try profiles.admit(profile)
        } catch {
            return .respond(.failure(error))
        }
        let handle = CallerHandle(ctx)
        var call = DeviceCall(profile: profile, profiles: profiles, lease: lease, peer: ctx.peer, caller: handle)
        guard let route else { return routes.handle(request, context: ctx, call: call) }
        guard let access = access?.apps else { return routes.handle(request, route: route, context: ctx, call: call) }
        // Another uid the config admits (`allowedUIDs`, itself a confirmed setting) is bound by its
        // uid: its processes cannot be read by this user's daemon. What it asks the user to
        // confirm is still asked.
        let isOpen = route.policy.isOpenToAnyApp || ctx.peer.uid != ownUID
        // An export the profile does not allow is refused by its route: nobody is asked about it.
        let isRefusedAnyway =
            (request.method == Method.walletExportRecoveryPhrase || request.method == Method.walletExportPrivateKey)
            && !config.settings(for: profile).isExportAllowed
        let confirms = isRefusedAnyway ? nil : route.policy.userConfirms
        if confirms == nil {
            let (isApproved, identity) = access.approval(connection: ctx.connection, profile: profile)
            if isOpen || isApproved {
                call.identity = identity
                return routes.handle(request, route: route, context: ctx, call: call)
            }
        }
        // A call the user must confirm is decoded first: nobody is asked about a request that
        // would be refused as undecodable anyway.
        if confirms != nil {
            do {
                _ = try route.requestType.decode(request.payload)
            } catch {
                return .respond(.failure(error))
            }
        }
        // The identity is read (once per connection) and a prompt may be shown: off the loop.
        let routes = routes
        let gated = call
        // Registered under the lock the task's end takes, so a task that ends at once is still
        // removed (registered after, it would stay forever).
        waiting.withLock { waiting in
            waiting[ctx.connection, default: [:]][ctx.requestID] = Task {
                defer { self.finishWaiting(ctx) }
                var call = gated
                do throws(RainError) {
                    if let confirms, isOpen {
                        // Not the profile's business (the daemon's keys), or another uid the config
                        // admits: any app may ask, the user decides.
                        let caller = try await access.callerIdentity(handle)
                        try await Self.refuseBeforeAsking(route, request.payload, gated, context: ctx)
                        if let describe = route.describe {
                            let details = try await describe(request.payload, gated)
                            try await access.ask(details, caller: caller, profile: profile)
                            call.confirmation = details
                        } else {
                            try await access.ask(action: confirms, caller: caller, profile: profile)
                        }
                        call.identity = caller
                    } else if confirms != nil, let describe = route.describe {
                        let (caller, details) = try await access.confirmDescribed(
                            action: confirms ?? "", profile: profile, context: handle
                        ) { () async throws(RainError) in
                            try await Self.refuseBeforeAsking(route, request.payload, gated, context: ctx)
                            return try await describe(request.payload, gated)
                        }
                        call.identity = caller
                        call.confirmation = details
                    } else if let confirms {
                        call.identity = try await access.confirmSensitive(action: confirms, profile: profile, context: handle) {
                            () async throws(RainError) in
                            try await Self.refuseBeforeAsking(route, request.payload, gated, context: ctx)
                        }
                    } else if !route.policy.claimsProfile,
                        let reader = try await access.unownedReader(profile: profile, context: handle),
                        await !gated.session.hasSession()
                    {
                        // Status and the dev outbox of a profile nobody owns: answered, no owner made.
                        call.identity = reader
                    } else {
                        call.identity = try await access.authorize(profile: profile, context: handle)
                    }
                } catch {
                    ctx.responder.respond(.failure(error))
                    return
                }
                guard !Task.isCancelled else { return }
                if case .respond(let response) = routes.handle(request, route: route, context: ctx, call: call) {
                    ctx.responder.respond(response)
                }
            }
        }
        return route.placement == .stream ? .stream : .deferred
    }

    /// What refuses a call the user confirms, checked before anyone is asked, in the order
    /// validate → session → confirm: its input and the configuration it needs (the route's
    /// `validate`), then a session for a route that needs one. Nobody is asked about a call that
    /// would be refused anyway, and without a session the answer is RAIN_201 whether or not a
    /// prompt could be shown. The handler checks both again after the prompt. Last, a request
    /// whose bytes were queued before the caller's executable was read at accept: the program the
    /// caller ran before an exec may have written it, so it is refused (the client sends it again).
    /// - Throws: the route's RAIN_102; RAIN_201 without a session; RAIN_202 `sent_before_identity`.
    static func refuseBeforeAsking(
        _ route: AnyRoute<DeviceCall>, _ payload: [UInt8], _ call: DeviceCall, context: RequestContext? = nil
    ) async throws(RainError) {
        try await route.validate?(payload, call)
        if route.policy.needsSession { try await call.session.requireSession() }
        if context?.wasQueuedBeforeIdentity == true { throw .sentBeforeIdentity() }
    }

    /// The quick lane: a route placed `.ready` answered from the bytes its owner keeps, when the
    /// ordinary path would answer it at once with those bytes (`QuickLane`). Anything else returns
    /// nil and takes `handle`, which decides as before.
    public func quickAnswer(
        _ request: QuickRequest, connection: ConnectionID, peer: PeerCredentials, memo: inout AnyObject?
    ) -> [UInt8]? {
        quickLane.answer(request, connection: connection, peer: peer, memo: &memo)
    }

    /// What the quick lane needs of the service, in an object of its own that nothing refers to
    /// weakly. A caller that takes the lane on every call (the storage gate) retains this rather
    /// than the service: the service is referred to weakly (the revocation feed's handlers), so
    /// its reference count lives in a side table, and retaining and releasing it there on every
    /// call is slow (`scripts/bench --profile`).
    public final class QuickLane: Sendable {
        let ownUID: UInt32
        let profiles: ProfileEntries
        /// The per-app approvals, kept apart: reading them through the service's optional
        /// `DeviceAccess` would copy and destroy all of it on every call.
        let apps: AppAccess?
        /// The service's routes: the lane answers those placed `.ready`.
        let routes: RouteTable<DeviceCall>
        let serial: UInt64
        /// Counts the calls the lane answers, as the route table counts the others; nil counts
        /// nothing (and reads no clock).
        let callMetrics: CallMetrics?

        init(
            ownUID: UInt32, profiles: ProfileEntries, apps: AppAccess?, routes: RouteTable<DeviceCall>, serial: UInt64,
            callMetrics: CallMetrics? = nil
        ) {
            self.ownUID = ownUID
            self.profiles = profiles
            self.apps = apps
            self.routes = routes
            self.serial = serial
            self.callMetrics = callMetrics
        }

        /// `lookUp`, counted in `callMetrics` when it answers.
        public func answer(
            _ request: QuickRequest, connection: ConnectionID, peer: PeerCredentials, memo: inout AnyObject?
        ) -> [UInt8]? {
            guard let callMetrics else { return lookUp(request, connection: connection, peer: peer, memo: &memo)?.bytes }
            let started = ContinuousClock.now
            guard let answer = lookUp(request, connection: connection, peer: peer, memo: &memo) else { return nil }
            callMetrics.record(method: answer.route.method, code: 0, duration: .now - started)
            return answer.bytes
        }

        /// A route placed `.ready` answered from its kept bytes, when the ordinary path would answer
        /// it at once with them: the daemon's own uid (another uid the config admits takes the
        /// ordinary path), a profile the config names that is in use already (its name was checked
        /// when it was first used), and an app the per-app access has approved on this connection
        /// for the profile, unless the route is open to any app. Anything else, and a route whose
        /// owner has no bytes now, returns nil. What was found is kept in the connection's `memo`
        /// while the per-app decisions stay the same (their generation), so the next call looks
        /// nothing up. `QuickLaneTests` checks both paths answer the same.
        func lookUp(
            _ request: QuickRequest, connection: ConnectionID, peer: PeerCredentials, memo: inout AnyObject?
        ) -> (bytes: [UInt8], route: AnyRoute<DeviceCall>)? {
            guard peer.uid == ownUID else { return nil }
            let generation = apps?.generation ?? 0
            let grant: QuickGrant
            if let kept = memo as? QuickGrant, kept.service == serial, kept.generation == generation,
                kept.isFor(request.profile)
            {
                grant = kept
            } else {
                let profile = request.profile.map { String(decoding: $0, as: UTF8.self) } ?? ProfileName.defaultName
                guard let runtime = profiles.namedRuntime(profile) else { return nil }
                let isApproved = apps?.approval(connection: connection, profile: profile).isApproved ?? true
                grant = QuickGrant(
                    service: serial, profile: request.profile.map { Array($0) }, generation: generation,
                    isApproved: isApproved,
                    call: DeviceCall(profile: profile, profiles: profiles, peer: peer, runtime: runtime))
                memo = grant
            }
            guard let route = grant.route(request.method, in: routes), let ready = route.ready,
                grant.isApproved || route.policy.isOpenToAnyApp
            else { return nil }
            guard let bytes = ready(grant.call) else { return nil }
            return (bytes, route)
        }
    }

    /// What the quick lane found for a connection: a named profile's call context (its runtime,
    /// never evicted) of the service that found it (`serial`), whether the connection's app is
    /// approved for it at the per-app generation it was seen at, and the last route asked for.
    /// Used on the loop thread only.
    final class QuickGrant {
        let service: UInt64
        /// The profile entry's bytes; nil when the request named none (`default`).
        let profile: [UInt8]?
        let generation: UInt64
        let isApproved: Bool
        /// What a ready answer is given: the profile's runtime, found already.
        let call: DeviceCall
        /// The route the connection asked for last: a client repeats its calls.
        private var last: AnyRoute<DeviceCall>?

        init(service: UInt64, profile: [UInt8]?, generation: UInt64, isApproved: Bool, call: DeviceCall) {
            self.service = service
            self.profile = profile
            self.generation = generation
            self.isApproved = isApproved
            self.call = call
        }

        /// The profile's runtime.
        var runtime: ProfileRuntime { call.runtime }

        /// Whether a request naming `requested` (nil: none) is for this profile.
        func isFor(_ requested: UnsafeBufferPointer<UInt8>?) -> Bool {
            switch (profile, requested) {
            case (nil, nil): true
            case (let kept?, let asked?): kept.withUnsafeBufferPointer { QuickRequest.equals($0, asked) }
            default: false
            }
        }

        /// The `.ready` route of `method`, the last one again when it is the same.
        func route(_ method: UnsafeBufferPointer<UInt8>, in routes: RouteTable<DeviceCall>) -> AnyRoute<DeviceCall>? {
            if let last, last.methodUTF8.withUnsafeBufferPointer({ QuickRequest.equals($0, method) }) { return last }
            last = routes.readyRoute(method: method)
            return last
        }
    }

    private func finishWaiting(_ ctx: RequestContext) {
        waiting.withLock { w in
            w[ctx.connection]?.removeValue(forKey: ctx.requestID)
            if w[ctx.connection]?.isEmpty == true { w.removeValue(forKey: ctx.connection) }
        }
    }

    /// Waits until the restore is done or the timeout passes on the injected clock; a timeout
    /// returns normally with the state still `loading` (docs/user-guide.md "Sessions").
    static func awaitRestore(_ e: Entry, timeout: Duration) async -> SessionSnapshot {
        await e.runtime.awaitRestore(timeout: timeout)
    }

    public func cancel(connection: ConnectionID, requestID: UInt64) {
        // A call still waiting for its prompt withdraws it.
        waiting.withLock { $0[connection]?[requestID] }?.cancel()
        routes.callCancelled(connection: connection, requestID: requestID)
        for r in profiles.runtimes() where r.removeWatcher(connection: connection, requestID: requestID) { break }
    }

    public func connectionClosed(_ connection: ConnectionID) {
        waiting.withLock { $0.removeValue(forKey: connection) }?.values.forEach { $0.cancel() }
        access?.apps.connectionClosed(connection)
        routes.connectionClosed(connection)
        for r in profiles.runtimes() { r.removeWatchers(connection: connection) }
    }
}
