import Dispatch
import FoundationEssentials
import Glibc
import RainAccess
import RainAuthority
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainDevice
import RainKeyStore
import RainSystem
import RainTransport
import RainWire
import Synchronization

/// Stands between the socket and the device service: it serves while the key provider cannot be
/// used, hands every call to the device service once the keys open, and answers the storage
/// methods (`StorageControl`), a live migration among them.
///
/// While the keys do not open, GetInfo answers (capability `storage-loading`, and the provider),
/// so does Storage/Status (the daemon's own user; `unavailable` gives the reason), and every other
/// call is RAIN_501 with the provider's reason (`keyring_locked`,
/// `no_secret_service`, `tpm_unavailable`) and a message saying what to do: never a crash, never a
/// weaker provider instead. It retries on the injected clock every `retryInterval`, and at once
/// when a call arrives (at most once a second: see `StorageRetry`); once the keys open, it restores
/// the stored sessions.
///
/// During a live migration (`rainwallet storage migrate`) every call but GetInfo is RAIN_501
/// `storage_migrating`; the old service's refresh timers are stopped, the migration runs with the
/// daemon's own authority and device identity, then the keys are opened anew (the embedded
/// authority closed first: it holds the database) and the stored sessions restored.
final class StorageGate: ServerHandler, StorageControl {
    struct State {
        var opened: DeviceSetup.Opened? {
            didSet { updateServing() }
        }
        var reason: RainError?
        /// Since when the keys do not open (for GetInfo's storage health).
        var waitingSince = Date()
        /// The provider the state directory records (changes with a migration).
        var provider: any KeyProvider
        /// The target of the live migration running now, if one is.
        var migrationTarget: KeyProviderKind? {
            didSet { updateServing() }
        }
        /// The quick lane of the service that takes calls now: `opened`'s while no migration runs.
        /// Kept apart for the quick lane, which reads it on every call: reading it through
        /// `opened` would copy the whole `Opened`, and retaining the service
        /// itself would take the slow path of its side table (`DeviceService.QuickLane`).
        private(set) var servingLane: DeviceService.QuickLane?

        private mutating func updateServing() {
            servingLane = migrationTarget == nil ? opened?.service.quickLane : nil
        }
        var retry: StorageRetry<DeviceSetup.Opened>?
        var isStopped = false
    }

    /// How long between two tries of an unavailable provider when no call arrives.
    static let retryInterval: Duration = StorageRetry<DeviceSetup.Opened>.defaultInterval

    private let state: Mutex<State>
    /// The audit log, once opened: it outlives a reopening of the keys.
    private let auditLog = Mutex<AuditLog?>(nil)
    private let ownUID = getuid()
    private let allowedUIDs: Set<UInt32>
    /// How the keys open; after a live migration its config names the new provider, so that a
    /// config naming the old one explicitly does not stop the reopening (the next start says what to do).
    private let setupState: Mutex<DeviceSetup>
    private var setup: DeviceSetup { setupState.withLock { $0 } }
    /// Where blocking storage work runs (a TPM, D-Bus, PBKDF2, files): never the Swift pool.
    private let queue = DispatchQueue(label: "rainwalletd.keys")
    /// Tests only (`--enable-test-methods`): a FIFO a live migration opens once it refuses calls,
    /// and reads to its end before it goes on, so a test can call meanwhile without sleeping.
    private let migrationHold: String?

    /// The environment variable naming ``migrationHold`` (honoured with the test methods only).
    static let migrationHoldVariable = "RAINWALLETD_TEST_MIGRATION_HOLD"

    init(setup: DeviceSetup, provider: any KeyProvider) {
        setupState = Mutex(setup)
        allowedUIDs = setup.config.allAllowedUIDs
        state = Mutex(State(provider: provider))
        migrationHold =
            setup.options.isTestMethodsEnabled ? ProcessInfo.processInfo.environment[Self.migrationHoldVariable] : nil
    }

    /// Whether an error opening the keys is a provider that cannot be used now (waited for), rather
    /// than a mistake that stops the start. A key the TPM refuses for good (`tpm_key_lost`) is
    /// waited for too: the daemon serves and every call says to run `rainwalletd storage reset`.
    static func isWaitable(_ error: RainError) -> Bool {
        error.code == .provider && error.details.reason != "provider_not_built"
    }

