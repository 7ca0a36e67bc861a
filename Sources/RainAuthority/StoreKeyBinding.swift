import FoundationEssentials
import RainCore
import RainCrypto
import RainStore

/// Ties the master key in a state directory's `authority.key` to the store its data lives in.
///
/// The store records a check value of the master key (`AuthorityKeys.storeKeyCheck`) with the key's
/// id, once. An instance with another key would hash tokens and codes differently and could not
/// decrypt wallets: every device reaching it would be logged out. So an instance starts only with
/// the key the store records, and never creates a key for a store that already holds data.
package enum StoreKeyBinding {
    /// The `details.reason` of a start whose `authority.key` is not the store's master key.
    package static let mismatchReason = "master_key_mismatch"
    /// The `details.reason` of a start without `authority.key` on a store that holds data.
    package static let missingReason = "master_key_missing"

    /// The keys of `authority.key` in `stateDirectory`, checked against `store`: created only
    /// when the store holds no data, then recorded by the store (see `check(_:store:)`).
    /// - Throws: RAIN_102 `master_key_missing` when there is no key file and the store holds data
    ///   (no key file is created); RAIN_102 `master_key_mismatch` when the key is not the store's;
    ///   what loading the key file or the store throws.
    package static func keys(stateDirectory: String, store: any AuthorityStore, logger: Logger)
        async throws(RainError) -> AuthorityKeys
    {
        let keys: AuthorityKeys
        if let existing = try await AuthorityKeys.loadExisting(stateDirectory: stateDirectory) {
            keys = existing
        } else {
            if try await store.holdsKeyedData() {
                let recorded = try await store.keyCheck()?.keyID
                throw RainError.invalid(
                    "there is no \(AuthorityKeys.masterKeyFileName) in \(stateDirectory), but the store already holds "
                        + "data protected by master key \(recorded ?? "(not recorded)"); a new key would log every "
                        + "device out and lose every wallet, so none is created. Copy the \(AuthorityKeys.masterKeyFileName) "
                        + "of the instances that share this store into \(stateDirectory) (mode 0600), or restore it "
                        + "from its backup",
                    field: AuthorityKeys.masterKeyFileName, reason: missingReason)
            }
            keys = try await AuthorityKeys.load(stateDirectory: stateDirectory)
        }
        try await check(keys, store: store, keyFile: stateDirectory, logger: logger)
        return keys
    }

    /// Records `keys`' check in `store` when it has none, else compares it with the store's.
    ///
    /// A store written by a build without the check holds data but no check value: it adopts
    /// the check of the key of its first start, since the instances on it already run with that key.
    /// - Parameter keyFile: where the key came from, named in the refusal.
    /// - Throws: RAIN_102 `master_key_mismatch` naming both key ids; RAIN_502 when the store fails.
    package static func check(_ keys: AuthorityKeys, store: any AuthorityStore, keyFile: String, logger: Logger)
        async throws(RainError)
    {
        try await check(
            keys, store: store, holder: "this instance's \(AuthorityKeys.masterKeyFileName) (in \(keyFile))",
            fix: "Copy the \(AuthorityKeys.masterKeyFileName) of the instances that share this store into \(keyFile) "
                + "(mode 0600), or restore it from its backup", logger: logger)
    }

    /// `check(_:store:keyFile:logger:)` for a master key held elsewhere (a device daemon's key
    /// provider), whose refusal names `holder` and says `fix`.
    package static func check(
        _ keys: AuthorityKeys, store: any AuthorityStore, holder: String, fix: String, logger: Logger
    ) async throws(RainError) {
        let proposed = StoreKeyCheck(keyID: keys.masterKeyID, value: keys.storeKeyCheck)
        switch try await store.recordKeyCheck(proposed, at: Date()) {
        case .recorded:
            logger.info("store.key_recorded", ["keyId": keys.masterKeyID])
        case .adopted:
            logger.warning(
                "store.key_adopted",
                ["keyId": keys.masterKeyID, "hint": "the store held data without a key check: it now records this key"])
        case .existing(let stored):
            guard !constantTimeEquals(stored.value, proposed.value) else { return }
            throw RainError.invalid(
                "the store's data is protected by master key \(stored.keyID), but \(holder) is master key "
                    + "\(keys.masterKeyID); it would log every device out and open no wallet. \(fix)",
                field: AuthorityKeys.masterKeyFileName, reason: mismatchReason)
        }
    }
}
