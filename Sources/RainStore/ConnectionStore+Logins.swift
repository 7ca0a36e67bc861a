import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

// Logins: the account of a contact, completing a login, and the outcomes kept for repeated confirms.
extension ConnectionStore {
    /// The account that owns `contact` in `appID`, with its wallet.
    package func account(appID: String, contact: RainWalletContact) async throws(RainError) -> AccountRecord? {
        try await perform { db throws(RainError) in
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
    }

    /// Completes a login (see `AuthorityStore.completeLogin`), in one transaction.
    package func completeLogin(_ login: LoginCompletion) async throws(RainError) -> LoginCompletionOutcome {
        try await perform { db throws(RainError) in
            try db.transaction("complete a login") { () throws(RainError) -> LoginCompletionOutcome in
                if let early: LoginCompletionOutcome = try StoreOperations.confirmCode(
                    db, challengeID: login.challengeID, appID: login.appID, deviceID: login.deviceID,
                    contact: login.contact, purpose: .login, idempotency: login.idempotency, now: login.now)
                {
                    return early
                }
                let now = login.now.unixMilliseconds

                let accountID: String
                let walletID: String
                let created: Bool
                if let existing = try StoreOperations.accountID(db, appID: login.appID, contact: login.contact) {
                    let op = "find the account's wallet"
                    let rows = try db.query(
                        "SELECT id FROM wallets WHERE account_id = $1", values: [.text(existing)], operation: op)
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
                    try StoreOperations.insertWallet(db, id: walletID, accountID: accountID, keys: login.newWalletKeys, now: now)
                    // Codes sent before the account existed now count against it.
                    try db.execute(
                        """
                        UPDATE challenges SET account_key = $1
                        WHERE app_id = $2 AND account_key = $3 AND state = 'pending'
                        """,
                        values: [.text(accountID), .text(login.appID), .text(StoreOperations.contactKey(login.contact))],
                        operation: "move pending challenges to the new account")
                }

                return .loggedIn(
                    try StoreOperations.storeLogin(
                        db, appID: login.appID, accountID: accountID, walletID: walletID, accountCreated: created,
                        deviceID: login.deviceID, session: login.session, idempotency: login.idempotency, now: login.now))
            }
        }
    }

    /// The outcome recorded with this idempotency key (see `AuthorityStore.idempotentOutcome`).
    package func idempotentOutcome(keyHash: [UInt8], now: Date) async throws(RainError) -> IdempotentOutcome? {
        try await perform { db throws(RainError) in
            try StoreOperations.idempotentOutcome(db, keyHash: keyHash, now: now)
        }
    }

    /// Records a call's outcome unless its key has one (see `AuthorityStore.recordIdempotentOutcome`).
    package func recordIdempotentOutcome(
        _ input: IdempotentOutcomeInput, accountID: String, walletID: String, now: Date
    ) async throws(RainError) -> IdempotentOutcome {
        try await perform { db throws(RainError) -> IdempotentOutcome in
            if let first = try StoreOperations.idempotentOutcome(db, keyHash: input.keyHash, now: now) { return first }
            try StoreOperations.recordIdempotentOutcome(
                db, input, accountID: accountID, walletID: walletID, accountCreated: false)
            return IdempotentOutcome(
                kind: input.kind, challengeID: input.challengeID, requestHash: input.requestHash, accountID: accountID,
                walletID: walletID, accountCreated: false, sealedTokens: input.sealedTokens)
        }
    }

    /// Forgets a claim that got no outcome (see `AuthorityStore.releaseIdempotentClaim`).
    package func releaseIdempotentClaim(keyHash: [UInt8]) async throws(RainError) {
        try await perform { db throws(RainError) -> Void in
            try db.execute(
                "DELETE FROM idempotent_logins WHERE key_hash = $1 AND length(sealed_tokens) = 0",
                values: [.bytes(keyHash)], operation: "release the idempotency key")
        }
    }
}