    /// Opens the keys with this gate answering the storage methods (blocking: the setup queue).
    /// The audit log the first opening made is kept for every later one.
    func open() throws(RainError) -> DeviceSetup.Opened {
        try setup.open(control: self, audit: auditLog.withLock { $0 })
    }

    /// Serves through `opened` from now on.
    func serve(_ opened: DeviceSetup.Opened) {
        auditLog.withLock { $0 = opened.audit }
        state.withLock {
            $0.opened = opened
            $0.provider = opened.keys.provider
        }
    }

    /// Records why the keys do not open.
    func wait(_ reason: RainError) {
        state.withLock { s in
            if s.reason == nil { s.waitingSince = Date() }
            s.reason = reason
        }
    }

    /// The refusal of a call made while the keys do not open.
    func refusal() -> RainError {
        let (reason, provider) = state.withLock { ($0.reason, $0.provider.kind) }
        var details = RainError.Details(reason: reason?.details.reason ?? "storage_loading")
        details.field = "storage.provider"
        if let reason, StorageReset.isLost(reason) {
            // No retry opens these keys: the message says what does.
            return RainError(.provider, "storage cannot open its keys: \(reason.message)", details: details)
        }
        return RainError(
            .provider,
            """
            storage is loading: the \(provider.rawValue) key provider cannot be used now (\(reason?.message ?? "not ready")); \
            rainwalletd tries again at each call (at most once a second) and every \(Self.retryInterval.components.seconds) s
            """, details: details)
    }

    /// The refusal of a call made while the keys move to another provider.
    static func migrating(to target: KeyProviderKind) -> RainError {
        var details = RainError.Details(reason: "storage_migrating")
        details.field = "storage.provider"
        return RainError(
            .provider,
            "rainwalletd is moving its keys to \(target.rawValue): try again when `rainwallet storage migrate` ends",
            details: details)
    }

    /// What serves a call now.
    private enum Route {
        case service(DeviceService)
        case migrating(to: KeyProviderKind, provider: KeyProviderKind)
        case loading(provider: KeyProviderKind)
    }

    func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision {
        let (route, retry) = state.withLock { s -> (Route, StorageRetry<DeviceSetup.Opened>?) in
            if let target = s.migrationTarget { return (.migrating(to: target, provider: s.provider.kind), nil) }
            // The service alone: this is the per-call path, and copying all of `Opened` is not free.
            if let service = s.opened?.service { return (.service(service), nil) }
            return (.loading(provider: s.provider.kind), s.retry)
        }
        let provider: KeyProviderKind
        let refusal: RainError
        switch route {
        case .service(let service): return service.handle(request, context: context)
        case .migrating(let target, let current): (provider, refusal) = (current, Self.migrating(to: target))
        case .loading(let current): (provider, refusal) = (current, self.refusal())
        }
        guard context.peer.uid == ownUID || allowedUIDs.contains(context.peer.uid) else {
            return .respond(.failure(RainError(.unauthorized, "uid \(context.peer.uid) may not use this daemon")))
        }
        // Most often the user who just unlocked the keyring: try now rather than at the next round.
        retry?.callArrived()
        if case .loading = route, request.method == Method.storageGetStatus {
            // What `rainwallet storage status` is for: which provider, and why its keys do not open.
            guard context.peer.uid == ownUID else {
                return .respond(.failure(RoutePolicy.notDaemonOwner(uid: context.peer.uid, method: request.method)))
            }
            let responder = context.responder
            Task {
                do throws(RainError) {
                    responder.respond(.ok(try StorageStatusResponse(status: try await self.status()).encode()))
                } catch {
                    responder.respond(.failure(error))
                }
            }
            return .deferred
        }
        guard request.method == Method.daemonGetInfo else { return .respond(.failure(refusal)) }
        let waitingSince = state.withLock { $0.waitingSince }
        let isMigrating = if case .migrating = route { true } else { false }
        let info = GetInfoResponse(
            daemonVersion: daemonVersion, protocolVersion: protocolVersion,
            capabilities: [isMigrating ? "storage-migrating" : "storage-loading"],
            maxFrameBytes: UInt32(Frame.defaultMaximumLength), storageProvider: provider.rawValue,
            storage: StorageHealthState(isAvailable: false, lastError: refusal.message, since: waitingSince))
        do {
            return .respond(.ok(try info.encode()))
        } catch {
            return .respond(.failure(error))
        }
    }

