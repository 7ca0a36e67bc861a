import FoundationEssentials
import RainAuthorityAPI
import RainCore

// Login challenges: the send limits, reserving and activating a challenge, wrong attempts.
extension StoreOperations {
    /// Takes a send-limit slot for a challenge whose code is about to be handed to a provider (see
    /// `AuthorityStore.reserveChallenge`); in the caller's transaction. The row is stored `retired`:
    /// it counts against every send limit at once, and no code can be confirmed against it until
    /// `activateChallenge` makes it pending. Nothing pending is retired yet.
    static func reserveChallenge<DB: StoreConnection>(
        _ db: DB, _ challenge: NewChallenge, limits: CodeSendLimits
    ) throws(RainError) -> ChallengeInsertionOutcome {
        // Always in this order (source, contact across apps, device, contact, account key), so
        // two sends never deadlock; the first two make the limits across apps hold between
        // authority instances sharing one PostgreSQL database.
        if let source = challenge.source { try db.lock("source", source) }
        try db.lock("contact-all-apps", contactKey(challenge.contact))
        try db.lock("device", challenge.appID, challenge.deviceID)
        try db.lock("contact", challenge.appID, contactKey(challenge.contact))
        // A verification counts against the account it attaches the contact to.
        let accountKey: String
        if let target = challenge.targetAccountID {
            accountKey = target
        } else {
            accountKey =
                try accountID(db, appID: challenge.appID, contact: challenge.contact) ?? contactKey(challenge.contact)
        }
        try db.lock("account", challenge.appID, accountKey)
        if let refusal = try sendLimitRefusal(db, challenge, accountKey: accountKey, limits: limits) {
            return .limited(refusal.limit, retryAfter: refusal.retryAfter)
        }
        try db.execute(
            """
            INSERT INTO challenges (id, app_id, device_id, contact_kind, contact_value, account_key, code_hash,
                                    created_at, expires_at, wrong_attempts, state, purpose, target_account_id, source)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, 'retired', $10, $11, $12)
            """,
            values: [
                .text(challenge.id), .text(challenge.appID), .text(challenge.deviceID),
                .text(challenge.contact.kindName), .text(challenge.contact.value), .text(accountKey),
                .bytes(challenge.codeHash), .integer(challenge.createdAt.unixMilliseconds),
                .integer(challenge.expiresAt.unixMilliseconds), .text(challenge.purpose.rawValue),
                challenge.targetAccountID.map { .text($0) } ?? .null, challenge.source.map { .text($0) } ?? .null,
            ], operation: "reserve a login challenge")
        return .inserted(ChallengeInsertion(accountKey: accountKey, retiredChallengeIDs: []))
    }

    /// Makes a reserved challenge the pending one once its code was accepted by the provider (see
    /// `AuthorityStore.activateChallenge`); in the caller's transaction. Only now is the device's
    /// earlier pending challenge of the same purpose retired (resend replaces; another contact on
    /// the same device retires it), and the account's oldest beyond `maxActivePerAccount`.
    /// - Returns: the ids of the retired challenges; empty when the reservation is gone.
    static func activateChallenge<DB: StoreConnection>(_ db: DB, id: String, maxActivePerAccount: Int)
        throws(RainError) -> [String]
    {
        let op = "read a reserved challenge"
        let rows = try db.query(
            "SELECT app_id, device_id, purpose, account_key, created_at FROM challenges WHERE id = $1 AND state = 'retired'",
            values: [.text(id)], operation: op)
        guard let row = rows.first else { return [] }
        let appID = try row.text(0, op)
        let deviceID = try row.text(1, op)
        let purpose = try row.text(2, op)
        let accountKey = try row.text(3, op)
        let createdAt = try row.integer(4, op)
        // The same relative order as `reserveChallenge` (device, then account key): no deadlock.
        try db.lock("device", appID, deviceID)
        try db.lock("account", appID, accountKey)

        var retired = try db.retirePendingChallenges(appID: appID, deviceID: deviceID, purpose: purpose)

        // At most `maxActivePerAccount` live codes per account, across devices: oldest goes.
        let activeOp = "count the account's active challenges"
        let active = try db.query(
            """
            SELECT id FROM challenges
            WHERE app_id = $1 AND account_key = $2 AND state = 'pending' AND expires_at > $3
            ORDER BY created_at, \(DB.insertionOrder)
            \(DB.lockRows(of: nil))
            """,
            values: [.text(appID), .text(accountKey), .integer(createdAt)], operation: activeOp)
        let excess = active.count - max(1, maxActivePerAccount) + 1
        if excess > 0 {
            for row in active.prefix(excess) {
                let id = try row.text(0, activeOp)
                try db.execute(
                    "UPDATE challenges SET state = 'retired' WHERE id = $1 AND state = 'pending'", values: [.text(id)],
                    operation: "retire the account's oldest challenge")
                retired.append(id)
            }
        }
        try db.execute(
            "UPDATE challenges SET state = 'pending' WHERE id = $1 AND state = 'retired'", values: [.text(id)],
            operation: "activate a delivered challenge")
        return retired
    }

