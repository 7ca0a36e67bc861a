import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

// Wallets: reading one, and the backfill of the keys of wallets created without them.
extension ConnectionStore {
    /// The wallet of `accountID`, with its key material, or nil when the account has none.
    package func wallet(accountID: String) async throws(RainError) -> WalletRecord? {
        try await perform { db throws(RainError) in try StoreOperations.wallet(db, accountID: accountID) }
    }

    /// Every wallet that lacks its entropy or an address, oldest first.
    package func walletsMissingKeys() async throws(RainError) -> [WalletRecord] {
        try await perform { db throws(RainError) in
            let op = "find wallets without keys"
            var out: [WalletRecord] = []
            for row in try db.query(
                """
                SELECT \(StoreRecords.walletColumns) FROM wallets
                WHERE entropy_ciphertext IS NULL OR entropy_key_id IS NULL OR ethereum_address IS NULL
                   OR solana_address IS NULL
                ORDER BY created_at, \(Connection.insertionOrder)
                """, values: [], operation: op)
            {
                out.append(try StoreRecords.wallet(row, op))
            }
            return out
        }
    }

    /// Stores a wallet's keys in one statement, only if its entropy ciphertext is still
    /// `expectedCiphertext` (nil: still none), so two backfills never replace each other's entropy.
    @discardableResult
    package func storeWalletKeys(walletID: String, keys: WalletKeyMaterial, expectedCiphertext: [UInt8]?)
        async throws(RainError) -> Bool
    {
        try await perform { db throws(RainError) in
            let changed = try db.execute(
                """
                UPDATE wallets
                SET entropy_ciphertext = $1, entropy_key_id = $2, ethereum_address = $3, solana_address = $4
                WHERE id = $5 AND \(Connection.sameBytes("entropy_ciphertext", "$6"))
                """,
                values: [
                    .bytes(keys.entropyCiphertext), .text(keys.entropyKeyID),
                    keys.ethereumAddress.map { .text($0) } ?? .null, keys.solanaAddress.map { .text($0) } ?? .null,
                    .text(walletID), expectedCiphertext.map { .bytes($0) } ?? .null,
                ], operation: "store a wallet's keys")
            return changed == 1
        }
    }
}
