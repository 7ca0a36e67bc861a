import FoundationEssentials
import Glibc
import RainAccess
import RainCore
import RainCrypto
import RainDevice
import RainKeyStore
import RainSystem

/// `rainwalletd storage reset`: the way out of a lost or cleared TPM (RAIN_501 `tpm_key_lost`).
///
/// The keys the provider can no longer open, and the files they encrypted or bound, move into a
/// dated `lost-<UTC time>` directory inside the state directory (never deleted: a TPM that comes
/// back, say the right one plugged in again, opens them there), so that the next start creates
/// new keys under the recorded provider and the user logs in again:
/// - the storage key: its blob, `sessions/` and the sealed records (`apps.json`,
///   `confirmed-settings.json`, `prompt-place.json`: sealed with a key derived from it);
/// - the device key: its blob, `device-id` (the device starts as a new one) and `sessions/` (bound
///   at the authority to the lost key);
/// - the embedded authority's master key: refused unless `loseWallets` (every wallet in
///   `authority.sqlite3` needs it: restore it from a backup with `storage restore` instead); with
///   it, its blob and the whole `authority/` directory move, and the next start makes a new,
///   empty authority.
///
/// The encrypted files move before the keys, so that a kill half-way leaves a lost key in place
/// and running the command again finishes. The caller holds the state directory's lock.
struct StorageReset {
    let stateDirectory: String
    let provider: any KeyProvider
    let clock: () -> Date

    init(stateDirectory: String, provider: any KeyProvider, clock: @escaping () -> Date = Date.init) {
        self.stateDirectory = stateDirectory
        self.provider = provider
        self.clock = clock
    }

    /// What a reset did.
    struct Outcome: Equatable {
        /// The directory the files moved into, relative to the state directory.
        var directory: String
        /// The files and directories moved, relative to the state directory.
        var moved: [String]
        /// The keys that could not be opened (`storage`, `device`, `authority-master`).
        var lostKeys: [String]
        /// Whether the embedded authority's database moved with its master key.
        var isAuthorityReset: Bool

        var jsonText: String {
            JSONValue.object([
                "directory": .string(directory), "moved": .array(moved.map { .string($0) }),
                "lostKeys": .array(lostKeys.map { .string($0) }), "authorityReset": .bool(isAuthorityReset),
            ]).compactText
        }
    }

    /// Whether a key's error means the provider will never open it again (rather than not now).
    static func isLost(_ error: RainError) -> Bool { error.details.reason == "tpm_key_lost" }

    /// The state directory's files that belong to each key, relative to it.
    static let storageFiles = ["sessions"] + SealedRecords.fileNames
    static let deviceFiles = ["sessions", "device-id"]
    static let authorityFiles = ["authority"]

    /// Which of the provider's keys it refuses for good.
    /// - Throws: what the provider throws for any other reason (the TPM unreachable: try later).
    func lostKeys() throws(RainError) -> (storage: Bool, device: Bool, master: Bool) {
        func lost(_ load: () throws(RainError) -> Void) throws(RainError) -> Bool {
            do {
                try load()
                return false
            } catch  where Self.isLost(error) {
                return true
            }
        }
        let provider = provider
        return (
            try lost { () throws(RainError) in _ = try provider.loadSecret(.storage) },
            try lost { () throws(RainError) in _ = try provider.loadDeviceKey() },
            try lost { () throws(RainError) in _ = try provider.loadSecret(.authorityMaster) }
        )
    }

