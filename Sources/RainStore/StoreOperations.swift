import FoundationEssentials
import RainAuthorityAPI
import RainCore

/// The pieces several use cases share (`ConnectionStore`), written once over `StoreConnection`:
/// each runs in its caller's transaction, if any. Where SQLite and PostgreSQL differ (row order,
/// row and advisory locks, retiring a device's challenges) the connection says how.
enum StoreOperations {
    // MARK: - Lookups

    /// The account key of a contact that has no account yet.
    static func contactKey(_ contact: RainWalletContact) -> String { "contact:\(contact.kindName):\(contact.value)" }

    /// A contact from its stored kind and value; RAIN_502 naming `op` for an unknown kind.
    static func contact(kind: String, value: String, _ op: String) throws(RainError) -> RainWalletContact {
        switch kind {
        case "email": return .email(value)
        case "phone": return .phone(value)
        default: throw RainError(.internalError, "authority store: cannot \(op): unknown contact kind")
        }
    }

    /// The id of the account that owns `contact` in `appID`, or nil.
    static func accountID(_ db: some StoreConnection, appID: String, contact: RainWalletContact) throws(RainError)
        -> String?
    {
        let op = "look up the contact's account"
        let rows = try db.query(
            "SELECT account_id FROM contacts WHERE app_id = $1 AND kind = $2 AND value = $3",
            values: [.text(appID), .text(contact.kindName), .text(contact.value)], operation: op)
        return try rows.first?.text(0, op)
    }

    /// What `useChallenge` found.
    enum ChallengeUse {
        /// The challenge is now used.
        case used
        /// It could not be used: the challenge as it is now, nil when there is none.
        case unavailable(ChallengeRecord?)
    }

    /// Marks challenge `id` used if it is pending, unexpired, of this app, device and `purpose`,
    /// and (a contact verification's) bound to `targetAccountID`.
    static func useChallenge(
        _ db: some StoreConnection, id: String, appID: String, deviceID: String, purpose: ChallengePurpose,
        targetAccountID: String? = nil, now: Date
    ) throws(RainError) -> ChallengeUse {
        var values: [StoreValue] = [
            .text(id), .text(appID), .text(deviceID), .text(purpose.rawValue), .integer(now.unixMilliseconds),
        ]
        var target = ""
        if let targetAccountID {
            target = " AND target_account_id = $6"
            values.append(.text(targetAccountID))
        }
        let used = try db.execute(
            """
            UPDATE challenges SET state = 'used'
            WHERE id = $1 AND app_id = $2 AND device_id = $3 AND purpose = $4 AND state = 'pending'
              AND expires_at > $5\(target)
            """,
            values: values, operation: "mark the challenge used")
        return used == 1 ? .used : .unavailable(try challenge(db, id: id))
    }

    /// The first steps of a transaction that confirms a code sent to `contact` (a login, a contact
    /// verification): lock the contact, so that its confirms run one at a time (two first logins
    /// would otherwise lock each other's challenge rows and contact key: a deadlock, not just a
    /// retry); answer a repeated idempotency key with the first outcome; then use the challenge.
    /// - Returns: the outcome to return at once (`repeated`, `challengeUnavailable`), or nil when
    ///   the challenge is used and the transaction goes on.
    static func confirmCode<Outcome: CodeConfirmationOutcome>(
        _ db: some StoreConnection, challengeID: String, appID: String, deviceID: String, contact: RainWalletContact,
        purpose: ChallengePurpose, targetAccountID: String? = nil, idempotency: IdempotentOutcomeInput?, now: Date
    ) throws(RainError) -> Outcome? {
        if let first = try lockContact(db, appID: appID, contact: contact, idempotency: idempotency, now: now) {
            return .repeated(first)
        }
        if case .unavailable(let current) = try useChallenge(
            db, id: challengeID, appID: appID, deviceID: deviceID, purpose: purpose, targetAccountID: targetAccountID,
            now: now)
        {
            return .challengeUnavailable(current)
        }
        return nil
    }

    /// The challenge with this id, whatever its state.
    static func challenge(_ db: some StoreConnection, id: String) throws(RainError) -> ChallengeRecord? {
        let op = "read a challenge"
        let rows = try db.query(
            """
            SELECT id, app_id, device_id, contact_kind, contact_value, account_key, code_hash, created_at, expires_at,
                   wrong_attempts, state, purpose, target_account_id
            FROM challenges WHERE id = $1
            """,
            values: [.text(id)], operation: op)
        guard let row = rows.first else { return nil }
        return try challengeRecord(row, op)
    }

