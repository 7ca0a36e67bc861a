import Dispatch
import FoundationEssentials
import Glibc
import RainAccess
import RainConfig
import RainCore
import RainCrypto
import RainDevice
import RainSecurityKey
import RainSystem
import Synchronization

/// Per-app access as the daemon runs it: callers identified through their pidfd, the
/// user asked through pinentry, the approvals and the confirmed settings sealed under the storage
/// key, every decision in the audit log.
enum DeviceAccessSetup {
    /// The pinentry programs tried, in order, when `access.pinentry` names none.
    static let pinentryCandidates = [
        "/usr/bin/pinentry-gnome3", "/usr/bin/pinentry-qt", "/usr/bin/pinentry-curses", "/usr/bin/pinentry-tty",
    ]

    /// The pinentry to use: the configured one, else the first installed candidate; nil when none.
    static func pinentryProgram(_ configured: String?) -> String? {
        if let configured { return configured }
        return pinentryCandidates.first { access($0, X_OK) == 0 }
    }

    /// Builds per-app access for a device service.
    /// - Parameters:
    ///   - config: the settings the daemon runs with (the confirmed ones).
    ///   - settings: the security settings' guard.
    ///   - stateDirectory: where `apps.json` lives.
    ///   - keys: the storage key seals the approvals.
    ///   - audit: where decisions are recorded.
    /// - Throws: RAIN_102 `record_tampered` when `apps.json` was changed outside rainwalletd.
    static func make(
        config: DaemonConfig, settings: SettingsGuard, stateDirectory: String, storageKey: SymmetricKey,
        previousStorageKeys: [SymmetricKey], audit: any AuditRecorder, clock: any RainClock, logger: Logger,
        confirmsInstantly: Bool = false, securityKeys: SecurityKeyAuthenticator? = nil
    ) throws(RainError) -> DeviceAccess {
        let recordEvent = auditEvents(audit, logger: logger)
        let reader = CallerIdentityReader(allowsWritableCode: config.access.appsAllowingWritableCode)
        let resolver = ProcessCallerResolver(reader: reader)
        var coordinator: PromptCoordinator?
        let program = pinentryProgram(config.access.pinentry)
        let display = DisplayEnvironment(environment: ProcessInfo.processInfo.environment)
        // The terminal registered before this start, while it is still open (the same node).
        let placeStore = try PromptPlaceStore(
            stateDirectory: stateDirectory, storageKey: storageKey, previousStorageKeys: previousStorageKeys)
        let recorded = try placeStore.load()
        let kept = recorded.flatMap { $0.outlivesRestart ? $0 : nil }
        if let recorded, kept == nil {
            logger.info("prompt.place_closed", ["terminal": recorded.path])
        }
        var promptTimeout = Duration.seconds(60)
        if let program {
            let promptSettings = PromptCoordinator.Settings(
                pinentry: try Pinentry(program: program), note: PtraceScope.read().promptNote)
            promptTimeout = promptSettings.timeout
            coordinator = PromptCoordinator(
                settings: promptSettings,
                targets: PromptTargets(display: display, terminal: kept?.terminal),
                clock: clock, logger: logger.child("prompt"))
        }
        let prompts = PinentryPrompts(
            coordinator: coordinator, hasDisplay: display != nil, registered: kept, store: placeStore, clock: clock,
            audit: recordEvent)
        let place =
            if let kept { "terminal \(kept.path) (registered before this start)" } else if display != nil { "display" } else {
                "none (rainwallet prompt here)"
            }
        logger.info("access.ready", ["pinentry": program ?? "none", "promptPlace": place])
        let apps = try AppAccess(
            store: AppApprovalStore(
                stateDirectory: stateDirectory, storageKey: storageKey, previousStorageKeys: previousStorageKeys),
            resolver: resolver, confirmer: confirmsInstantly ? InstantConfirmer() : prompts, preApproved: config.access.apps,
            clock: clock, audit: recordEvent)
        // A place recorded by a daemon that kept no history still counts as a place that existed.
        if recorded != nil, apps.promptPlaceHistory == nil {
            try apps.recordPromptPlaceHistory(PromptPlaceHistory(firstRegisteredAt: clock.now))
        }
        prompts.keepHistory(in: apps)
        if let securityKeys, coordinator != nil {
            prompts.requireTouches(
                from: try ConfirmationKeyring(
                    store: ConfirmationKeyStore(
                        stateDirectory: stateDirectory, storageKey: storageKey, previousStorageKeys: previousStorageKeys),
                    authenticator: securityKeys, timeout: promptTimeout, logger: logger.child("touch")))
        }
        return DeviceAccess(
            apps: apps, settings: settings, prompts: prompts,
            hashFile: { (path) throws(RainError) in try hashProgram(path, reader: reader) })
    }

    /// The benchmarks' confirmer (`--test-confirm-instantly`, refused by `rainwalletd`): every
    /// question is confirmed at once, nothing shown, so what is measured is the path around it.
    struct InstantConfirmer: UserConfirming {
        var canPrompt: Bool { true }
        func confirm(_ question: UserQuestion) async throws(RainError) {
            // What a prompt would refuse is refused all the same: the pages must fit.
            _ = try question.pages(code: PromptCode(text: "BNCH"))
        }
    }

    /// A program's real path and content hash, as a running copy of it would be identified.
    static func hashProgram(_ path: String, reader: CallerIdentityReader) throws(RainError) -> (path: String, sha256: [UInt8]) {
        guard let resolved = realpath(path, nil) else {
            throw RainError.invalid(
                "\(path) cannot be read (\(ErrnoError(code: errno))): give the program's absolute path", field: "path")
        }
        let real = String(cString: resolved)
        free(resolved)
        let fd = try Syscall.open(real, .readOnly)
        defer { Syscall.closeUnchecked(fd, because: .readOnly) }
        return (real, try reader.hashes.sha256(of: fd, path: real, limit: reader.limits.maximumHashedBytes))
    }