    /// The service's quick lane while it serves (not while the keys load or move).
    func quickAnswer(
        _ request: QuickRequest, connection: ConnectionID, peer: PeerCredentials, memo: inout AnyObject?
    ) -> [UInt8]? {
        let lane = state.withLock { $0.servingLane }
        return lane?.answer(request, connection: connection, peer: peer, memo: &memo)
    }

    func cancel(connection: ConnectionID, requestID: UInt64) {
        state.withLock { $0.opened?.service }?.cancel(connection: connection, requestID: requestID)
    }

    func connectionClosed(_ connection: ConnectionID) {
        state.withLock { $0.opened?.service }?.connectionClosed(connection)
    }

    /// Tries to open the keys until they do, then serves through their service and restores the sessions.
    /// Call it after a try that failed (the daemon's start, a reopening after a migration).
    func retry(clock: any RainClock, logger: Logger) {
        let retry = StorageRetry<DeviceSetup.Opened>(
            clock: clock, queue: queue,
            open: { () throws(RainError) -> DeviceSetup.Opened in try self.open() },
            onFailure: { error in
                self.wait(error)
                logger.debug("storage.retry", ["code": error.code.description, "reason": error.details.reason ?? ""])
            },
            onOpen: { opened in
                self.state.withLock { $0.retry = nil }
                Task { await self.start(opened, logger: logger) }
            })
        let (isStopped, previous) = state.withLock { s -> (Bool, StorageRetry<DeviceSetup.Opened>?) in
            let previous = s.retry
            if !s.isStopped { s.retry = retry }
            return (s.isStopped, previous)
        }
        previous?.stop()
        if !isStopped { retry.start(lastTryStart: clock.monotonic) }
    }

    /// Serves through `opened` (unless the daemon stopped meanwhile) and restores the sessions.
    private func start(_ opened: DeviceSetup.Opened, logger: Logger) async {
        auditLog.withLock { $0 = opened.audit }
        let isStopped = state.withLock { s -> Bool in
            guard !s.isStopped else { return true }
            s.opened = opened
            s.provider = opened.keys.provider
            s.reason = nil
            return false
        }
        guard !isStopped else { return }
        opened.pruning?.start()
        opened.revocations?.start()
        opened.auditAnchoring?.start()
        logger.info("storage.ready", ["provider": opened.keys.provider.kind.rawValue, "device": opened.keys.device.id])
        await opened.service.restoreStoredProfiles()
    }

    /// Stops retrying and the pruning it started (the daemon stops).
    func stop() {
        let (retry, pruning, revocations, anchoring) = state.withLock { s in
            s.isStopped = true
            return (s.retry, s.opened?.pruning, s.opened?.revocations, s.opened?.auditAnchoring)
        }
        retry?.stop()
        pruning?.stop()
        revocations?.stop()
        anchoring?.stop()
        // Refusals still being gathered are written before the process ends.
        auditLog.withLock { $0 }?.flushNow()
    }

    // MARK: StorageControl

    private var factory: KeyProviderSelection.Factory {
        DaemonKeys.factory(stateDirectory: setup.stateDirectory, storage: setup.config.storage)
    }

    func status() async throws(RainError) -> StorageStatus {
        let (provider, make, setup) = (state.withLock { $0.provider }, factory, setup)
        return try await queue.runBlocking { () throws(RainError) in
            try StorageStatus.read(
                provider: provider, stateDirectory: setup.stateDirectory, make: make, logger: setup.logger.child("storage"))
        }
    }

    func checkBackupPossible() throws(RainError) {
        guard let opened = state.withLock({ $0.opened }) else { throw refusal() }
        _ = try Self.masterKey(of: opened)
    }

    private static func masterKey(of opened: DeviceSetup.Opened) throws(RainError) -> SymmetricKey {
        guard let master = opened.keys.masterKey else {
            throw RainError(
                .unauthorized,
                """
                there is no master key in \(opened.keys.provider.location): this device uses a remote authority, whose \
                master key is backed up where it runs (its authority.key)
                """, details: RainError.Details(reason: "no_master_key"))
        }
        return master
    }

    func backup(passphrase: [UInt8]) async throws(RainError) -> StorageBackupResponse {
        guard let opened = state.withLock({ $0.opened }) else { throw refusal() }
        let master = try Self.masterKey(of: opened)
        // PBKDF2 with many iterations: off the pool.
        let bytes = try await queue.runBlocking { () throws(RainError) in try MasterKeyBackup.seal(master, passphrase: passphrase)
        }
        return StorageBackupResponse(backup: bytes, keyID: master.keyID)
    }

