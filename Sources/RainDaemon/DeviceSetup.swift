import Dispatch
import FoundationEssentials
import Glibc
import RainAccess
import RainAuthority
import RainAuthorityAPI
import RainConfig
import RainCore
import RainCrypto
import RainDevice
import RainKeyStore
import RainPlatformAuthenticator
import RainSecurityKey
import RainTransport
import RainWire
import Synchronization

/// The part of the device role's start that needs the keys: the keys themselves, the authority
/// (embedded with the provider's master key, or remote), a pending migration finished, the session
/// storage and the device service. Run at start, or later by `StorageGate` once the provider can
/// be used. Blocking: call it from a dispatch queue.
struct DeviceSetup: Sendable {
    let options: DaemonOptions
    /// The config with the machine's policy applied (a live migration makes its
    /// `storage.provider` the new record for this run). Its guarded keys are what is requested;
    /// the daemon runs on the confirmed ones (`SettingsGuard`).
    var config: DaemonConfig
    /// What `/etc/rainwallet/policy.json` (or `--policy`) fixes.
    let policy: GuardedSettings
    /// The config file, re-read when the settings' status is asked (nil: none).
    let configFile: (path: String, isRequired: Bool)?
    let stateDirectory: String
    let clock: any RainClock
    let logger: Logger
    /// What `--metrics` counts; nil counts nothing.
    var metrics: DeviceMetrics? = nil

    /// What the keys open.
    struct Opened: Sendable {
        var keys: DaemonKeys
        var service: DeviceService
        var pruning: PeriodicPruning?
        /// The authority the service calls (a live migration rebinds the device key through it).
        var authority: any Authority
        /// The embedded authority, which holds the database until closed (nil with a remote one).
        var embedded: EmbeddedAuthority?
        /// Brings pushed revocations to the service; started and stopped with it.
        var revocations: RevocationDelivery?
        /// Anchors the audit log at the remote authority (nil with the embedded one); started and
        /// stopped with the service.
        var auditAnchoring: AuditAnchoring?

        /// Whether the embedded authority runs (its master key moves with the keys).
        var isEmbedded: Bool { embedded != nil }
        /// The audit log: refusals still being aggregated are written when the daemon stops.
        var audit: AuditLog
    }