    /// The send limit a new challenge would break, with the earliest time it would pass, or nil.
    /// When several are broken, the one that clears last. Counts every stored challenge of the app
    /// (of every app for the limits across apps) created within each window (up to the new one's
    /// time), whatever its purpose or state.
    static func sendLimitRefusal(
        _ db: some StoreConnection, _ challenge: NewChallenge, accountKey: String, limits: CodeSendLimits
    ) throws(RainError) -> (limit: CodeSendLimit, retryAfter: Date)? {
        let now = challenge.createdAt.unixMilliseconds
        var refusals: [(limit: CodeSendLimit, retryAfter: Int64)] = []
        let contactFilter = "app_id = $1 AND contact_kind = $2 AND contact_value = $3"
        let contactArguments: [StoreValue] = [
            .text(challenge.appID), .text(challenge.contact.kindName), .text(challenge.contact.value),
        ]

        if limits.contactCooldown > .zero {
            let op = "find the contact's last code"
            let rows = try db.query(
                "SELECT MAX(created_at) FROM challenges WHERE \(contactFilter) AND created_at <= $4",
                values: contactArguments + [.integer(now)], operation: op)
            if let last = try rows.first?.optionalInteger(0, op) {
                let clears = last + limits.contactCooldown.milliseconds
                if clears > now { refusals.append((.contactCooldown, clears)) }
            }
        }
        if let clears = try windowClearance(
            db, filter: contactFilter, arguments: contactArguments, now: now, window: limits.contactWindow,
            maxSends: limits.contactMaxSends, operation: "count the contact's recent codes")
        {
            refusals.append((.contactWindow, clears))
        }
        if let clears = try windowClearance(
            db, filter: "app_id = $1 AND account_key = $2", arguments: [.text(challenge.appID), .text(accountKey)],
            now: now, window: limits.accountWindow, maxSends: limits.accountMaxSends,
            operation: "count the account's recent codes")
        {
            refusals.append((.accountWindow, clears))
        }
        if let clears = try windowClearance(
            db, filter: "contact_kind = $1 AND contact_value = $2",
            arguments: [.text(challenge.contact.kindName), .text(challenge.contact.value)], now: now,
            window: limits.contactAllAppsWindow, maxSends: limits.contactAllAppsMaxSends,
            operation: "count the contact's recent codes across apps")
        {
            refusals.append((.contactAllAppsWindow, clears))
        }
        if let source = challenge.source,
            let clears = try windowClearance(
                db, filter: "source = $1", arguments: [.text(source)], now: now, window: limits.sourceWindow,
                maxSends: limits.sourceMaxSends, operation: "count the source's recent codes")
        {
            refusals.append((.sourceWindow, clears))
        }
        guard let latest = refusals.max(by: { $0.retryAfter < $1.retryAfter }) else { return nil }
        return (latest.limit, Date(unixMilliseconds: latest.retryAfter))
    }

    /// When enough of the sends matching `filter` (which uses `$1` … `$n` for `arguments`) within
    /// `window` before `now` have left it for one more to fit under `maxSends` (Unix ms), or nil
    /// when one more fits now.
    private static func windowClearance(
        _ db: some StoreConnection, filter: String, arguments: [StoreValue], now: Int64, window: Duration,
        maxSends: Int, operation op: String
    ) throws(RainError) -> Int64? {
        guard window > .zero, maxSends < Int.max else { return nil }
        let windowMilliseconds = window.milliseconds
        let next = arguments.count + 1
        // A send at `t` counts while `now < t + window`.
        let rows = try db.query(
            """
            SELECT created_at FROM challenges WHERE \(filter) AND created_at > $\(next) AND created_at <= $\(next + 1)
            ORDER BY created_at
            """,
            values: arguments + [.integer(now - windowMilliseconds), .integer(now)], operation: op)
        let allowed = max(0, maxSends)
        guard rows.count >= allowed else { return nil }
        // One more fits once all but `allowed - 1` of the counted sends have left the window.
        guard allowed > 0 else { return now + windowMilliseconds }
        return try rows[rows.count - allowed].integer(0, op) + windowMilliseconds
    }

}
