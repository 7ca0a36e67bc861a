import Foundation
import RainCore

extension EmbeddedAuthority {
    /// Account/Get and Wallet/Get on the store's direct reader, when the store has one (SQLite).
    public var directReads: (any DirectAuthorityReads)? {
        store.directReader.map { EmbeddedDirectReads(reader: $0, keys: keys, clock: clock) }
    }
}

/// `EmbeddedAuthority.accountInfo` and `wallet` on a `DirectStoreReader`: the same lookups and the
/// same checks (a live, unrevoked session; an account with its wallet), with the answer delivered on
/// the reader's thread. A wallet whose keys still need completing (a write) is reported as a
/// failure, which sends the caller to the async API.
struct EmbeddedDirectReads: DirectAuthorityReads {
    let reader: any DirectStoreReader
    let keys: AuthorityKeys
    let clock: any RainClock

    func accountInfo(appID: String, accessToken: String, completion: @escaping @Sendable (Result<AccountInfo, RainError>) -> Void) {
        let now = clock.now
        reader.accountAccessWithPasskeys(appID: appID, accessHash: keys.tokenHash(accessToken)) { result in
            completion(
                Result { () throws(RainError) -> AccountInfo in
                    guard let found = try result.get() else { throw EmbeddedAuthority.sessionError(EmbeddedAuthority.RefreshRefusal.invalidToken) }
                    try EmbeddedAuthority.requireLive(found.access, now: now)
                    return try EmbeddedAuthority.accountInfo(found.access, passkeys: found.passkeys)
                })
        }
    }

    func wallet(appID: String, accessToken: String, completion: @escaping @Sendable (Result<WalletInfo, RainError>) -> Void) {
        let now = clock.now
        reader.accountAccessWithWallet(appID: appID, accessHash: keys.tokenHash(accessToken)) { result in
            completion(
                Result { () throws(RainError) -> WalletInfo in
                    guard let found = try result.get() else { throw EmbeddedAuthority.sessionError(EmbeddedAuthority.RefreshRefusal.invalidToken) }
                    try EmbeddedAuthority.requireLive(found.access, now: now)
                    guard let stored = found.wallet else { throw EmbeddedAuthority.noWallet() }
                    guard stored.hasAllKeys else {
                        throw RainError(.unavailable, "the wallet's keys are being completed", details: .init(reason: "keys_incomplete"))
                    }
                    return try EmbeddedAuthority.walletInfo(stored)
                })
        }
    }
}
