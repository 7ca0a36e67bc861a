import FoundationEssentials
import Glibc
import RainAccess
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainKeyStore
import RainSystem
import RainWire

/// Moves a state directory's keys from one provider to another (`rainwalletd storage migrate`),
/// resumable after a kill at any point.
///
/// Steps, each recorded in the journal (`<state>/storage-migration.json`, written atomically)
/// once its effects are durable, each safe to repeat:
/// 1. `started`: the journal exists; nothing else changed.
/// 2. `keysCreated`: a NEW storage key and a NEW device key in the target; the embedded
///    authority's master key copied unchanged (the token and code hashes in the database and
///    every wallet's encryption derive from it: a new master key would orphan them all).
/// 3. `rebound`: the authority accepts the old and the new device key for the device's sessions
///    (`Authority.rebindDevice`); from here the device signs with the new key.
/// 4. `reencrypted`: every session file sealed anew with the new storage key (file by file, each
///    atomic: a kill leaves each under the old key or the new one, and both open until the end).
/// 5. `recorded`: the state directory's provider record names the target.
/// 6. `confirmed`: the authority accepts only the new key (`Authority.confirmDeviceKey`).
/// Then the old keys are deleted (an old copy of the old storage key opens none of the new files)
/// and the journal removed.
public struct StorageMigration: Sendable {
    /// Where a migration stands.
    public enum Step: String, Codable, Sendable, CaseIterable, Comparable {
        case started, keysCreated, rebound, reencrypted, recorded, confirmed

        var index: Int { Self.allCases.firstIndex(of: self) ?? 0 }
        public static func < (a: Step, b: Step) -> Bool { a.index < b.index }
    }

    /// The journal of a migration under way.
    public struct Journal: Codable, Sendable, Equatable {
        public var from: KeyProviderKind
        public var to: KeyProviderKind
        public var step: Step
        /// Whether the master key moves too (embedded authority).
        public var hasMasterKey: Bool
    }

    /// The journal's file name in the state directory.
    public static let journalFileName = "storage-migration.json"

    /// The state directory.
    public let stateDirectory: String
    /// Makes the providers.
    public let make: KeyProviderSelection.Factory
    /// Logs what the storage reports.
    let logger: Logger
    /// Called after each step with a line for people (the CLI prints it).
    public let progress: @Sendable (String) -> Void
    /// Called after each step's journal write (tests stop a migration there).
    let afterStep: @Sendable (Step) throws(RainError) -> Void

    /// A migration of `stateDirectory`'s keys.
    public init(
        stateDirectory: String, make: @escaping KeyProviderSelection.Factory, logger: Logger,
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.init(stateDirectory: stateDirectory, make: make, logger: logger, progress: progress, afterStep: { _ in })
    }

    init(
        stateDirectory: String, make: @escaping KeyProviderSelection.Factory, logger: Logger,
        progress: @escaping @Sendable (String) -> Void, afterStep: @escaping @Sendable (Step) throws(RainError) -> Void
    ) {
        self.stateDirectory = stateDirectory
        self.logger = logger
        self.make = make
        self.progress = progress
        self.afterStep = afterStep
    }

    var journalPath: String { "\(stateDirectory)/\(Self.journalFileName)" }

    /// The journal of a migration under way, or nil.
    /// - Throws: RAIN_102 for a journal that cannot be read (restore it from a backup: removing it
    ///   would lose track of which keys open the session files).
    public func pendingJournal() throws(RainError) -> Journal? {
        guard let bytes = try AtomicFile.read(journalPath, limit: 4096, options: [.noFollow]) else { return nil }
        do {
            return try JSONDecoder().decode(Journal.self, from: Data(bytes))
        } catch {
            throw RainError.invalid("\(journalPath) is not a storage migration journal", field: "storage-migration")
        }
    }

    func write(_ journal: Journal) throws(RainError) {
        let bytes: [UInt8]
        do {
            bytes = Array(try JSONEncoder().encode(journal))
        } catch {
            throw RainError(.internalError, "cannot encode the migration journal")
        }
        try AtomicFile.write(bytes, to: journalPath, mode: 0o600)
    }