    /// Moves the lost keys and their files aside.
    /// - Parameter loseWallets: also move the embedded authority's master key and its database.
    /// - Throws: RAIN_102 `nothing_lost` when every key opens (or is simply missing: the start
    ///   makes it), `migration_pending` while a migration's journal is there, `master_key_lost`
    ///   when the master key is lost and `loseWallets` is not given (nothing moved then);
    ///   RAIN_501 when the provider cannot be used now; RAIN_502 on I/O.
    func run(loseWallets: Bool) throws(RainError) -> Outcome {
        if FileManager.default.fileExists(atPath: "\(stateDirectory)/\(StorageMigration.journalFileName)") {
            throw RainError.invalid(
                """
                a storage migration is under way (\(StorageMigration.journalFileName)): finish it with `rainwalletd \
                storage migrate` first; reset moves aside only keys the provider refuses for good
                """, field: "state-dir", reason: "migration_pending")
        }
        try provider.checkAvailable()
        let lost = try lostKeys()
        guard lost.storage || lost.device || lost.master else {
            throw RainError.invalid(
                """
                every key in \(provider.location) opens (a missing one is made at the next start): there is nothing \
                to reset
                """, field: "state-dir", reason: "nothing_lost")
        }
        if lost.master, !loseWallets {
            throw RainError.invalid(
                """
                the embedded authority's master key in \(provider.location) cannot be opened either, and every wallet \
                in authority/authority.sqlite3 needs it. Restore it from your backup first: `rainwalletd storage \
                restore BACKUP`, then run `rainwalletd storage reset` again. Without a backup the wallets are lost: \
                `rainwalletd storage reset --lose-wallets` moves the database aside too and the next start makes a \
                new, empty authority. Nothing was moved.
                """, field: "--lose-wallets", reason: "master_key_lost")
        }
        var files: [String] = []
        if lost.storage { files += Self.storageFiles }
        if lost.device { files += Self.deviceFiles }
        if lost.master { files += Self.authorityFiles }
        var keyFiles: [String] = []
        var lostNames: [String] = []
        if lost.storage {
            lostNames.append(KeySlot.storage.rawValue)
            keyFiles += keyPath(.storage)
        }
        if lost.device {
            lostNames.append("device")
            if let tpm = provider as? TPM2KeyProvider { keyFiles.append(relative(tpm.deviceKeyPath)) }
        }
        if lost.master {
            lostNames.append(KeySlot.authorityMaster.rawValue)
            keyFiles += keyPath(.authorityMaster)
        }
        var seen = Set<String>()
        let ordered = (files + keyFiles).filter { seen.insert($0).inserted }
        let present = ordered.filter { FileManager.default.fileExists(atPath: "\(stateDirectory)/\($0)") }
        let directory = try makeLostDirectory()
        for path in present { try move(path, into: directory) }
        try AtomicFile.syncDirectory(stateDirectory)
        return Outcome(directory: directory, moved: present, lostKeys: lostNames, isAuthorityReset: lost.master)
    }

    /// Moves the unopenable master key alone aside (before `storage restore` puts a backup in its place).
    /// - Returns: where it went, relative to the state directory.
    func moveLostMasterKey() throws(RainError) -> String {
        let directory = try makeLostDirectory()
        for path in keyPath(.authorityMaster) { try move(path, into: directory) }
        try AtomicFile.syncDirectory(stateDirectory)
        return directory
    }

    private func keyPath(_ slot: KeySlot) -> [String] {
        guard let tpm = provider as? TPM2KeyProvider else { return [] }
        return [relative(tpm.path(of: slot))]
    }

    private func relative(_ path: String) -> String {
        path.hasPrefix(stateDirectory + "/") ? String(path.dropFirst(stateDirectory.count + 1)) : path
    }

    /// Creates `lost-YYYYMMDDTHHMMSSZ` (with `-2`, `-3`… when taken), 0700.
    private func makeLostDirectory() throws(RainError) -> String {
        let stamp = RFC3339.string(from: clock()).replacing("-", with: "")
            .replacing(":", with: "")
        for n in 1...100 {
            let name = n == 1 ? "lost-\(stamp)" : "lost-\(stamp)-\(n)"
            if mkdir("\(stateDirectory)/\(name)", 0o700) == 0 { return name }
            guard errno == EEXIST else { break }
        }
        throw RainError(.internalError, "cannot create a lost-\(stamp) directory in \(stateDirectory): errno \(errno)")
    }

    /// Renames `path` (relative) to the same relative path under `directory`.
    private func move(_ path: String, into directory: String) throws(RainError) {
        let target = "\(stateDirectory)/\(directory)/\(path)"
        let parent = PathText.deletingLastComponent(target)
        if parent != "\(stateDirectory)/\(directory)" {
            _ = try OwnedPath.makeOrCheckDirectory(parent, mode: 0o700, name: "lost keys directory", field: "state-dir")
        }
        try Syscall.call("rename", path: "\(stateDirectory)/\(path)") { rename("\(stateDirectory)/\(path)", target) }
    }
}
