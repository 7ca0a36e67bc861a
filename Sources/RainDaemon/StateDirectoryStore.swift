import FoundationEssentials
import Glibc
import RainCore
import RainStore
import RainSystem

/// The store an authority state directory was started with, recorded in `authority.store`: `sqlite`,
/// or `postgres://HOST:PORT/DATABASE` (never the user or password). A start that names another
/// store is refused unless it says so with `--store-change`, so a forgotten `--store` never
/// silently serves an empty SQLite store beside a PostgreSQL one (or the reverse).
enum StateDirectoryStore {
    /// The record's name inside the state directory.
    static let fileName = "authority.store"
    /// The `details.reason` of a start whose store is not the state directory's.
    static let changedReason = "store_changed"

    /// What a `--store` value names: `sqlite` (also for none), or the database of a PostgreSQL URL.
    /// - Throws: RAIN_102 (field `--store`) for a URL libpq cannot parse.
    static func identity(of store: String?) throws(RainError) -> String {
        guard let store, store != "sqlite" else { return "sqlite" }
        return try PostgresURL.databaseIdentity(store)
    }

    /// The store recorded in `stateDirectory`, or nil when none is (a new directory, or one from a
    /// build without the record).
    /// - Throws: RAIN_102 when the record is linked, another user's or not this user's only.
    static func recorded(in stateDirectory: String) throws(RainError) -> String? {
        let path = PathText.joined(stateDirectory, fileName)
        guard
            let bytes = try OwnedPath.readTrustedFile(
                path, owners: [geteuid()], name: "the state directory's store record", field: "state-dir", limit: 4096)
        else { return nil }
        return String(decoding: bytes, as: UTF8.self).trimmingWhitespaceAndNewlines()
    }

    /// Refuses a start on `identity` when `stateDirectory` records another store, unless
    /// `isChangeAllowed` (`--store-change`).
    /// - Returns: whether the record must be written once the store opened (none yet, or a change).
    /// - Throws: RAIN_102 `store_changed` naming both stores and the fixes.
    static func check(stateDirectory: String, identity: String, isChangeAllowed: Bool) throws(RainError) -> Bool {
        guard let recorded = try recorded(in: stateDirectory) else { return true }
        if recorded == identity { return false }
        if isChangeAllowed { return true }
        let flag = recorded == "sqlite" ? "--store sqlite (or no --store)" : "--store \(recorded) (with its user)"
        throw RainError.invalid(
            "the state directory \(stateDirectory) was used with the store \(recorded), but this start names \(identity): "
                + "pass the same store (\(flag)); to switch stores on purpose, add --store-change (the state "
                + "directory's authority.key must then be the new store's), or move the state directory aside",
            field: "--store", reason: changedReason)
    }

    /// Records `identity` as the state directory's store (atomically, mode 0600).
    /// - Throws: RAIN_502 when the file cannot be written.
    static func record(_ identity: String, stateDirectory: String) throws(RainError) {
        try AtomicFile.write(
            Array("\(identity)\n".utf8), to: PathText.joined(stateDirectory, fileName), mode: 0o600)
    }
}
