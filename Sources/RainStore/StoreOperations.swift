import Foundation
import RainAuthorityAPI
import RainCore

/// The use cases both stores run alike, written once over `StoreConnection`: the store picks the
/// connection and, where a use case must be atomic, begins the transaction around the call (the
/// doc comment says so). Where SQLite and PostgreSQL differ (row order, row and advisory locks,
/// retiring a device's challenges) the connection says how.
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

    /// The account that owns `contact` in `appID`, with its wallet.
    static func account(_ db: some StoreConnection, appID: String, contact: RainWalletContact) throws(RainError)
        -> AccountRecord?
    {
        let op = "look up an account by contact"
        let rows = try db.query(
            """
            SELECT a.id, a.app_id, w.id, a.created_at
            FROM contacts c JOIN accounts a ON a.id = c.account_id JOIN wallets w ON w.account_id = a.id
            WHERE c.app_id = $1 AND c.kind = $2 AND c.value = $3
            """,
            values: [.text(appID), .text(contact.kindName), .text(contact.value)], operation: op)
        guard let row = rows.first else { return nil }
        return AccountRecord(
            id: try row.text(0, op), appID: try row.text(1, op), walletID: try row.text(2, op),
            createdAt: Date(unixMilliseconds: try row.integer(3, op)))
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

    // MARK: - Challenges

    /// Records a pending challenge unless a send limit refuses it (see
    /// `AuthorityStore.insertChallenge`); in the caller's transaction. The device's, the contact's
    /// and the account key's locks are held from the count to the insert, so concurrent sends
    /// never both take the last free slot.
    static func insertChallenge<DB: StoreConnection>(
        _ db: DB, _ challenge: NewChallenge, maxActivePerAccount: Int, limits: CodeSendLimits
    ) throws(RainError) -> ChallengeInsertionOutcome {
        let outcome = try reserveChallenge(db, challenge, limits: limits)
        guard case .inserted(let reserved) = outcome else { return outcome }
        let retired = try activateChallenge(db, id: challenge.id, maxActivePerAccount: maxActivePerAccount)
        return .inserted(ChallengeInsertion(accountKey: reserved.accountKey, retiredChallengeIDs: retired))
    }

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

    /// Gives a reserved challenge's send-limit slot back: the provider refused its code before
    /// accepting it, so nobody can have received it. Deletes the row only while it is still a
    /// reservation (retired, never tried).
    static func releaseChallenge(_ db: some StoreConnection, id: String) throws(RainError) {
        try db.execute(
            "DELETE FROM challenges WHERE id = $1 AND state = 'retired' AND wrong_attempts = 0", values: [.text(id)],
            operation: "give back a refused challenge's slot")
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

    /// Retires a challenge if it is still pending.
    static func retireChallenge(_ db: some StoreConnection, id: String) throws(RainError) {
        try db.execute(
            "UPDATE challenges SET state = 'retired' WHERE id = $1 AND state = 'pending'", values: [.text(id)],
            operation: "retire a challenge")
    }

    /// Counts a wrong code, locking at `maxWrongAttempts`: one conditional `UPDATE` (which the
    /// challenge's row lock serializes in PostgreSQL), then the challenge as it is now; in the
    /// caller's transaction.
    static func recordWrongAttempt(_ db: some StoreConnection, challengeID: String, maxWrongAttempts: Int, now: Date)
        throws(RainError) -> ChallengeRecord?
    {
        try db.execute(
            """
            UPDATE challenges
            SET wrong_attempts = wrong_attempts + 1,
                state = CASE WHEN wrong_attempts + 1 >= $1 THEN 'locked' ELSE state END
            WHERE id = $2 AND state = 'pending' AND expires_at > $3
            """,
            values: [.integer(Int64(max(1, maxWrongAttempts))), .text(challengeID), .integer(now.unixMilliseconds)],
            operation: "count a wrong code")
        return try challenge(db, id: challengeID)
    }

    // MARK: - Logins and sessions

    /// Completes a login (see `AuthorityStore.completeLogin`); in the caller's transaction.
    static func completeLogin(_ db: some StoreConnection, _ login: LoginCompletion) throws(RainError)
        -> LoginCompletionOutcome
    {
        // Logins of one contact run one at a time: two first logins would otherwise lock each
        // other's challenge rows and contact key (a deadlock, not just a retry).
        try db.lock("contact", login.appID, contactKey(login.contact))
        let now = login.now.unixMilliseconds
        // A repeat that raced its first confirm (here or on another instance) waited for the lock
        // above: the first one's outcome is committed now.
        if let key = login.idempotency, let first = try idempotentOutcome(db, keyHash: key.keyHash, now: login.now) {
            return .repeated(first)
        }
        let used = try db.execute(
            """
            UPDATE challenges SET state = 'used'
            WHERE id = $1 AND app_id = $2 AND device_id = $3 AND purpose = 'login' AND state = 'pending'
              AND expires_at > $4
            """,
            values: [.text(login.challengeID), .text(login.appID), .text(login.deviceID), .integer(now)],
            operation: "mark the challenge used")
        guard used == 1 else {
            return .challengeUnavailable(try challenge(db, id: login.challengeID))
        }

        let accountID: String
        let walletID: String
        let created: Bool
        if let existing = try Self.accountID(db, appID: login.appID, contact: login.contact) {
            let op = "find the account's wallet"
            let rows = try db.query("SELECT id FROM wallets WHERE account_id = $1", values: [.text(existing)], operation: op)
            guard let row = rows.first else {
                throw RainError(.unavailable, "the account's wallet is unavailable")
            }
            accountID = existing
            walletID = try row.text(0, op)
            created = false
            try db.execute(
                """
                UPDATE contacts SET verified_at = COALESCE(verified_at, $1)
                WHERE app_id = $2 AND kind = $3 AND value = $4
                """,
                values: [.integer(now), .text(login.appID), .text(login.contact.kindName), .text(login.contact.value)],
                operation: "mark the contact verified")
        } else {
            accountID = login.newAccountID
            walletID = login.newWalletID
            created = true
            try db.execute(
                "INSERT INTO accounts (id, app_id, created_at) VALUES ($1, $2, $3)",
                values: [.text(accountID), .text(login.appID), .integer(now)], operation: "create the account")
            // A concurrent first login of the same contact (PostgreSQL) makes this a unique
            // violation: the transaction runs again and takes the branch above.
            try db.execute(
                "INSERT INTO contacts (app_id, kind, value, account_id, verified_at) VALUES ($1, $2, $3, $4, $5)",
                values: [
                    .text(login.appID), .text(login.contact.kindName), .text(login.contact.value), .text(accountID),
                    .integer(now),
                ], operation: "attach the contact to the account")
            try insertWallet(db, id: walletID, accountID: accountID, keys: login.newWalletKeys, now: now)
            // Codes sent before the account existed now count against it.
            try db.execute(
                """
                UPDATE challenges SET account_key = $1
                WHERE app_id = $2 AND account_key = $3 AND state = 'pending'
                """,
                values: [.text(accountID), .text(login.appID), .text(contactKey(login.contact))],
                operation: "move pending challenges to the new account")
        }

        let revokedElsewhere = try storeLoginSession(
            db, appID: login.appID, accountID: accountID, deviceID: login.deviceID, session: login.session,
            now: login.now)
        if let key = login.idempotency {
            try recordIdempotentOutcome(
                db, key, accountID: accountID, walletID: walletID, accountCreated: created)
        }
        return .loggedIn(
            LoginRecord(
                accountID: accountID, walletID: walletID, accountCreated: created,
                revokedElsewhereCount: revokedElsewhere.count, revokedDeviceIDs: revokedElsewhere.deviceIDs,
                isReplacedOnDevice: revokedElsewhere.isReplaced))
    }

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

    /// A login's session: locks the account (so logins of one account run one at a time and
    /// exactly one device ends up live), revokes the account's sessions on other devices
    /// (`revoked_elsewhere`) and this device's older ones (`replaced`), then stores the new one.
    /// - Returns: how many sessions on other devices were revoked, those devices (each once, for
    ///   the pushed revocations of issue 19), and whether an older session of this device was replaced.
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

    /// Revokes the unrevoked session holding this refresh-token hash as its current or previous one.
    static func revokeSession(_ db: some StoreConnection, appID: String, refreshHash: [UInt8], reason: String, now: Date)
        throws(RainError) -> Bool
    {
        let changed = try db.execute(
            """
            UPDATE sessions SET revoked_at = $1, revoke_reason = $2
            WHERE app_id = $3 AND (refresh_hash = $4 OR previous_refresh_hash = $4) AND revoked_at IS NULL
            """,
            values: [.integer(now.unixMilliseconds), .text(reason), .text(appID), .bytes(refreshHash)],
            operation: "revoke a session")
        return changed > 0
    }

    /// Revokes the live session with this id.
    static func revokeSession(_ db: some StoreConnection, id: String, reason: String, now: Date) throws(RainError)
        -> Bool
    {
        try db.execute(
            "UPDATE sessions SET revoked_at = $1, revoke_reason = $2 WHERE id = $3 AND revoked_at IS NULL",
            values: [.integer(now.unixMilliseconds), .text(reason), .text(id)], operation: "revoke a session") > 0
    }

    /// Gives every live session of `deviceID` bound to one of `currentKeys` (and not already to
    /// `newKey`) `newKey` as its pending key.
    static func rebindDevice(_ db: some StoreConnection, deviceID: String, currentKeys: [[UInt8]], newKey: [UInt8])
        throws(RainError) -> Int
    {
        var changed = 0
        for key in currentKeys where key != newKey {
            changed += try db.execute(
                """
                UPDATE sessions SET pending_device_public_key = $1
                WHERE device_id = $2 AND device_public_key = $3 AND revoked_at IS NULL
                """,
                values: [.bytes(newKey), .text(deviceID), .bytes(key)], operation: "move a device's sessions to a new key")
        }
        return changed
    }

    /// Binds every live session of `deviceID` whose pending key is `key` to `key` alone.
    static func confirmDeviceKey(_ db: some StoreConnection, deviceID: String, key: [UInt8]) throws(RainError) -> Int {
        try db.execute(
            """
            UPDATE sessions SET device_public_key = $1, pending_device_public_key = NULL
            WHERE device_id = $2 AND pending_device_public_key = $1 AND revoked_at IS NULL
            """,
            values: [.bytes(key), .text(deviceID)], operation: "confirm a device's new key")
    }

    /// Runs one refresh (see `AuthorityStore.refreshSession`); in the caller's transaction, which
    /// holds the session row's lock (PostgreSQL) from the lookup to the commit.
    static func refreshSession<Verdict>(
        _ db: some StoreConnection, appID: String, refreshHash: [UInt8], now: Date,
        decide: (RefreshCandidate?) -> (change: SessionRefreshChange, verdict: Verdict)
    ) throws(RainError) -> Verdict {
        let candidate = try refreshCandidate(db, appID: appID, refreshHash: refreshHash)
        let (change, verdict) = decide(candidate)
        switch change {
        case .none:
            break
        case .rotate(let rotation):
            guard let candidate, candidate.generation == .current, candidate.session.revokedAt == nil else {
                throw RainError(.internalError, "authority store: only a live current token can be rotated")
            }
            try rotate(db, session: candidate.session, rotation: rotation)
        case .revoke(let reason):
            guard let candidate else { break }
            try db.execute(
                "UPDATE sessions SET revoked_at = $1, revoke_reason = $2 WHERE id = $3 AND revoked_at IS NULL",
                values: [.integer(now.unixMilliseconds), .text(reason), .text(candidate.session.id)],
                operation: "revoke a session family")
        }
        return verdict
    }

    /// The session holding `refreshHash` as its current, previous or an older refresh hash, its row
    /// locked (PostgreSQL) until the transaction ends. A refresh that waited for another one's lock
    /// re-reads the row as committed: a token rotated meanwhile no longer matches as current, and
    /// the next lookup finds it as the previous one.
    private static func refreshCandidate<DB: StoreConnection>(_ db: DB, appID: String, refreshHash: [UInt8])
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
    private static func rotate(_ db: some StoreConnection, session: SessionRecord, rotation: SessionRotation)
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

    /// Marks the session's current pair used, only while it still holds `accessHash` and is not
    /// marked yet (see `AuthorityStore.markPairUsed`).
    static func markPairUsed(_ db: some StoreConnection, sessionID: String, accessHash: [UInt8]) throws(RainError)
        -> Bool
    {
        try db.execute(
            "UPDATE sessions SET pair_used = $1 WHERE id = $2 AND access_hash = $3 AND pair_used = $4",
            values: [.boolean(true), .text(sessionID), .bytes(accessHash), .boolean(false)],
            operation: "mark a session's tokens used") > 0
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

    /// The account's sessions, oldest first.
    static func sessions<DB: StoreConnection>(_ db: DB, appID: String, accountID: String) throws(RainError)
        -> [SessionRecord]
    {
        let op = "list the account's sessions"
        let rows = try db.query(
            """
            SELECT \(StoreRecords.sessionColumns("s")) FROM sessions s
            WHERE s.app_id = $1 AND s.account_id = $2 ORDER BY s.created_at, s.\(DB.insertionOrder)
            """,
            values: [.text(appID), .text(accountID)], operation: op)
        var out: [SessionRecord] = []
        for row in rows { out.append(try StoreRecords.session(row, op)) }
        return out
    }

    // MARK: - Wallets and pruning

    /// The wallet of `accountID`, with its key material, or nil when the account has none.
    static func wallet(_ db: some StoreConnection, accountID: String) throws(RainError) -> WalletRecord? {
        let op = "read the account's wallet"
        let rows = try db.query(
            "SELECT \(StoreRecords.walletColumns) FROM wallets WHERE account_id = $1", values: [.text(accountID)],
            operation: op)
        guard let row = rows.first else { return nil }
        return try StoreRecords.wallet(row, op)
    }

    /// Every wallet that lacks its entropy or an address, oldest first.
    static func walletsMissingKeys<DB: StoreConnection>(_ db: DB) throws(RainError) -> [WalletRecord] {
        let op = "find wallets without keys"
        var out: [WalletRecord] = []
        for row in try db.query(
            """
            SELECT \(StoreRecords.walletColumns) FROM wallets
            WHERE entropy_ciphertext IS NULL OR entropy_key_id IS NULL OR ethereum_address IS NULL
               OR solana_address IS NULL
            ORDER BY created_at, \(DB.insertionOrder)
            """, values: [], operation: op)
        {
            out.append(try StoreRecords.wallet(row, op))
        }
        return out
    }

    /// Stores a wallet's keys in one statement, only if its entropy ciphertext is still
    /// `expectedCiphertext` (nil: still none), so two backfills never replace each other's entropy.
    static func storeWalletKeys<DB: StoreConnection>(
        _ db: DB, walletID: String, keys: WalletKeyMaterial, expectedCiphertext: [UInt8]?
    ) throws(RainError) -> Bool {
        let changed = try db.execute(
            """
            UPDATE wallets
            SET entropy_ciphertext = $1, entropy_key_id = $2, ethereum_address = $3, solana_address = $4
            WHERE id = $5 AND \(DB.sameBytes("entropy_ciphertext", "$6"))
            """,
            values: [
                .bytes(keys.entropyCiphertext), .text(keys.entropyKeyID),
                keys.ethereumAddress.map { .text($0) } ?? .null, keys.solanaAddress.map { .text($0) } ?? .null,
                .text(walletID), expectedCiphertext.map { .bytes($0) } ?? .null,
            ], operation: "store a wallet's keys")
        return changed == 1
    }

    /// Deletes old challenges, revoked sessions and old rotated-out refresh hashes; in the
    /// caller's transaction.
    static func prune(
        _ db: some StoreConnection, challengesExpiredBefore: Date, sessionsRevokedBefore: Date,
        refreshTokensRetiredBefore: Date
    ) throws(RainError) -> PruneResult {
        let challenges = try db.execute(
            "DELETE FROM challenges WHERE expires_at < $1", values: [.integer(challengesExpiredBefore.unixMilliseconds)],
            operation: "delete expired challenges")
        // Issue 20: a login's outcome is kept for its repeats as long as its challenge.
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
        return PruneResult(
            challengesDeleted: challenges, sessionsDeleted: sessions, retiredRefreshTokensDeleted: retired,
            passkeyCeremoniesDeleted: ceremonies)
    }
}