    /// Starts moving the keys to `target` and runs the migration to its end.
    /// - Parameters:
    ///   - hasMasterKey: whether the state directory holds an embedded authority's master key.
    ///   - authority: rebinds the device key.
    ///   - device: the running identity, updated as the keys change (nil offline).
    /// - Throws: RAIN_102 when the keys are already in `target` or another migration is under way;
    ///   RAIN_501 when the target provider cannot be used now, or the authority refuses the rebind
    ///   (the migration then stays resumable: run the command again); RAIN_502 on I/O.
    public func migrate(
        to target: KeyProviderKind, hasMasterKey: Bool, authority: any Authority, device: DeviceIdentity? = nil
    ) async throws(RainError) {
        if let pending = try pendingJournal() {
            guard pending.to == target else {
                throw RainError.invalid(
                    "a migration to \(pending.to.rawValue) is under way; finish it first with `rainwalletd storage migrate --to \(pending.to.rawValue)`",
                    field: "to")
            }
            try await resume(authority: authority, device: device)
            return
        }
        guard let from = try KeyProviderRecord.read(stateDirectory: stateDirectory) else {
            throw RainError.invalid("this state directory has no key-provider record: start rainwalletd once first", field: "to")
        }
        guard from != target else {
            throw RainError.invalid("the keys are already in \(target.rawValue)", field: "to")
        }
        try make(target).checkAvailable()
        let journal = Journal(from: from, to: target, step: .started, hasMasterKey: hasMasterKey)
        try write(journal)
        progress("migration to \(target.rawValue) started (journal \(journalPath))")
        try afterStep(.started)
        try await run(journal, authority: authority, device: device)
    }

    /// Finishes the migration the journal records, from its last durable step.
    public func resume(authority: any Authority, device: DeviceIdentity? = nil) async throws(RainError) {
        guard let journal = try pendingJournal() else { return }
        progress("resuming the migration to \(journal.to.rawValue) after step \(journal.step.rawValue)")
        try await run(journal, authority: authority, device: device)
    }