    /// The retired challenges of `purpose` for one app on one device that have not expired at
    /// `now`, newest first, at most `limit`: the codes a Resend replaced, which a user may still
    /// type from the first message.
    static func retiredChallenges(
        _ db: some StoreConnection, appID: String, deviceID: String, purpose: ChallengePurpose, now: Date, limit: Int
    ) throws(RainError) -> [ChallengeRecord] {
        let op = "read retired challenges"
        let rows = try db.query(
            """
            SELECT id, app_id, device_id, contact_kind, contact_value, account_key, code_hash, created_at, expires_at,
                   wrong_attempts, state, purpose, target_account_id
            FROM challenges
            WHERE app_id = $1 AND device_id = $2 AND state = 'retired' AND purpose = $3 AND expires_at > $4
            ORDER BY created_at DESC LIMIT $5
            """,
            values: [
                .text(appID), .text(deviceID), .text(purpose.rawValue), .integer(now.unixMilliseconds), .integer(Int64(limit)),
            ], operation: op)
        var records: [ChallengeRecord] = []
        for row in rows { records.append(try challengeRecord(row, op)) }
        return records
    }

    private static func challengeRecord(_ row: some StoreRow, _ op: String) throws(RainError) -> ChallengeRecord {
        let contact = try contact(kind: try row.text(3, op), value: try row.text(4, op), op)
        guard let state = ChallengeState(rawValue: try row.text(10, op)) else {
            throw RainError(.internalError, "authority store: cannot \(op): unknown challenge state")
        }
        guard let purpose = ChallengePurpose(rawValue: try row.text(11, op)) else {
            throw RainError(.internalError, "authority store: cannot \(op): unknown challenge purpose")
        }
        return ChallengeRecord(
            id: try row.text(0, op), appID: try row.text(1, op), deviceID: try row.text(2, op), contact: contact,
            accountKey: try row.text(5, op), codeHash: try row.bytes(6, op),
            createdAt: Date(unixMilliseconds: try row.integer(7, op)),
            expiresAt: Date(unixMilliseconds: try row.integer(8, op)), wrongAttempts: Int(try row.integer(9, op)),
            state: state, purpose: purpose, targetAccountID: try row.optionalText(12, op))
    }

    // MARK: - Pruning

    /// Deletes old challenges, revoked sessions and old rotated-out refresh hashes; in the
    /// caller's transaction.
    static func prune(
        _ db: some StoreConnection, challengesExpiredBefore: Date, sessionsRevokedBefore: Date,
        refreshTokensRetiredBefore: Date
    ) throws(RainError) -> PruneResult {
        let challenges = try db.execute(
            "DELETE FROM challenges WHERE expires_at < $1", values: [.integer(challengesExpiredBefore.unixMilliseconds)],
            operation: "delete expired challenges")
        // A login's outcome is kept for its repeats as long as its challenge.
        try db.execute(
            "DELETE FROM idempotent_logins WHERE expires_at < $1",
            values: [.integer(challengesExpiredBefore.unixMilliseconds)], operation: "delete expired login outcomes")
        let ceremonies = try db.execute(
            "DELETE FROM passkey_ceremonies WHERE expires_at < $1",
            values: [.integer(challengesExpiredBefore.unixMilliseconds)], operation: "delete expired passkey ceremonies")
        // Counted before the sessions go: their retired hashes go with them (ON DELETE CASCADE).
        let retired = try db.execute(
            "DELETE FROM retired_refresh_tokens WHERE retired_at < $1",
            values: [.integer(refreshTokensRetiredBefore.unixMilliseconds)],
            operation: "delete old rotated-out refresh hashes")
        let sessions = try db.execute(
            "DELETE FROM sessions WHERE revoked_at IS NOT NULL AND revoked_at < $1",
            values: [.integer(sessionsRevokedBefore.unixMilliseconds)], operation: "delete revoked sessions")
        // Challenges are kept at least the longest limit window, the guess window included.
        let guesses = try db.execute(
            "DELETE FROM code_guesses WHERE guessed_at < $1", values: [.integer(challengesExpiredBefore.unixMilliseconds)],
            operation: "delete old wrong guesses")
        var result = PruneResult(
            challengesDeleted: challenges, sessionsDeleted: sessions, retiredRefreshTokensDeleted: retired,
            passkeyCeremoniesDeleted: ceremonies)
        result.codeGuessesDeleted = guesses
        return result
    }
}

/// An outcome of a transaction that confirms a code (`StoreOperations.confirmCode`).
protocol CodeConfirmationOutcome {
    /// A call with the same idempotency key completed first: its outcome.
    static func repeated(_ first: IdempotentOutcome) -> Self
    /// The challenge could not be used: as it is now, nil when there is none.
    static func challengeUnavailable(_ current: ChallengeRecord?) -> Self
}

extension LoginCompletionOutcome: CodeConfirmationOutcome {}

extension ContactVerificationOutcome: CodeConfirmationOutcome {}
