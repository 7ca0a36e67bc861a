import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

// Sessions: revoking, refreshing, moving a device to a new key, and the reads by access token.
extension ConnectionStore {
    /// Revokes the unrevoked session holding this refresh-token hash as its current or previous one.
    @discardableResult
    package func revokeSession(appID: String, refreshHash: [UInt8], reason: String, now: Date) async throws(RainError)
        -> Bool
    {
        try await perform { db throws(RainError) in
            let changed = try db.execute(
                """
                UPDATE sessions SET revoked_at = $1, revoke_reason = $2
                WHERE app_id = $3 AND (refresh_hash = $4 OR previous_refresh_hash = $4) AND revoked_at IS NULL
                """,
                values: [.integer(now.unixMilliseconds), .text(reason), .text(appID), .bytes(refreshHash)],
                operation: "revoke a session")
            return changed > 0
        }
    }

    /// Revokes the live session with this id.
    @discardableResult
    package func revokeSession(id: String, reason: String, now: Date) async throws(RainError) -> Bool {
        try await perform { db throws(RainError) in
            try db.execute(
                "UPDATE sessions SET revoked_at = $1, revoke_reason = $2 WHERE id = $3 AND revoked_at IS NULL",
                values: [.integer(now.unixMilliseconds), .text(reason), .text(id)], operation: "revoke a session") > 0
        }
    }

    /// Gives every live session of `deviceID` bound to one of `currentKeys` (and not already to
    /// `newKey`) `newKey` as its pending key.
    @discardableResult
    package func rebindDevice(deviceID: String, currentKeys: [[UInt8]], newKey: [UInt8]) async throws(RainError)
        -> Int
    {
        try await perform { db throws(RainError) in
            try db.transaction("move a device to a new key") { () throws(RainError) -> Int in
                var changed = 0
                for key in currentKeys where key != newKey {
                    changed += try db.execute(
                        """
                        UPDATE sessions SET pending_device_public_key = $1
                        WHERE device_id = $2 AND device_public_key = $3 AND revoked_at IS NULL
                        """,
                        values: [.bytes(newKey), .text(deviceID), .bytes(key)], operation: "move a device's sessions to a new key"
                    )
                }
                return changed
            }
        }
    }

    /// Binds every live session of `deviceID` whose pending key is `key` to `key` alone.
    @discardableResult
    package func confirmDeviceKey(deviceID: String, key: [UInt8]) async throws(RainError) -> Int {
        try await perform { db throws(RainError) in
            try db.transaction("confirm a device's new key") { () throws(RainError) -> Int in
                try db.execute(
                    """
                    UPDATE sessions SET device_public_key = $1, pending_device_public_key = NULL
                    WHERE device_id = $2 AND pending_device_public_key = $1 AND revoked_at IS NULL
                    """,
                    values: [.bytes(key), .text(deviceID)], operation: "confirm a device's new key")
            }
        }
    }

    /// Runs one refresh (see `AuthorityStore.refreshSession`), in one transaction, which
    /// holds the session row's lock (PostgreSQL) from the lookup to the commit.
    package func refreshSession<Verdict: Sendable>(
        appID: String, refreshHash: [UInt8], now: Date,
        decide: @escaping @Sendable (RefreshCandidate?) -> (change: SessionRefreshChange, verdict: Verdict)
    ) async throws(RainError) -> Verdict {
        try await perform { db throws(RainError) in
            try db.transaction("refresh a session") { () throws(RainError) -> Verdict in
                let candidate = try StoreOperations.refreshCandidate(db, appID: appID, refreshHash: refreshHash)
                let (change, verdict) = decide(candidate)
                switch change {
                case .none:
                    break
                case .rotate(let rotation):
                    guard let candidate, candidate.generation == .current, candidate.session.revokedAt == nil else {
                        throw RainError(.internalError, "authority store: only a live current token can be rotated")
                    }
                    try StoreOperations.rotate(db, session: candidate.session, rotation: rotation)
                case .revoke(let reason):
                    guard let candidate else { break }
                    try db.execute(
                        "UPDATE sessions SET revoked_at = $1, revoke_reason = $2 WHERE id = $3 AND revoked_at IS NULL",
                        values: [.integer(now.unixMilliseconds), .text(reason), .text(candidate.session.id)],
                        operation: "revoke a session family")
                }
                return verdict
            }
        }
    }

    /// Marks the session's current pair used, only while it still holds `accessHash` and is not
    /// marked yet (see `AuthorityStore.markPairUsed`).
    @discardableResult
    package func markPairUsed(sessionID: String, accessHash: [UInt8]) async throws(RainError) -> Bool {
        try await perform { db throws(RainError) in
            try db.execute(
                "UPDATE sessions SET pair_used = $1 WHERE id = $2 AND access_hash = $3 AND pair_used = $4",
                values: [.boolean(true), .text(sessionID), .bytes(accessHash), .boolean(false)],
                operation: "mark a session's tokens used") > 0
        }
    }

    /// The session holding this access-token hash, with its account, wallet and contacts.
    package func accountAccess(appID: String, accessHash: [UInt8]) async throws(RainError) -> AccountAccess? {
        try await perform { db throws(RainError) in
            try StoreOperations.accountAccess(db, appID: appID, accessHash: accessHash)
        }
    }

    /// The account's sessions, oldest first.
    package func sessions(appID: String, accountID: String) async throws(RainError) -> [SessionRecord] {
        try await perform { db throws(RainError) in
            let op = "list the account's sessions"
            let rows = try db.query(
                """
                SELECT \(StoreRecords.sessionColumns("s")) FROM sessions s
                WHERE s.app_id = $1 AND s.account_id = $2 ORDER BY s.created_at, s.\(Connection.insertionOrder)
                """,
                values: [.text(appID), .text(accountID)], operation: op)
            var out: [SessionRecord] = []
            for row in rows { out.append(try StoreRecords.session(row, op)) }
            return out
        }
    }
}
