import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWebAuthn
import RainWire

/// Backup contacts and passkeys, shared by both stores (see `StoreOperations`).
extension StoreOperations {
    // MARK: - Backup contacts

    /// The verification's outcome, for its repeats.
    static func recordContactVerification(_ db: some StoreConnection, _ v: ContactVerificationCompletion)
        throws(RainError)
    {
        guard let key = v.idempotency else { return }
        try recordIdempotentOutcome(
            db, key, accountID: v.accountID, walletID: "", accountCreated: false)
    }

    // MARK: - Passkey ceremonies

    // MARK: - Passkey credentials

    /// The account's credentials, oldest first.
    static func passkeyCredentials<DB: StoreConnection>(_ db: DB, accountID: String) throws(RainError)
        -> [PasskeyCredentialRecord]
    {
        let op = "list the account's passkeys"
        let rows = try db.query(
            """
            SELECT \(StoreRecords.credentialColumns) FROM passkey_credentials WHERE account_id = $1
            ORDER BY created_at, \(DB.insertionOrder)
            """,
            values: [.text(accountID)], operation: op)
        var out: [PasskeyCredentialRecord] = []
        for row in rows { out.append(try StoreRecords.credential(row, op)) }
        return out
    }

    /// RAIN_102 `credential_already_registered` when any account holds this credential id (in
    /// PostgreSQL a concurrent insert of the same id is a unique violation: the transaction runs
    /// again and lands here).
    static func requireNewCredential(_ db: some StoreConnection, _ id: [UInt8]) throws(RainError) {
        let rows = try db.query(
            "SELECT 1 FROM passkey_credentials WHERE credential_id = $1", values: [.bytes(id)],
            operation: "check the credential id is new")
        guard rows.isEmpty else {
            throw RainError.webAuthn(
                .credentialAlreadyRegistered, "this passkey is already registered to an account", field: "rawId")
        }
    }

    /// Stores a credential (its flags as the store's yes/no columns).
    static func insertCredential(_ db: some StoreConnection, _ c: PasskeyCredentialRecord) throws(RainError) {
        try db.execute(
            """
            INSERT INTO passkey_credentials (credential_id, account_id, app_id, rp_id, public_key, algorithm,
                                             sign_count, backup_eligible, backed_up, user_handle, created_at,
                                             last_used_at, kind)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
            """,
            values: [
                .bytes(c.credentialID), .text(c.accountID), .text(c.appID), .text(c.rpID), .bytes(c.publicKey),
                .integer(Int64(c.algorithm)), .integer(Int64(c.signCount)), .boolean(c.isBackupEligible),
                .boolean(c.isBackedUp), .bytes(c.userHandle), .integer(c.createdAt.unixMilliseconds),
                c.lastUsedAt.map { .integer($0.unixMilliseconds) } ?? .null, .text(c.kind),
            ], operation: "store the passkey")
    }

    /// Removes the account's credential `id`, unless it is the account's last way to log in
    /// (no other passkey, of any domain, and no contact).
    static func removeCredential(_ db: some StoreConnection, id: [UInt8], accountID: String) throws(RainError)
        -> PasskeyRemoval
    {
        let op = "remove the passkey"
        let found = try db.query(
            "SELECT 1 FROM passkey_credentials WHERE credential_id = $1 AND account_id = $2",
            values: [.bytes(id), .text(accountID)], operation: op)
        guard !found.isEmpty else { return .unknown }
        let others = try db.query(
            """
            SELECT (SELECT COUNT(*) FROM passkey_credentials WHERE account_id = $1 AND credential_id <> $2)
                 + (SELECT COUNT(*) FROM contacts WHERE account_id = $1)
            """,
            values: [.text(accountID), .bytes(id)], operation: op)
        guard let count = others.first, try count.integer(0, op) > 0 else { return .lastLoginMethod }
        try db.execute(
            "DELETE FROM passkey_credentials WHERE credential_id = $1 AND account_id = $2",
            values: [.bytes(id), .text(accountID)], operation: op)
        return .removed
    }
}
