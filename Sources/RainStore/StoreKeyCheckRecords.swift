import FoundationEssentials
import RainCore

/// The store's record of the master key its data is protected by: a check value derived from the
/// key (never the key itself) and the key's id, written once and compared on every start, so an
/// instance with another key refuses to start instead of logging every device out.
package struct StoreKeyCheck: Sendable, Equatable {
    /// The master key's id (`SymmetricKey.keyID`: 16 hex characters, safe to show).
    package var keyID: String
    /// HMAC-SHA256 of a fixed label under the master key (`AuthorityKeys.storeKeyCheck`).
    package var value: [UInt8]

    /// Creates a check.
    package init(keyID: String, value: [UInt8]) {
        self.keyID = keyID
        self.value = value
    }
}

/// What `AuthorityStore.recordKeyCheck` found.
package enum StoreKeyCheckOutcome: Sendable, Equatable {
    /// The store had no check and no account: the proposed check is its check now.
    case recorded
    /// The store had no check but holds accounts (a store from a build without the check): the
    /// proposed check is its check now.
    case adopted
    /// The store already holds a check (the proposed one or another); nothing changed.
    case existing(StoreKeyCheck)
}
