import FoundationEssentials
import RainAuthorityAPI
import RainCore

// Sessions after login: revocation, device key moves, refresh and rotation, access-token reads.
extension StoreOperations {
    /// The session holding `refreshHash` as its current, previous or an older refresh hash, its row
    /// locked (PostgreSQL) until the transaction ends. A refresh that waited for another one's lock
    /// re-reads the row as committed: a token rotated meanwhile no longer matches as current, and
    /// the next lookup finds it as the previous one.
    static func refreshCandidate<DB: StoreConnection>(_ db: DB, appID: String, refreshHash: [UInt8])
        throws(RainError) -> RefreshCandidate?
    {
        let op = "look up a session by refresh token"
        let columns = StoreRecords.sessionColumns("s")
        let lookups: [(RefreshTokenGeneration, String)] = [
            (
                .current,
                "SELECT \(columns) FROM sessions s WHERE s.app_id = $1 AND s.refresh_hash = $2 \(DB.lockRows(of: nil))"
            ),
            (
                .previous,
                """
                SELECT \(columns) FROM sessions s WHERE s.app_id = $1 AND s.previous_refresh_hash = $2
                \(DB.lockRows(of: nil))
                """
            ),
            (
                .older,
                """
                SELECT \(columns) FROM retired_refresh_tokens r JOIN sessions s ON s.id = r.session_id
                WHERE s.app_id = $1 AND r.refresh_hash = $2 \(DB.lockRows(of: "s"))
                """
            ),
        ]
        for (generation, sql) in lookups {
            if let row = try db.query(sql, values: [.text(appID), .bytes(refreshHash)], operation: op).first {
                return RefreshCandidate(session: try StoreRecords.session(row, op), generation: generation)
            }
        }
        return nil
    }

    /// Stores a rotation: previous → retired, current → previous, new hashes current.
    static func rotate(_ db: some StoreConnection, session: SessionRecord, rotation: SessionRotation)
        throws(RainError)
    {
        if let previous = session.previousRefreshHash {
            try db.execute(
                """
                INSERT INTO retired_refresh_tokens (refresh_hash, session_id, generation, retired_at)
                VALUES ($1, $2, $3, $4)
                """,
                values: [
                    .bytes(previous), .text(session.id), .integer(Int64(session.refreshGeneration - 1)),
                    .integer((session.rotatedAt ?? session.createdAt).unixMilliseconds),
                ], operation: "keep the rotated-out refresh hash")
        }
        let changed = try db.execute(
            """
            UPDATE sessions
            SET previous_refresh_hash = refresh_hash, refresh_hash = $1, access_hash = $2, access_expires_at = $3,
                rotated_at = $4, refresh_generation = refresh_generation + 1, pair_used = $7
            WHERE id = $5 AND refresh_hash = $6 AND revoked_at IS NULL
            """,
            values: [
                .bytes(rotation.refreshHash), .bytes(rotation.accessHash),
                .integer(rotation.accessExpiresAt.unixMilliseconds), .integer(rotation.rotatedAt.unixMilliseconds),
                .text(session.id), .bytes(session.refreshHash), .boolean(false),
            ], operation: "rotate a session's tokens")
        guard changed == 1 else {
            throw RainError(.internalError, "authority store: cannot rotate a session's tokens: the session changed")
        }
    }

    /// The session holding this access-token hash, with its account, wallet and contacts.
    static func accountAccess<DB: StoreConnection>(_ db: DB, appID: String, accessHash: [UInt8]) throws(RainError)
        -> AccountAccess?
    {
        let op = "look up a session by access token"
        let rows = try db.query(
            """
            SELECT \(StoreRecords.sessionColumns("s")), a.created_at, COALESCE(w.id, '')
            FROM sessions s JOIN accounts a ON a.id = s.account_id LEFT JOIN wallets w ON w.account_id = a.id
            WHERE s.app_id = $1 AND s.access_hash = $2
            """,
            values: [.text(appID), .bytes(accessHash)], operation: op)
        guard let row = rows.first else { return nil }
        let session = try StoreRecords.session(row, op)
        let account = AccountRecord(
            id: session.accountID, appID: session.appID,
            walletID: try row.text(StoreRecords.sessionColumnCount + 1, op),
            createdAt: Date(unixMilliseconds: try row.integer(StoreRecords.sessionColumnCount, op)))
        let contactsOp = "list the account's contacts"
        var contacts: [RainWalletContact] = []
        for contactRow in try db.query(
            """
            SELECT kind, value FROM contacts WHERE app_id = $1 AND account_id = $2
            ORDER BY kind, verified_at\(DB.nullsFirst), \(DB.insertionOrder)
            """,
            values: [.text(session.appID), .text(session.accountID)], operation: contactsOp)
        {
            let kind = try contactRow.text(0, contactsOp)
            let value = try contactRow.text(1, contactsOp)
            contacts.append(try contact(kind: kind, value: value, contactsOp))
        }
        return AccountAccess(session: session, account: account, contacts: contacts)
    }

    /// The reads of Account/Get: the session by access hash and the account's passkeys.
    static func accountAccessWithPasskeys(_ db: some StoreConnection, appID: String, accessHash: [UInt8])
        throws(RainError) -> (access: AccountAccess, passkeys: [PasskeyCredentialRecord])?
    {
        guard let access = try accountAccess(db, appID: appID, accessHash: accessHash) else { return nil }
        return (access, try passkeyCredentials(db, accountID: access.account.id))
    }

    /// The reads of Wallet/Get: the session by access hash and the account's wallet.
    static func accountAccessWithWallet(_ db: some StoreConnection, appID: String, accessHash: [UInt8])
        throws(RainError) -> (access: AccountAccess, wallet: WalletRecord?)?
    {
        guard let access = try accountAccess(db, appID: appID, accessHash: accessHash) else { return nil }
        return (access, try wallet(db, accountID: access.account.id))
    }

}