    /// Opens the keys and builds the service.
    /// - Parameter control: what answers the storage methods (the daemon's `StorageGate`).
    /// - Throws: RAIN_501 with the provider's reason when it cannot be used now; RAIN_102 and
    ///   RAIN_502 as the daemon's start does.
    /// - Parameter audit: the audit log already open (a reopening after a live migration): one
    ///   writer per file, or its hash chain would fork.
    func open(control: (any StorageControl)? = nil, audit existing: AuditLog? = nil) throws(RainError) -> Opened {
        let (options, clock, logger) = (options, clock, logger)
        let isEmbedded = config.remoteAuthority == nil
        var keys = try DaemonKeys.open(
            stateDirectory: stateDirectory, storage: self.config.storage, isEmbedded: isEmbedded,
            logger: logger.child("storage"))
        // The security settings: the confirmed ones run, a config edit waits for the user.
        let settings = try settingsGuard(keys: keys)
        var running = try self.config.applying(settings.running, source: "the confirmed settings")
        // Whoever starts the daemon chooses its flags: an authority other than the confirmed one
        // would receive the device's tokens and proofs before the user said yes.
        if running.remoteAuthority != self.config.remoteAuthority {
            throw Self.unconfirmedAuthority(confirmed: running.remoteAuthority, requested: self.config.remoteAuthority)
        }
        // The keys are open: the provider and the TCTI they opened with are the ones this run uses
        // (the provider is bound to the state directory; a TPM other than the one that sealed the
        // keys cannot open them).
        running.storage = self.config.storage
        let config = running
        let authority: any Authority
        var pruning: PeriodicPruning?
        var embeddedAuthority: EmbeddedAuthority?
        if let remote = config.remoteAuthority {
            // The CA's bytes are read once, and must be the ones confirmed: a file swapped after the
            // check would otherwise choose whom the device trusts.
            let tls = try remote.readCA().map { (pem) throws(RainError) -> TLSContext in
                // (Root's policy may fix the file without its digest: then whatever it holds.)
                if let expected = remote.caSHA256, Hex.encode(SHA256.hash(pem)) != expected {
                    throw RainError.invalid(
                        "the authority's CA file \(remote.ca ?? "") changed while the daemon started: start it again",
                        field: "remoteAuthority.ca", reason: "settings_not_confirmed")
                }
                return try Daemon.renamingField(of: TLSContext.client(trustedCertificatesPEM: pem), to: "--authority-ca")
            }
            authority = try RemoteAuthority(
                address: remote.address, tls: tls, device: keys.device, deadlines: options.authorityDeadlines, clock: clock,
                logger: logger.child("authority"))
        } else {
            let masterKey = keys.masterKey
            let directory = "\(stateDirectory)/authority"
            let embedded = try Daemon.blockingAwait { () async throws(RainError) -> EmbeddedAuthority in
                try await EmbeddedAuthority(
                    stateDirectory: directory, settings: config.authority, clock: clock, masterKey: masterKey,
                    logger: logger.child("authority")
                ) { (store) throws(RainError) -> (any CodeSender)? in
                    switch config.codeSender {
                    case .outbox: return nil
                    case .command(let arguments, let timeout):
                        return try CommandCodeSender(command: arguments, timeout: timeout, logger: logger.child("sender"))
                    case .providers(let configuration):
                        // The SMS budget is the store's, kept across restarts.
                        return try configuration.makeSender(
                            smsBudget: StoreSMSBudget(store: store), logger: logger.child("sender"))
                    }
                }
            }
            authority = embedded
            embeddedAuthority = embedded
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
        let audit: AuditLog
        if let existing {
            audit = existing
        } else {
            audit = try AuditLog(directory: stateDirectory, clock: clock, logger: logger.child("audit"))
        }
        // The embedded authority's database sits beside the log: only a remote one can anchor it.
        let anchoring =
            isEmbedded
            ? nil
            : AuditAnchoring(log: audit, authority: authority, deviceID: keys.device.id, logger: logger.child("audit"))
        var context = DeviceContext(
            authority: authority, storage: storage, clock: clock, device: keys.device, logger: logger,
            profileState: ProfileStateStore(directory: "\(stateDirectory)/profiles"), audit: audit,
            auditAnchoring: anchoring, metrics: metrics)
        let securityKeys =
            if let directory = options.testSecurityKeys {
                SecurityKeyAuthenticator(list: { () throws(RainError) in try SocketSecurityKeys.list(directory: directory) })
            } else {
                SecurityKeyAuthenticator()
            }
        context.authenticators.securityKey = securityKeys
        // Always present: with keys outside a TPM it says, per ceremony, what to configure.
        context.authenticators.platform = PlatformDaemonAuthenticator(
            provider: keys.provider, storageKey: keys.storageKey, directory: "\(stateDirectory)/platform", clock: clock)
        let access = try DeviceAccessSetup.make(
            config: config, settings: settings, stateDirectory: stateDirectory, storageKey: keys.storageKey,
            previousStorageKeys: keys.previousStorageKeys, audit: audit, clock: clock, logger: logger.child("access"),
            confirmsInstantly: options.confirmsInstantly, securityKeys: securityKeys)
        recordSettingsStart(settings.start, audit: audit)
        let service = DeviceService(
            config: config, context: context, access: access, isTestMethodsEnabled: options.isTestMethodsEnabled,
            storage: control.map { (keys.provider.kind.rawValue, $0) })
        let revocations = RevocationDelivery(
            authority: authority, device: keys.device, service: service, clock: clock, logger: logger.child("revocations"),
            metrics: metrics)
        return Opened(
            keys: keys, service: service, pruning: pruning, authority: authority, embedded: embeddedAuthority,
            revocations: revocations, auditAnchoring: anchoring, audit: audit)
    }

    /// The settings' guard over the confirmed record, sealed under the storage key; the config
    /// file is re-read each time the status is asked, so an edit shows without a restart (the
    /// flags this run was started with stay what they were).
    func settingsGuard(keys: DaemonKeys) throws(RainError) -> SettingsGuard {
        let (policy, file, started, options) = (policy, configFile, config, options)
        let store = try ConfirmedSettingsStore(
            stateDirectory: stateDirectory, storageKey: keys.storageKey, previousStorageKeys: keys.previousStorageKeys)
        return try SettingsGuard(store: store, policy: policy, isNewState: keys.isStorageKeyNew) {
            () throws(RainError) -> GuardedSettings in
            guard let file else { return started.guarded.overridden(by: policy) }
            let current = try Self.requested(
                DaemonConfig.load(path: file.path, isRequired: file.isRequired), options: options)
            return current.guarded.overridden(by: policy)
        }
    }

    /// The config a start asks for: the file's, with `--authority` and `--authority-ca` in place of
    /// its `remoteAuthority`, and the CA file read into its digest.
    /// - Throws: RAIN_102 for a CA file that is missing, another user's or writable by others.
    static func requested(_ file: DaemonConfig, options: DaemonOptions) throws(RainError) -> DaemonConfig {
        var config = file
        if let address = options.authority {
            config.remoteAuthority = RemoteAuthoritySetting(address: address, ca: options.authorityCA)
        }
        return try config.withAuthorityCADigest()
    }

    /// Refuses a start whose flags or config name another remote authority than root's policy.
    /// - Throws: RAIN_102 `settings_fixed_by_policy` naming both.
    static func refuseAuthorityOtherThanPolicy(
        requested: DaemonConfig, policy: DaemonConfig, policyPath: String
    ) throws(RainError) {
        guard let fixed = policy.remoteAuthority, fixed != requested.remoteAuthority else { return }
        // A policy that names the CA file without its digest fixes the file, whatever it holds.
        if fixed.caSHA256 == nil, fixed.address == requested.remoteAuthority?.address,
            fixed.ca == requested.remoteAuthority?.ca
        {
            return
        }
        throw RainError.invalid(
            "\(policyPath) fixes the remote authority at \(fixed.description); this start names "
                + "\(requested.remoteAuthority?.description ?? "the embedded one"): leave --authority, --authority-ca and "
                + "config.json's remoteAuthority out, or ask root to change the policy",
            field: "remoteAuthority", reason: "settings_fixed_by_policy")
    }

    /// RAIN_102 `settings_not_confirmed`: a start that names another authority than the confirmed one.
    static func unconfirmedAuthority(
        confirmed: RemoteAuthoritySetting?, requested: RemoteAuthoritySetting?
    ) -> RainError {
        RainError.invalid(
            """
            the remote authority is a security setting: this start names \
            \(requested?.description ?? "the embedded one"), but the confirmed one is \
            \(confirmed?.description ?? "the embedded one"). Start rainwalletd as before, put the new one in \
            config.json's remoteAuthority, run `rainwallet settings confirm` (it asks on the prompt), then restart; \
            or have root set remoteAuthority in /etc/rainwallet/policy.json
            """, field: "remoteAuthority", reason: "settings_not_confirmed")
    }

    /// Logs and audits what the settings' guard found: the first start's record, or the changes
    /// waiting for confirmation.
    func recordSettingsStart(_ start: SettingsGuard.Start, audit: AuditLog) {
        switch start {
        case .unchanged:
            break
        case .recorded:
            // Written now, not by a task that could still run while a failed start exits.
            do throws(RainError) {
                try audit.recordNow(AuditRecord(.settingsChanged, profile: nil, app: nil, detail: "recorded at the first start"))
            } catch {
                logger.error("audit.not_written", ["event": "settings_changed", "error": error.message])
            }
        case .waiting(let changes):
            // Once per start, with the keys only (a code sender's values may hold a credential).
            do throws(RainError) {
                try audit.recordNow(
                    AuditRecord(
                        .settingsWaiting, profile: nil, app: nil,
                        result: AuditResult(outcome: "refused", reason: "settings_not_confirmed"),
                        detail: SettingsGuard.auditDetail("keys", keys: changes.map(\.key))))
            } catch {
                logger.error("audit.not_written", ["event": "settings_waiting", "error": error.message])
            }
            logger.warning(
                "settings.change_waiting",
                [
                    "keys": changes.map(\.key).joined(separator: ","),
                    "hint": "the daemon runs on the confirmed settings; run `rainwallet settings` to see the change "
                        + "and `rainwallet settings confirm` to confirm it on the prompt, then restart rainwalletd",
                ])
        }
    }
}
