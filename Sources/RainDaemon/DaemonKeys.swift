import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainConfig
import RainCore
import RainCrypto
import RainDevice
import RainKeyStore
import RainStore
import RainSystem

/// The device role's keys, from the state directory's key provider: the storage key, the device
/// key and, with the embedded authority, its master key.
struct DaemonKeys: Sendable {
    /// The provider in use.
    var provider: any KeyProvider
    /// Seals the session files.
    var storageKey: SymmetricKey
    /// Still open files sealed before (a migration that could not finish yet).
    var previousStorageKeys: [SymmetricKey] = []
    /// The device id and key(s).
    var device: DeviceIdentity
    /// The embedded authority's master key (nil with a remote authority).
    var masterKey: SymmetricKey?
    /// The journal of a migration still to finish.
    var pendingMigration: StorageMigration.Journal?
    /// Whether this start created the storage key: a new state directory (nothing it sealed
    /// before can be read).
    var isStorageKeyNew = false

    /// The factory of the state directory's providers.
    static func factory(stateDirectory: String, storage: StorageSettings) -> KeyProviderSelection.Factory {
        let tcti = storage.tcti
        return { (kind) throws(RainError) in try KeyProviders.make(kind: kind, stateDirectory: stateDirectory, tcti: tcti) }
    }

    /// The provider the state directory records (recording the config's choice the first time).
    /// A config naming either end of a migration under way (its journal in the state directory)
    /// is accepted: the start finishes the migration, which a kill may have stopped on either side
    /// of the record.
    /// - Parameter isStart: whether this is the daemon's start (it logs the migration it accepts;
    ///   the retries of an unavailable provider do not).
    static func selectProvider(
        stateDirectory: String, storage: StorageSettings, logger: Logger, isStart: Bool = false
    ) throws(RainError) -> any KeyProvider {
        let make = factory(stateDirectory: stateDirectory, storage: storage)
        let journal = try StorageMigration(stateDirectory: stateDirectory, make: make, logger: logger).pendingJournal()
        let selection = try KeyProviderSelection.resolve(
            choice: storage.provider, stateDirectory: stateDirectory, migrating: journal.map { ($0.from, $0.to) },
            make: make)
        if let configured = selection.configuredDuringMigration, let journal, isStart {
            logger.warning(
                "storage.provider_migrating",
                [
                    "configured": configured.rawValue, "provider": selection.kind.rawValue, "from": journal.from.rawValue,
                    "to": journal.to.rawValue, "step": journal.step.rawValue,
                    "hint":
                        "a migration from \(journal.from.rawValue) to \(journal.to.rawValue) was stopped half-way; this start finishes it",
                ])
        }
        if selection.isLegacyInstall {
            logger.info(
                "storage.provider_recorded",
                [
                    "provider": "file",
                    "hint": "the keys stay in files; `rainwalletd storage migrate --to tpm2` (or secret-service) moves them",
                ])
        } else if selection.isNewlyRecorded {
            logger.info("storage.provider_recorded", ["provider": selection.kind.rawValue])
        }
        return try make(selection.kind)
    }

    /// Opens the keys. Blocking (a TPM, D-Bus): call it from the setup queue.
    /// - Parameter isEmbedded: whether the embedded authority runs (it needs the master key).
    /// - Throws: RAIN_102 for a config naming another provider than the record, or a master key
    ///   missing beside an existing authority database; RAIN_501 when the provider cannot be used.
    static func open(
        stateDirectory: String, storage: StorageSettings, isEmbedded: Bool, logger: Logger
    ) throws(RainError) -> DaemonKeys {
        let provider = try selectProvider(stateDirectory: stateDirectory, storage: storage, logger: logger)
        try provider.checkAvailable()
        let masterKey = isEmbedded ? try loadMasterKey(provider, stateDirectory: stateDirectory) : nil
        let migration = StorageMigration(
            stateDirectory: stateDirectory, make: factory(stateDirectory: stateDirectory, storage: storage), logger: logger)
        if let journal = try migration.pendingJournal() {
            let keys = try migration.startKeys(journal)
            return DaemonKeys(
                provider: provider, storageKey: keys.storageKey, previousStorageKeys: keys.previousStorageKeys,
                device: keys.device, masterKey: masterKey, pendingMigration: journal)
        }
        let existing = try provider.loadSecret(.storage)
        let storageKey: SymmetricKey
        if let existing { storageKey = existing } else { storageKey = try provider.loadOrCreateSecret(.storage) }
        return DaemonKeys(
            provider: provider, storageKey: storageKey,
            device: try DeviceIdentity.loadOrCreate(stateDirectory: stateDirectory, provider: provider), masterKey: masterKey,
            isStorageKeyNew: existing == nil)
    }

    /// The embedded authority's database, relative to the state directory.
    static func authorityDatabase(stateDirectory: String) -> String {
        "\(stateDirectory)/authority/\(SQLiteAuthorityStore.fileName)"
    }

    /// The master key, created on a first start; refused when missing beside an existing database
    /// (a new key would silently orphan every wallet and session in it).
    static func loadMasterKey(_ provider: any KeyProvider, stateDirectory: String) throws(RainError) -> SymmetricKey {
        if let key = try provider.loadSecret(.authorityMaster) { return key }
        if FileManager.default.fileExists(atPath: authorityDatabase(stateDirectory: stateDirectory)) {
            throw RainError.invalid(
                """
                the embedded authority's master key is missing from \(provider.location) but its database \
                exists: restore the key with `rainwalletd storage restore FILE` (a backup made by \
                `rainwalletd storage backup`); a new key would lose every wallet
                """, field: "state-dir", reason: "master_key_missing")
        }
        return try provider.loadOrCreateSecret(.authorityMaster)
    }

    /// Finishes a migration a kill interrupted, before any session is served: the keys are then
    /// the target's alone. When the authority cannot be reached (a remote one down), the daemon
    /// runs on the journal's keys (every session still opens and refreshes) and the next start or
    /// `rainwalletd storage migrate` finishes it.
    static func finishMigration(
        _ keys: DaemonKeys, stateDirectory: String, storage: StorageSettings, isEmbedded: Bool,
        authority: any Authority, logger: Logger
    ) throws(RainError) -> DaemonKeys {
        let migration = StorageMigration(
            stateDirectory: stateDirectory, make: factory(stateDirectory: stateDirectory, storage: storage), logger: logger,
            progress: { logger.info("storage.migration", ["step": $0]) })
        do {
            try Daemon.blockingAwait { () async throws(RainError) in
                try await migration.resume(authority: authority)
            }
        } catch {
            logger.warning(
                "storage.migration_pending",
                [
                    "code": error.code.description, "error": error.message,
                    "hint": "sessions keep working; the next start or `rainwalletd storage migrate` finishes it",
                ])
            return keys
        }
        // The keys are the target's now, whichever end of the migration the config names.
        var finished = storage
        if let journal = keys.pendingMigration {
            if case .provider(let configured) = storage.provider, configured != journal.to {
                logger.warning(
                    "storage.provider_outdated",
                    [
                        "configured": configured.rawValue, "provider": journal.to.rawValue,
                        "hint": """
                        the migration this start finished moved the keys to \(journal.to.rawValue): set storage.provider \
                        to \(journal.to.rawValue) or auto before the next start, which a config naming \(configured.rawValue) \
                        stops (RAIN_102, exit 78)
                        """,
                    ])
            }
            finished.provider = .provider(journal.to)
        }
        return try open(stateDirectory: stateDirectory, storage: finished, isEmbedded: isEmbedded, logger: logger)
    }
}
