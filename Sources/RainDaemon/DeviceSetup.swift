import Dispatch
import Foundation
import RainAccess
import RainAuthority
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainDevice
import RainKeyStore
import RainTransport
import RainWire
import Synchronization

/// The part of the device role's start that needs the keys: the keys themselves, the authority
/// (embedded with the provider's master key, or remote), a pending migration finished, the session
/// storage and the device service. Run at start, or later by `StorageGate` once the provider can
/// be used. Blocking: call it from a dispatch queue.
struct DeviceSetup: Sendable {
    let options: DaemonOptions
    let config: DaemonConfig
    let stateDirectory: String
    let clock: any RainClock
    let logger: Logger

    /// What the keys open.
    struct Opened: Sendable {
        var keys: DaemonKeys
        var service: DeviceService
        var pruning: PeriodicPruning?
        /// The audit log: refusals still being aggregated are written when the daemon stops.
        var audit: AuditLog
    }

    /// Opens the keys and builds the service.
    /// - Throws: RAIN_501 with the provider's reason when it cannot be used now; RAIN_102 and
    ///   RAIN_502 as the daemon's start does.
    func open() throws(RainError) -> Opened {
        let (options, config, clock, logger) = (options, config, clock, logger)
        let isEmbedded = options.authority == nil
        var keys = try DaemonKeys.open(
            stateDirectory: stateDirectory, storage: config.storage, isEmbedded: isEmbedded, logger: logger.child("storage"))
        let authority: any Authority
        var pruning: PeriodicPruning?
        if let remote = options.authority {
            let tls = try options.authorityCA.map { (ca) throws(RainError) in
                try Daemon.renamingField(of: TLSContext.client(trustedCertificatesFile: ca), to: "--authority-ca")
            }
            authority = try RemoteAuthority(
                address: remote, tls: tls, device: keys.device, clock: clock, logger: logger.child("authority"))
        } else {
            let masterKey = keys.masterKey
            let directory = "\(stateDirectory)/authority"
            let embedded = try Daemon.blockingAwait { () async throws(RainError) -> EmbeddedAuthority in
                let sender: (any CodeSender)?
                switch config.codeSender {
                case .outbox: sender = nil
                case .command(let arguments, let timeout):
                    sender = try CommandCodeSender(command: arguments, timeout: timeout, logger: logger.child("sender"))
                }
                return try await EmbeddedAuthority(
                    stateDirectory: directory, settings: config.authority, clock: clock, sender: sender,
                    masterKey: masterKey, logger: logger.child("authority"))
            }
            authority = embedded
            pruning = PeriodicPruning(authority: embedded, interval: config.authority.pruneInterval)
        }
        if keys.pendingMigration != nil {
            keys = try DaemonKeys.finishMigration(
                keys, stateDirectory: stateDirectory, storage: config.storage, isEmbedded: isEmbedded,
                authority: authority, logger: logger.child("storage"))
        }
        let storage = try EncryptedFileStorage(
            stateDirectory: stateDirectory, key: keys.storageKey, previousKeys: keys.previousStorageKeys,
            logger: logger.child("storage"))
        // The audit log of sensitive operations: a planted link or a file others can read stops the start.
        let audit = try AuditLog(directory: stateDirectory, clock: clock, logger: logger.child("audit"))
        let context = DeviceContext(
            authority: authority, storage: storage, clock: clock, device: keys.device, logger: logger,
            profileState: ProfileStateStore(directory: "\(stateDirectory)/profiles"), audit: audit)
        let service = DeviceService(config: config, context: context, isTestMethodsEnabled: options.isTestMethodsEnabled)
        return Opened(keys: keys, service: service, pruning: pruning, audit: audit)
    }
}

/// Serves the socket while the key provider cannot be used, then hands every call to the device
/// service once the keys open.
///
/// Meanwhile GetInfo answers (capability `storage-loading`), and every other call is RAIN_501 with
/// the provider's reason (`keyring_locked`, `no_secret_service`, `tpm_unavailable`) and a message
/// saying what to do: never a crash, never a weaker provider instead. It retries on the injected
/// clock every `retryInterval` and, once the keys open, restores the stored sessions.
final class StorageGate: ServerHandler {
    struct State {
        var service: DeviceService?
        var reason: RainError?
        var pruning: PeriodicPruning?
        var audit: AuditLog?
        var task: Task<Void, Never>?
        var isStopped = false
    }

