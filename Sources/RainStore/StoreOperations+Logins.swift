import FoundationEssentials
import RainAuthorityAPI
import RainCore

// Completing a login: the challenge used, the account and wallet created or found, the session
// stored and the account's other sessions revoked.
extension StoreOperations {
    /// A login's last steps, in its transaction: stores its session (`storeLoginSession`), records
    /// its outcome for the repeats of its idempotency key (when it has one), and returns the login.
    static func storeLogin(
        _ db: some StoreConnection, appID: String, accountID: String, walletID: String, accountCreated: Bool,
        deviceID: String, session: NewSession, idempotency: IdempotentOutcomeInput?, now: Date
    ) throws(RainError) -> LoginRecord {
        let revoked = try storeLoginSession(
            db, appID: appID, accountID: accountID, deviceID: deviceID, session: session, now: now)
        if let key = idempotency {
            try recordIdempotentOutcome(db, key, accountID: accountID, walletID: walletID, accountCreated: accountCreated)
        }
        return LoginRecord(
            accountID: accountID, walletID: walletID, accountCreated: accountCreated, revokedElsewhereCount: revoked.count,
            revokedDeviceIDs: revoked.deviceIDs, isReplacedOnDevice: revoked.isReplaced)
    }

    /// A login's session: locks the account (so logins of one account run one at a time and
    /// exactly one device ends up live), revokes the account's sessions on other devices
    /// (`revoked_elsewhere`) and this device's older ones (`replaced`), then stores the new one.
    /// - Returns: how many sessions on other devices were revoked, those devices (each once, for
    ///   the pushed revocations), and whether an older session of this device was replaced.
    static func storeLoginSession(
        _ db: some StoreConnection, appID: String, accountID: String, deviceID: String, session: NewSession,
        now date: Date
    ) throws(RainError) -> (count: Int, deviceIDs: [String], isReplaced: Bool) {
        let now = date.unixMilliseconds
        try db.lockAccount(accountID)
        let op = "revoke the account's sessions on other devices"
        let revokedRows = try db.query(
            """
            UPDATE sessions SET revoked_at = $1, revoke_reason = $2
            WHERE app_id = $3 AND account_id = $4 AND device_id <> $5 AND revoked_at IS NULL
            RETURNING device_id
            """,
            values: [
                .integer(now), .text(SessionRevokeReason.revokedElsewhere), .text(appID), .text(accountID),
                .text(deviceID),
            ], operation: op)
        var revokedDevices: [String] = []
        for row in revokedRows {
            let revoked = try row.text(0, op)
            if !revokedDevices.contains(revoked) { revokedDevices.append(revoked) }
        }
        let replaced = try db.execute(
            """
            UPDATE sessions SET revoked_at = $1, revoke_reason = $2
            WHERE app_id = $3 AND account_id = $4 AND device_id = $5 AND revoked_at IS NULL
            """,
            values: [.integer(now), .text(SessionRevokeReason.replaced), .text(appID), .text(accountID), .text(deviceID)],
            operation: "replace the device's older sessions")
        try db.execute(
            """
            INSERT INTO sessions (id, app_id, account_id, device_id, access_hash, refresh_hash,
                                  access_expires_at, created_at, device_public_key)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            """,
            values: [
                .text(session.id), .text(appID), .text(accountID), .text(deviceID), .bytes(session.accessHash),
                .bytes(session.refreshHash), .integer(session.accessExpiresAt.unixMilliseconds), .integer(now),
                session.devicePublicKey.map { .bytes($0) } ?? .null,
            ], operation: "store the session")
        return (revokedRows.count, revokedDevices, replaced > 0)
    }
}