    private func run(_ start: Journal, authority: any Authority, device: DeviceIdentity?) async throws(RainError) {
        var journal = start
        let source = try make(journal.from)
        let target = try make(journal.to)
        let deviceID = try DeviceIdentity.loadOrCreateID(stateDirectory: stateDirectory)

        func advance(_ step: Step, _ line: String) throws(RainError) {
            journal.step = step
            try write(journal)
            progress(line)
            try afterStep(step)
        }

        if journal.step < .keysCreated {
            try target.checkAvailable()
            try target.storeSecret(try SymmetricKey.random(), slot: .storage)
            let newDevice = try target.createDeviceKey()
            if journal.hasMasterKey {
                guard let master = try source.loadSecret(.authorityMaster) else {
                    throw RainError(
                        .provider, "the master key is missing from \(source.location); restore it from a backup first")
                }
                try target.storeSecret(master, slot: .authorityMaster)
            }
            try advance(
                .keysCreated,
                "new storage key and device key (\(newDevice.publicKey.algorithm) \(newDevice.publicKey.keyID)) in \(target.location)"
            )
        }
        guard let newSigner = try target.loadDeviceKey() else {
            throw RainError(.provider, "the new device key is missing from \(target.location)")
        }
        let oldSigner = try source.loadDeviceKey()
        if journal.step < .rebound {
            let old = oldSigner.map { [$0.publicKey] } ?? []
            // A remote authority rebinds only over a connection proving both keys: the holder
            // offers the new one too, the old one still current (the only one it knows so far).
            if let oldSigner { device?.replace(current: oldSigner, keeping: newSigner) }
            _ = try await authority.rebindDevice(
                AuthorityRebindDeviceRequest(deviceID: deviceID, newPublicKey: newSigner.publicKey.wireBytes),
                caller: AuthorityCaller(proof: DeviceProof(deviceID: deviceID, keys: [newSigner.publicKey] + old)))
            device?.replace(current: newSigner, keeping: oldSigner)
            try advance(.rebound, "the authority accepts the old and the new device key")
        }
        if journal.step < .reencrypted {
            guard let newKey = try target.loadSecret(.storage) else {
                throw RainError(.provider, "the new storage key is missing from \(target.location)")
            }
            let old = try source.loadSecret(.storage)
            let storage = try EncryptedFileStorage(
                stateDirectory: stateDirectory, key: newKey, previousKeys: old.map { [$0] } ?? [], logger: logger)
            let count = try storage.resealAll()
            // The app approvals and the confirmed settings are sealed under the storage key too.
            let records = try SealedRecords.reseal(
                stateDirectory: stateDirectory, storageKey: newKey, previousStorageKeys: old.map { [$0] } ?? [])
            try advance(
                .reencrypted,
                "\(count) session file(s) and \(records) sealed record(s) re-encrypted with the new storage key")
        }
        if journal.step < .recorded {
            try KeyProviderRecord.write(journal.to, stateDirectory: stateDirectory)
            try advance(.recorded, "the state directory now uses \(journal.to.rawValue)")
        }
        if journal.step < .confirmed {
            _ = try await authority.confirmDeviceKey(
                AuthorityConfirmDeviceKeyRequest(deviceID: deviceID, devicePublicKey: newSigner.publicKey.wireBytes),
                caller: AuthorityCaller(proof: DeviceProof(deviceID: deviceID, keys: [newSigner.publicKey])))
            device?.dropPrevious()
            try advance(.confirmed, "the authority confirmed the new device key")
        }
        try source.deleteSecret(.storage)
        if journal.hasMasterKey { try source.deleteSecret(.authorityMaster) }
        try source.deleteDeviceKey()
        try Syscall.removeFile(journalPath)
        try AtomicFile.syncDirectory(stateDirectory)
        progress("old keys deleted from \(source.location); migration to \(journal.to.rawValue) done")
    }

    /// The keys a daemon starts with while a migration is pending (the authority was unreachable
    /// when it tried to finish it): every session file opens and every session can refresh.
    public struct StartKeys: Sendable {
        /// Seals the files written now.
        public var storageKey: SymmetricKey
        /// Still open files sealed before.
        public var previousStorageKeys: [SymmetricKey]
        /// The device identity (current key, and the previous one while both are accepted).
        public var device: DeviceIdentity
    }

    /// The keys to run with at this journal's step.
    /// - Throws: RAIN_501 when a provider cannot be used; RAIN_502 on I/O.
    public func startKeys(_ journal: Journal) throws(RainError) -> StartKeys {
        let source = try make(journal.from)
        let target = try make(journal.to)
        let id = try DeviceIdentity.loadOrCreateID(stateDirectory: stateDirectory)
        let sourceStorage = try source.loadSecret(.storage)
        let targetStorage = journal.step >= .keysCreated ? try target.loadSecret(.storage) : nil
        let sourceDevice = try source.loadDeviceKey()
        let targetDevice = journal.step >= .keysCreated ? try target.loadDeviceKey() : nil
        // Before the rebind the authority knows only the old device key, and no file is under the new storage key.
        let isNewCurrent = journal.step >= .rebound
        let (current, previous) = isNewCurrent ? (targetStorage, sourceStorage) : (sourceStorage, targetStorage)
        let (currentDevice, previousDevice) = isNewCurrent ? (targetDevice, sourceDevice) : (sourceDevice, targetDevice)
        guard let storageKey = current, let signer = currentDevice else {
            throw RainError(
                .provider,
                "the keys of the migration to \(journal.to.rawValue) are missing; restore the state directory from a backup")
        }
        let device = DeviceIdentity(id: id, signer: signer)
        if isNewCurrent, journal.step < .confirmed { device.replace(current: signer, keeping: previousDevice) }
        return StartKeys(storageKey: storageKey, previousStorageKeys: previous.map { [$0] } ?? [], device: device)
    }
}
