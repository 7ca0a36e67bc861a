import FoundationEssentials
import RainCore

/// The first outcome of a call with an idempotency key (a login code confirm, a passkey
/// finish, a contact verification), shared by both stores (see `StoreOperations`). One row per key
/// in `idempotent_logins` (named for its first use, kept so instances of the previous version
/// sharing a PostgreSQL database keep working during an upgrade), its `kind` naming the call.
extension StoreOperations {
    /// The outcome recorded with this key, while its challenge's or ceremony's lifetime lasts.
    static func idempotentOutcome(_ db: some StoreConnection, keyHash: [UInt8], now: Date) throws(RainError)
        -> IdempotentOutcome?
    {
        let op = "read a call's outcome"
        let rows = try db.query(
            """
            SELECT kind, challenge_id, account_id, wallet_id, account_created, sealed_tokens, request_hash
            FROM idempotent_logins WHERE key_hash = $1 AND expires_at > $2
            """,
            values: [.bytes(keyHash), .integer(now.unixMilliseconds)], operation: op)
        guard let row = rows.first else { return nil }
        guard let kind = IdempotentCallKind(rawValue: try row.text(0, op)) else {
            throw RainError(.internalError, "authority store: an idempotent outcome has an unknown kind")
        }
        return IdempotentOutcome(
            kind: kind, challengeID: try row.text(1, op), requestHash: try row.bytes(6, op),
            accountID: try row.text(2, op), walletID: try row.text(3, op), accountCreated: try row.flag(4, op),
            sealedTokens: try row.bytes(5, op))
    }

    /// Takes the lock of `contact`'s calls (a code confirm, a contact verification), then returns
    /// the outcome recorded with `idempotency`'s key, if any: a repeat that raced its first call
    /// (here or on another instance) waited for that lock, so the first one's outcome is committed now.
    static func lockContact(
        _ db: some StoreConnection, appID: String, contact: RainWalletContact, idempotency: IdempotentOutcomeInput?,
        now: Date
    ) throws(RainError) -> IdempotentOutcome? {
        try db.lock("contact", appID, contactKey(contact))
        guard let key = idempotency else { return nil }
        return try idempotentOutcome(db, keyHash: key.keyHash, now: now)
    }

    /// Records a call's outcome for its repeats; in the transaction that applies its effect. Fills
    /// in the claim a passkey finish took with its ceremony (`claimIdempotencyKey`).
    static func recordIdempotentOutcome(
        _ db: some StoreConnection, _ input: IdempotentOutcomeInput, accountID: String, walletID: String,
        accountCreated: Bool
    ) throws(RainError) {
        try db.execute(
            """
            INSERT INTO idempotent_logins (key_hash, kind, challenge_id, account_id, wallet_id, account_created,
                                           sealed_tokens, expires_at, request_hash)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            ON CONFLICT (key_hash) DO UPDATE SET account_id = excluded.account_id, wallet_id = excluded.wallet_id,
                account_created = excluded.account_created, sealed_tokens = excluded.sealed_tokens
            """,
            values: [
                .bytes(input.keyHash), .text(input.kind.rawValue), .text(input.challengeID), .text(accountID),
                .text(walletID), .boolean(accountCreated), .bytes(input.sealedTokens),
                .integer(input.expiresAt.unixMilliseconds), .bytes(input.requestHash),
            ], operation: "record the call's outcome for its repeats")
    }

    /// A passkey finish's claim on its key, taken with its ceremony (no outcome yet): a repeat that
    /// arrives while the finish still runs is told so instead of "the ceremony is used".
    static func claimIdempotencyKey(
        _ db: some StoreConnection, _ claim: IdempotentClaim, ceremonyID: String, expiresAt: Date
    ) throws(RainError) {
        try db.execute(
            """
            INSERT INTO idempotent_logins (key_hash, kind, challenge_id, account_id, wallet_id, account_created,
                                           sealed_tokens, expires_at, request_hash)
            VALUES ($1, $2, $3, '', '', $4, $5, $6, $7)
            """,
            values: [
                .bytes(claim.keyHash), .text(claim.kind.rawValue), .text(ceremonyID), .boolean(false), .bytes([]),
                .integer(expiresAt.unixMilliseconds), .bytes(claim.requestHash),
            ], operation: "claim the idempotency key")
    }

}