    func migrate(to target: KeyProviderKind, progress: @escaping @Sendable (String) -> Void) async throws(RainError) {
        let logger = setup.logger.child("storage")
        let (make, stateDirectory) = (factory, setup.stateDirectory)
        guard let current = state.withLock({ $0.opened }) else { throw refusal() }
        // The mistakes that need no pause: answered while the daemon keeps serving.
        let migration = StorageMigration(
            stateDirectory: stateDirectory, make: make, logger: logger,
            progress: { line in
                logger.info("storage.migration", ["step": line])
                progress(line)
            })
        try await queue.runBlocking { () throws(RainError) in
            let pending = try migration.pendingJournal()
            if pending == nil, current.keys.provider.kind == target {
                throw RainError.invalid("the keys are already in \(target.rawValue)", field: "to")
            }
            if let pending, pending.to != target {
                throw RainError.invalid(
                    "a migration to \(pending.to.rawValue) is under way; finish it first with `rainwallet storage migrate --to \(pending.to.rawValue)`",
                    field: "to")
            }
            try make(target).checkAvailable()
        }
        let opened = try state.withLock { s throws(RainError) -> DeviceSetup.Opened in
            if let running = s.migrationTarget { throw Self.migrating(to: running) }
            guard !s.isStopped, let opened = s.opened else { throw refusal() }
            s.migrationTarget = target
            return opened
        }
        progress("the daemon answers other calls RAIN_501 storage_migrating until the migration ends")
        await opened.service.retire()
        opened.pruning?.stop()
        opened.revocations?.stop()
        opened.auditAnchoring?.stop()
        if let hold = migrationHold {
            // Its own queue: the storage queue stays free for the calls the test makes meanwhile.
            _ = try? await DispatchQueue(label: "rainwalletd.test-hold").runBlocking { () throws(RainError) in
                Self.waitForHold(hold)
            }
        }
        var failure: RainError?
        do {
            let (authority, device, isEmbedded) = (opened.authority, opened.keys.device, opened.isEmbedded)
            try await queue.runBlocking { () throws(RainError) in
                try Daemon.blockingAwait { () async throws(RainError) in
                    try await migration.migrate(to: target, hasMasterKey: isEmbedded, authority: authority, device: device)
                }
            }
        } catch {
            failure = error
            logger.warning(
                "storage.migration_failed", ["code": error.code.description, "reason": error.details.reason ?? ""])
        }
        // The old embedded authority holds the database: closed before the keys open a new one.
        if let embedded = opened.embedded { await embedded.store.close() }
        if let recorded = try? KeyProviderRecord.read(stateDirectory: stateDirectory) {
            let configured = setupState.withLock { s -> KeyProviderChoice in
                defer { s.config.storage.provider = .provider(recorded) }
                return s.config.storage.provider
            }
            if configured != .auto, configured != .provider(recorded) {
                progress(
                    "note: the config's storage.provider names another provider: set it to \(recorded.rawValue) or auto before the next start"
                )
            }
            if let provider = try? make(recorded) { state.withLock { $0.provider = provider } }
        }
        do {
            let reopened = try await queue.runBlocking { () throws(RainError) in try self.open() }
            state.withLock { s in
                s.migrationTarget = nil
            }
            await start(reopened, logger: setup.logger)
            progress("keys reopened from \(reopened.keys.provider.kind.rawValue); sessions restored")
        } catch {
            // The keys do not open now (a provider that went away): wait for them as at start.
            state.withLock { s in
                s.opened = nil
                s.reason = error
                s.migrationTarget = nil
            }
            logger.warning("storage.unavailable", ["code": error.code.description, "reason": error.details.reason ?? ""])
            retry(clock: setup.clock, logger: setup.logger)
            throw failure ?? error
        }
        if let failure { throw failure }
    }

    /// Blocks until the test's FIFO at `path` has been opened for writing and closed.
    private static func waitForHold(_ path: String) {
        // Opening a FIFO for reading blocks until a writer opens it; reading ends when it closes.
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        var buffer = [UInt8](repeating: 0, count: 256)
        while buffer.withUnsafeMutableBytes({ Glibc.read(fd, $0.baseAddress, $0.count) }) > 0 {}
    }
}
