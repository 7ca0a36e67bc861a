import FoundationEssentials
import RainAuthorityAPI
import RainCore

// Wallets: created with their account, read, and their keys stored by the backfill.
extension StoreOperations {
    /// Creates an account's wallet row; `keys` nil leaves the key columns NULL (the keys are
    /// stored later, `storeWalletKeys`).
    static func insertWallet(
        _ db: some StoreConnection, id: String, accountID: String, keys: WalletKeyMaterial?, now: Int64
    ) throws(RainError) {
        try db.execute(
            """
            INSERT INTO wallets (id, account_id, created_at, entropy_ciphertext, entropy_key_id,
                                 ethereum_address, solana_address)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            """,
            values: [
                .text(id), .text(accountID), .integer(now),
                keys.map { .bytes($0.entropyCiphertext) } ?? .null,
                keys.map { .text($0.entropyKeyID) } ?? .null,
                keys.flatMap { $0.ethereumAddress }.map { .text($0) } ?? .null,
                keys.flatMap { $0.solanaAddress }.map { .text($0) } ?? .null,
            ], operation: "create the wallet")
    }

    /// The wallet of `accountID`, with its key material, or nil when the account has none.
    static func wallet(_ db: some StoreConnection, accountID: String) throws(RainError) -> WalletRecord? {
        let op = "read the account's wallet"
        let rows = try db.query(
            "SELECT \(StoreRecords.walletColumns) FROM wallets WHERE account_id = $1", values: [.text(accountID)],
            operation: op)
        guard let row = rows.first else { return nil }
        return try StoreRecords.wallet(row, op)
    }

}
