import RainCore
import RainKeyStore
import RainWire

/// The daemon's keys as the storage RPCs (`Method.storageGetStatus`, `storageBackup`,
/// `storageMigrate`) reach them. The daemon implements it (`StorageGate`): it owns the keys, the
/// authority and the device service that a migration replaces.
public protocol StorageControl: Sendable {
    /// The provider, its keys, a pending migration (`rainwallet storage status`).
    /// - Throws: RAIN_502 on I/O.
    func status() async throws(RainError) -> StorageStatus

    /// The embedded authority's master key sealed under `passphrase` (`MasterKeyBackup`).
    /// - Throws: RAIN_202 (reason `no_master_key`) with a remote authority; RAIN_102 for an empty
    ///   passphrase; RAIN_501 when the provider cannot be used now.
    func backup(passphrase: [UInt8]) async throws(RainError) -> StorageBackupResponse

    /// Refuses a backup that cannot succeed, before the user is asked to confirm it.
    /// - Throws: RAIN_202 (reason `no_master_key`) with a remote authority.
    func checkBackupPossible() throws(RainError)

    /// Moves the keys to `target` while the daemon runs, reporting each step to `progress`.
    /// - Throws: RAIN_102 when the keys are already there or another migration is under way;
    ///   RAIN_501 when the target cannot be used, or a migration is already running.
    func migrate(to target: KeyProviderKind, progress: @escaping @Sendable (String) -> Void) async throws(RainError)
}

extension StorageStatus {
    /// What `provider` holds in `stateDirectory` and the migration pending there; a provider that
    /// cannot be used now gives its reason in `unavailable` instead of keys. Blocking (a TPM, D-Bus).
    /// - Throws: RAIN_102 for an unreadable migration journal.
    public static func read(
        provider: any KeyProvider, stateDirectory: String, make: @escaping KeyProviderSelection.Factory, logger: Logger
    ) throws(RainError) -> StorageStatus {
        var keys: [Key] = []
        var problem: String?
        do {
            try provider.checkAvailable()
            if let key = try provider.loadSecret(.storage) {
                keys.append(
                    Key(
                        slot: KeySlot.storage.rawValue, keyID: key.keyID, algorithm: "aes-256-gcm",
                        protects: KeySlot.storage.protects))
            }
            if let key = try provider.loadSecret(.authorityMaster) {
                keys.append(
                    Key(
                        slot: KeySlot.authorityMaster.rawValue, keyID: key.keyID, algorithm: "hkdf-sha256 master",
                        protects: KeySlot.authorityMaster.protects))
            }
            if let signer = try provider.loadDeviceKey() {
                keys.append(
                    Key(
                        slot: "device", keyID: signer.publicKey.keyID, algorithm: signer.publicKey.algorithm,
                        protects: "this device's sessions at the authority (signs the proof of each connection)"))
            }
        } catch {
            // The reason first (`keyring_locked`, `tpm_key_lost`, …): what scripts match on.
            problem = "\(error.code)\(error.details.reason.map { " \($0)" } ?? ""): \(error.message)"
        }
        let pending = try StorageMigration(stateDirectory: stateDirectory, make: make, logger: logger).pendingJournal()
        return StorageStatus(
            provider: provider.kind.rawValue, location: provider.location, keys: keys, unavailable: problem,
            migration: pending.map { Migration(to: $0.to.rawValue, step: $0.step.rawValue) })
    }
}