    /// Per-app access's events as audit entries, written before the decision is answered (a
    /// failure to write is logged, never a secret).
    static func auditEvents(_ audit: any AuditRecorder, logger: Logger) -> @Sendable (AccessEvent) async -> Void {
        { event in
            do throws(RainError) {
                try await audit.record(auditRecord(event))
            } catch {
                logger.error("audit.not_written", ["event": event.event, "profile": event.profile, "error": error.message])
            }
        }
    }

    /// An access event as an audit record.
    static func auditRecord(_ event: AccessEvent) -> AuditRecord {
        let kind: AuditEvent
        var detail = event.detail
        switch event.event {
        case "app_approved": kind = .appApproved
        case "app_refused": kind = .appRefused
        case "app_revoked": kind = .appRevoked
        case "first_use_trusted":
            kind = .appApproved
            detail = "first use trusted: " + (event.detail ?? "no prompt can be shown")
        case "prompt_registered": kind = .promptRegistered
        case "prompt_move_requested": kind = .promptMoveRequested
        case "prompt_secret_wrong": kind = .promptSecretWrong
        case "confirmation_key_added": kind = .confirmationKeyAdded
        case "confirmation_keys_removed": kind = .confirmationKeysRemoved
        default: kind = .promptResult
        }
        let result: AuditResult =
            switch event.result {
            case "ok", "confirmed": .ok
            case let reason: AuditResult(outcome: "refused", reason: reason)
            }
        return AuditRecord(
            kind, profile: event.profile.isEmpty ? nil : event.profile, app: event.app.map(AuditApp.init), result: result,
            detail: detail)
    }
}

/// Reads a caller's identity through its pidfd, on a queue of its own: reading hashes the
/// executable, which must not block the event loop or the Swift concurrency pool.
final class ProcessCallerResolver: CallerResolving {
    private let reader: CallerIdentityReader
    private let queue = DispatchQueue(label: "rainwalletd.caller-identity")

    /// The calls waiting for a process's identity, by pid and uid.
    private struct Waiter {
        var process: ProcessDescriptor
        var continuation: CheckedContinuation<Result<CallerIdentity, RainError>, Never>
    }

    private struct Key: Hashable {
        var pid: Int32
        var uid: UInt32
    }

    private struct Pending {
        var waiters: [Waiter] = []
        var isReading = false
    }

    private let pending = Mutex<[Key: Pending]>([:])

    init(reader: CallerIdentityReader) { self.reader = reader }

    /// The caller's identity. The calls of one process that wait together (a client opening many
    /// connections at once) are served by one reading, made after they all asked: the reading is
    /// as fresh as each would have made on its own.
    func identity(of context: CallerHandle) async throws(RainError) -> CallerIdentity {
        let process = try Self.process(context)
        let key = Key(pid: process.pid, uid: context.peer.uid)
        let result = await withCheckedContinuation { continuation in
            let startsReading = pending.withLock { p in
                p[key, default: Pending()].waiters.append(Waiter(process: process, continuation: continuation))
                if p[key]?.isReading == true { return false }
                p[key]?.isReading = true
                return true
            }
            if startsReading { queue.async { self.serve(key) } }
        }
        return try result.get()
    }

    /// Serves `key`'s waiters, a batch at a time (on `queue`): each batch, taken before its
    /// reading starts, shares one reading.
    private func serve(_ key: Key) {
        while true {
            let batch = pending.withLock { p -> [Waiter] in
                let waiters = p[key]?.waiters ?? []
                if waiters.isEmpty {
                    p[key] = nil
                } else {
                    p[key]?.waiters = []
                }
                return waiters
            }
            guard let first = batch.first else { return }
            let shared = read(first.process, uid: key.uid)
            // A pid names one process while that process lives: if the one read still runs, every
            // waiter of that pid is that process. Otherwise each is read on its own.
            let isAlive = (try? first.process.hasExited()) == false
            for (i, waiter) in batch.enumerated() {
                waiter.continuation.resume(
                    returning: i == 0 || isAlive ? shared : read(waiter.process, uid: key.uid))
            }
        }
    }

    private func read(_ process: ProcessDescriptor, uid: UInt32) -> Result<CallerIdentity, RainError> {
        let reader = reader
        return Result { () throws(RainError) in
            do throws(RainError) {
                return try reader.read(process, uid: uid)
            } catch  where uid != getuid() && error.details.reason == "caller_unidentified" {
                // Another uid's process (admitted by allowedUIDs) cannot be read by this user's
                // daemon: it is named by its uid, and can never be approved as an app.
                return CallerIdentity(
                    pid: process.pid, uid: uid, executablePath: "(a program of uid \(uid))", executableSHA256: [],
                    unapprovable: ["another uid's program cannot be identified"])
            }
        }
    }

    func recheck(_ identity: CallerIdentity, of context: CallerHandle) async throws(RainError) {
        // Nothing more can be read of another uid's process.
        if identity.uid != getuid(), identity.executableSHA256.isEmpty { return }
        let process = try Self.process(context)
        let reader = reader
        _ = try await queue.runBlocking { () throws(RainError) in try reader.recheck(identity, process: process) }
    }

    private static func process(_ context: CallerHandle) throws(RainError) -> ProcessDescriptor {
        guard let process = context.process else {
            throw RainError(
                .unauthorized,
                "the calling process (pid \(context.peer.pid)) cannot be identified on this connection: connect over "
                    + "rainwalletd's Unix socket from a process of this machine's pid namespace",
                details: RainError.Details(reason: "caller_unidentified"))
        }
        return process
    }
}
