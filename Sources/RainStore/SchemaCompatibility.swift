import RainCore

/// Whether a build may share a store whose schema it finds at open, for rolling upgrades.
///
/// Each migration declares the oldest schema version a build must know to keep using the store
/// once the migration is applied (its `readableFrom`): a migration only older builds can live
/// beside (a new table, a new column with a default, which they never touch) keeps the previous
/// value; one that changes what older builds read or write raises it to its own version. The store
/// records it with each version in `schema_version.min_reader_version`, and its value is the
/// largest recorded (a version recorded without one counts as readable from itself only). A build whose newest version is below the store's may run on it only when
/// its newest version is at least that value; it then migrates nothing and records nothing, so the
/// recorded version never goes down.
package struct SchemaCompatibility: Sendable, Equatable {
    /// The `details.reason` of a store this build may not share.
    package static let tooNewReason = "schema_too_new"

    /// The schema version the store records (after this build's migrations, when it ran them).
    package var storeVersion: Int
    /// The oldest schema version a build must know to share the store.
    package var readableFrom: Int
    /// The newest schema version this build knows.
    package var buildVersion: Int

    package init(storeVersion: Int, readableFrom: Int, buildVersion: Int) {
        self.storeVersion = storeVersion
        self.readableFrom = readableFrom
        self.buildVersion = buildVersion
    }

    /// Whether the store was migrated past what this build knows (by a newer build sharing it).
    package var isStoreNewer: Bool { storeVersion > buildVersion }

    /// Refuses a store this build may not share.
    /// - Parameter store: the store, for the message (a path, or PostgreSQL's `user@host:port/db`).
    /// - Throws: RAIN_102 `schema_too_new` (field `store`) naming the store's version, the oldest
    ///   version that may share it and this build's, when the store is newer and this build older
    ///   than that.
    package func check(store: String) throws(RainError) {
        guard isStoreNewer, buildVersion < readableFrom else { return }
        throw RainError.invalid(
            "authority store \(store) has schema version \(storeVersion), which only builds of schema version "
                + "\(readableFrom) or newer may share; this rainwalletd knows schema version \(buildVersion). Upgrade "
                + "this instance to the version of the instances that migrated the store",
            field: "store", reason: Self.tooNewReason)
    }

}
