import FoundationEssentials
import Glibc
import RainAuthority
import RainCore
import RainCrypto
import RainKeyStore
import RainSystem

/// `rainwalletd storage status|backup|restore` on the state directory of `rainwalletd authority`.
///
/// An authority server keeps its master key in the file `authority.key` of its state directory (no
/// key provider: a server has no keyring or user session), so these read and write that file. The
/// backup is the device's format (`MasterKeyBackup`), so one backup restores either way.
struct AuthorityStorage {
    /// The state directory's `details.reason` when it holds a master key other than the backup's.
    static let keyPresentReason = "master_key_present"

    let stateDirectory: String

    var keyPath: String { PathText.joined(stateDirectory, AuthorityKeys.masterKeyFileName) }

    /// Whether `stateDirectory` is an authority server's: it holds what `rainwalletd authority`
    /// writes at the top (its key, its store record, its SQLite database) and no key-provider
    /// record, which only a device daemon writes.
    static func isAuthorityStateDirectory(_ stateDirectory: String) -> Bool {
        let manager = FileManager.default
        let top = [AuthorityKeys.masterKeyFileName, StateDirectoryStore.fileName, "authority.sqlite3"]
        let hasAuthorityFile = top.contains {
            manager.fileExists(atPath: PathText.joined(stateDirectory, $0))
        }
        let hasProviderRecord = manager.fileExists(
            atPath: PathText.joined(stateDirectory, KeyProviderRecord.fileName))
        return hasAuthorityFile && !hasProviderRecord
    }

    /// The master key, checked like every key file (0600, this user's, 32 bytes).
    /// - Throws: RAIN_102 (reason `no_master_key`) when there is none; what `KeyFile.load` throws.
    func masterKey() throws(RainError) -> SymmetricKey {
        guard let key = try KeyFile.load(at: keyPath) else {
            throw RainError.invalid(
                "\(keyPath) does not exist: this authority has no master key yet (it is made at the first start)",
                field: "state-dir", reason: "no_master_key")
        }
        return key
    }

    /// The lines of `storage status`, or its JSON: the device's fields (`provider` is `file`, the
    /// key's `location` is `authority.key`) and `role` `authority` and the recorded `store`.
    func status(isJSON: Bool) throws(RainError) -> [String] {
        let key = try masterKey()
        let store = try StateDirectoryStore.recorded(in: stateDirectory)
        let status = StorageStatus(
            provider: KeyProviderKind.file.rawValue, location: keyPath,
            keys: [
                StorageStatus.Key(
                    slot: KeySlot.authorityMaster.rawValue, keyID: key.keyID, algorithm: "hkdf-sha256 master",
                    protects: Self.protects)
            ], unavailable: nil, migration: nil)
        if isJSON {
            guard case .object(var object) = status.jsonValue else { return [status.jsonText] }
            object["role"] = .string("authority")
            if let store { object["store"] = .string(store) }
            return [JSONValue.object(object).compactText]
        }
        return ["role: authority server (\(stateDirectory))"] + status.humanLines(command: "rainwalletd storage migrate")
            + ["store: \(store ?? "not recorded yet (recorded at the next start)")"]
    }

    static let protects = "every wallet, token hash and code hash in the authority's store"

    /// Writes the master key to `path` under `passphrase` (mode 0600).
    /// - Throws: RAIN_102 when `path` exists and not `isForced`, or the passphrase is too short.
    func backup(to path: String, isForced: Bool, passphrase: () throws(RainError) -> [UInt8]) throws(RainError) -> String {
        let master = try masterKey()
        if !isForced, FileManager.default.fileExists(atPath: path) {
            throw RainError.invalid("\(path) exists; give --force to replace it", field: "--out")
        }
        let bytes = try MasterKeyBackup.seal(master, passphrase: try passphrase())
        try AtomicFile.write(bytes, to: path, mode: 0o600)
        return "master key \(master.keyID) of \(stateDirectory) written to \(path) (keep the passphrase apart from the file)"
    }

    /// Puts the backup's master key into `authority.key`. Takes the state directory's lock, so a
    /// running authority refuses it. Nothing is written, no directory made, until the passphrase opened
    /// the backup.
    ///
    /// A different `authority.key` already there is refused (RAIN_102 `master_key_present`): it may
    /// be the key of the store's data, and replacing it would log every device out. With `isForced`
    /// it is moved aside (`authority.key.replaced-TIME`, never deleted) and the backup's takes its place.
    /// - Returns: the lines to print.
    func restore(backup bytes: [UInt8], isForced: Bool, passphrase: () throws(RainError) -> [UInt8])
        throws(RainError) -> [String]
    {
        // The backup opens first: a wrong passphrase leaves everything as it was, not even a new directory.
        let master = try MasterKeyBackup.open(bytes, passphrase: try passphrase())
        let lock = try Daemon.openStateDirectory(stateDirectory, role: "rainwalletd storage restore")
        defer { withExtendedLifetime(lock) {} }
        var lines: [String] = []
        if let present = try KeyFile.load(at: keyPath) {
            if present.keyID == master.keyID {
                return ["master key \(master.keyID) is already in \(keyPath)"]
            }
            guard isForced else {
                throw RainError.invalid(
                    "\(keyPath) holds another master key (\(present.keyID)), not the backup's (\(master.keyID)); it may "
                        + "be the key of the store's data. Restore into a state directory without one, or give --force "
                        + "to move it aside", field: "FILE", reason: Self.keyPresentReason)
            }
            let aside = "\(keyPath).replaced-\(Self.timestamp(Date()))"
            let source = keyPath
            try Syscall.call("rename", path: source) { rename(source, aside) }
            lines.append("the master key \(present.keyID) that was there moved to \(aside)")
        }
        try KeyFile.write(master, to: keyPath)
        lines.append(
            "master key \(master.keyID) restored into \(keyPath); at its start the authority checks it against its "
                + "store (exit 78 master_key_mismatch when it is not the store's key)")
        return lines
    }

    /// A time for a file name: `20261206T221633Z`.
    static func timestamp(_ date: Date) -> String {
        RFC3339.string(from: date).replacing("-", with: "").replacing(":", with: "")
    }
}