    /// How long between two tries of an unavailable provider.
    static let retryInterval: Duration = .seconds(3)

    private let state = Mutex(State())
    private let ownUID = getuid()
    private let allowedUIDs: Set<UInt32>
    private let provider: KeyProviderKind
    private let info: [UInt8]

    init(config: DaemonConfig, provider: any KeyProvider) {
        allowedUIDs = config.allAllowedUIDs
        self.provider = provider.kind
        info =
            (try? GetInfoResponse(
                daemonVersion: daemonVersion, protocolVersion: protocolVersion, capabilities: ["storage-loading"],
                maxFrameBytes: UInt32(Frame.defaultMaximumLength)
            ).encode()) ?? []
    }

    /// Whether an error opening the keys is a provider that cannot be used now (waited for), rather
    /// than a mistake that stops the start.
    static func isWaitable(_ error: RainError) -> Bool {
        error.code == .provider && error.details.reason != "provider_not_built"
    }

    /// Records why the keys do not open.
    func wait(_ reason: RainError) { state.withLock { $0.reason = reason } }

    /// The refusal of a call made while the keys do not open.
    func refusal() -> RainError {
        let reason = state.withLock { $0.reason }
        var details = RainError.Details(reason: reason?.details.reason ?? "storage_loading")
        details.field = "storage.provider"
        return RainError(
            .provider,
            """
            storage is loading: the \(provider.rawValue) key provider cannot be used now (\(reason?.message ?? "not ready")); \
            rainwalletd retries every \(Self.retryInterval.components.seconds) s
            """, details: details)
    }

    func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision {
        if let service = state.withLock({ $0.service }) { return service.handle(request, context: context) }
        guard context.peer.uid == ownUID || allowedUIDs.contains(context.peer.uid) else {
            return .respond(.failure(RainError(.unauthorized, "uid \(context.peer.uid) may not use this daemon")))
        }
        if request.method == Method.getInfo { return .respond(.ok(info)) }
        return .respond(.failure(refusal()))
    }

    func cancel(connection: ConnectionID, requestID: UInt64) {
        state.withLock { $0.service }?.cancel(connection: connection, requestID: requestID)
    }

    func connectionClosed(_ connection: ConnectionID) {
        state.withLock { $0.service }?.connectionClosed(connection)
    }

    /// Tries `setup` until the keys open, then serves through its service and restores the sessions.
    func retry(_ setup: DeviceSetup, clock: any RainClock, logger: Logger) {
        let task = Task {
            let opened = await Self.retrying(
                clock: clock, interval: Self.retryInterval,
                open: { () async throws(RainError) -> DeviceSetup.Opened in
                    try await DispatchQueue(label: "rainwalletd.keys").runBlocking { () throws(RainError) in try setup.open() }
                },
                onFailure: { error in
                    self.wait(error)
                    logger.debug("storage.retry", ["code": error.code.description, "reason": error.details.reason ?? ""])
                })
            guard let opened else { return }
            let isStopped = state.withLock { s -> Bool in
                guard !s.isStopped else { return true }
                s.service = opened.service
                s.pruning = opened.pruning
                s.audit = opened.audit
                return false
            }
            guard !isStopped else { return }
            opened.pruning?.start()
            logger.info("storage.ready", ["provider": opened.keys.provider.kind.rawValue, "device": opened.keys.device.id])
            await opened.service.restoreStoredProfiles()
        }
        state.withLock { $0.task = task }
    }

    /// Stops retrying and the pruning it started (the daemon stops).
    func stop() {
        let (task, pruning, audit) = state.withLock { s in
            s.isStopped = true
            return (s.task, s.pruning, s.audit)
        }
        task?.cancel()
        pruning?.stop()
        audit?.flushNow()
    }

    /// Calls `open` until it succeeds, `interval` apart on `clock`, reporting each failure; nil when
    /// the task is cancelled first.
    static func retrying<T: Sendable>(
        clock: any RainClock, interval: Duration, open: @Sendable () async throws(RainError) -> T,
        onFailure: @Sendable (RainError) -> Void
    ) async -> T? {
        while !Task.isCancelled {
            do {
                return try await open()
            } catch {
                onFailure(error)
            }
            await clock.sleep(for: interval)
        }
        return nil
    }
}
