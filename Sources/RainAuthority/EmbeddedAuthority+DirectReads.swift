import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainStore
import RainWire

extension EmbeddedAuthority {
    /// Account/Get and Wallet/Get on the store's direct reader, when the store has one (SQLite).
    public var directReads: (any DirectAuthorityReads)? {
        store.directReader.map { reader in
            EmbeddedDirectReads(reader: reader, keys: keys, clock: clock) { [self] access in
                // The reader's connection is read-only: the first use of a pair is marked through
                // the write path, off the reader's thread, without holding the answer back.
                Task { await self.markUsed(access) }
            }
        }
    }
}

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

/// `EmbeddedAuthority.getAccountInfo` and `getWallet` on a `DirectStoreReader`: the same lookups and the
/// same checks (a live, unrevoked session; an account with its wallet), with the answer delivered on
/// the reader's thread. A wallet whose keys still need completing (a write) is reported as a
/// failure, which sends the caller to the async API.
struct EmbeddedDirectReads: DirectAuthorityReads {
    let reader: any DirectStoreReader
    let keys: AuthorityKeys
    let clock: any RainClock
    /// Called with a live session whose current pair is not marked used yet; must not block.
    let markUsed: @Sendable (AccountAccess) -> Void

    func accountInfo(
        appID: String, accessToken: String, proof: DeviceProof,
        completion: @escaping @Sendable (Result<AccountInfo, RainError>) -> Void
    ) {
        live(accessToken, proof, completion) { hash, found in
            reader.accountAccessWithPasskeys(appID: appID, accessHash: hash) { found($0.map { $0.map { ($0.access, $0) } }) }
        } answer: { (found) throws(RainError) in
            try EmbeddedAuthority.accountInfo(found.access, passkeys: found.passkeys)
        }
    }

    func wallet(
        appID: String, accessToken: String, proof: DeviceProof,
        completion: @escaping @Sendable (Result<WalletInfo, RainError>) -> Void
    ) {
        live(accessToken, proof, completion) { hash, found in
            reader.accountAccessWithWallet(appID: appID, accessHash: hash) { found($0.map { $0.map { ($0.access, $0) } }) }
        } answer: { (found) throws(RainError) in
            guard let stored = found.wallet else { throw EmbeddedAuthority.noWallet() }
            guard stored.hasAllKeys else {
                throw RainError(.unavailable, "the wallet's keys are being completed", details: .init(reason: "keys_incomplete"))
            }
            return try EmbeddedAuthority.walletInfo(stored)
        }
    }

    /// Looks the token's session up with `lookup` (which hands over the session with the rest of
    /// its row), refuses it unless it is live (RAIN_201 like the async API) and bound to a key in
    /// `proof`, and completes with what `answer` makes of the row. A session bound to another key
    /// fails here without the revocation, which is a write: the caller's retry through the async
    /// API revokes it.
    private func live<Row: Sendable, Info: Sendable>(
        _ accessToken: String, _ proof: DeviceProof, _ completion: @escaping @Sendable (Result<Info, RainError>) -> Void,
        lookup: ([UInt8], @escaping @Sendable (Result<(AccountAccess, Row)?, RainError>) -> Void) -> Void,
        answer: @escaping @Sendable (Row) throws(RainError) -> Info
    ) {
        let now = clock.now
        guard !proof.isEmpty else {
            completion(.failure(DeviceBinding.proofRequired()))
            return
        }
        lookup(keys.tokenHash(accessToken)) { result in
            completion(
                Result { () throws(RainError) -> Info in
                    guard let (access, row) = try result.get() else {
                        throw EmbeddedAuthority.sessionError(EmbeddedAuthority.RefreshRefusal.invalidToken)
                    }
                    try EmbeddedAuthority.requireLive(access, now: now)
                    switch EmbeddedAuthority.binding(of: access.session, proof: proof) {
                    case .bound: break
                    case .unbound: throw EmbeddedAuthority.sessionError(EmbeddedAuthority.RefreshRefusal.deviceUnbound)
                    case .unproven: throw DeviceBinding.proofRequired()
                    case .otherKey:
                        throw RainError(.sessionExpired, "another device key", details: .init(reason: "device_key_mismatch"))
                    }
                    if !access.session.isPairUsed { markUsed(access) }
                    return try answer(row)
                })
        }
    }
}
