import RainAuthorityAPI
import RainStore

extension EmbeddedAuthority {
    /// The store's count of committed writes, when this process is its only writer: every change
    /// the authority makes (a session revoked, a contact added, a wallet completed) is a write
    /// there, counted before it is reported done. Nil on a store others write too.
    public var readFreshness: (any ReadFreshness)? {
        store.soleWriterChanges.map(StoreWriteStamp.init)
    }
}

/// `ReadFreshness` of a store this process alone writes: its count of committed writes.
struct StoreWriteStamp: ReadFreshness {
    let changes: StoreChangeCount

    func stamp() -> UInt64? { changes.value }
}
