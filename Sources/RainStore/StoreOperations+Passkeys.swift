import Foundation
import RainAuthorityAPI
import RainCore
import RainWebAuthn
import RainWire

/// Backup contacts and passkeys, shared by both stores (see `StoreOperations`).
extension StoreOperations {
    // MARK: - Backup contacts

    /// Completes a contact verification (see `AuthorityStore.completeContactVerification`); in the
    /// caller's transaction. In PostgreSQL a concurrent attach of the same contact is a unique
    /// violation, after which the transaction runs again and finds the owner.
    static func completeContactVerification(_ db: some StoreConnection, _ v: ContactVerificationCompletion)
        throws(RainError) -> ContactVerificationOutcome
    {
        try db.lock("contact", v.appID, contactKey(v.contact))
        let now = v.now.unixMilliseconds
        // A repeat that raced its first confirm (here or on another instance) waited for
        // the lock above: the first one's outcome is committed now.
        if let key = v.idempotency, let first = try idempotentOutcome(db, keyHash: key.keyHash, now: v.now) {
            return .repeated(first)
        }
        let used = try db.execute(
            """
            UPDATE challenges SET state = 'used'
            WHERE id = $1 AND app_id = $2 AND device_id = $3 AND purpose = 'verify_contact'
              AND target_account_id = $4 AND state = 'pending' AND expires_at > $5
            """,
            values: [.text(v.challengeID), .text(v.appID), .text(v.deviceID), .text(v.accountID), .integer(now)],
            operation: "mark the verification challenge used")
        guard used == 1 else {
            return .challengeUnavailable(try challenge(db, id: v.challengeID))
        }
        // Checked again here: another account may have taken the contact since the send.
        if let owner = try accountID(db, appID: v.appID, contact: v.contact) {
            guard owner == v.accountID else {
                try db.execute(
                    "UPDATE challenges SET state = 'retired' WHERE id = $1", values: [.text(v.challengeID)],
                    operation: "retire the verification challenge")
                return .ownedByAnotherAccount
            }
            try db.execute(
                """
                UPDATE contacts SET verified_at = COALESCE(verified_at, $1)
                WHERE app_id = $2 AND kind = $3 AND value = $4
                """,
                values: [.integer(now), .text(v.appID), .text(v.contact.kindName), .text(v.contact.value)],
                operation: "mark the contact verified")
            try recordContactVerification(db, v)
            return .verified(wasAlreadyAttached: true)
        }
        try db.execute(
            "INSERT INTO contacts (app_id, kind, value, account_id, verified_at) VALUES ($1, $2, $3, $4, $5)",
            values: [
                .text(v.appID), .text(v.contact.kindName), .text(v.contact.value), .text(v.accountID), .integer(now),
            ], operation: "attach the verified contact to the account")
        // Login codes sent to the contact before it had an account now count against this one.
        try db.execute(
            """
            UPDATE challenges SET account_key = $1
            WHERE app_id = $2 AND account_key = $3 AND state = 'pending'
            """,
            values: [.text(v.accountID), .text(v.appID), .text(contactKey(v.contact))],
            operation: "move the contact's pending challenges to the account")
        try recordContactVerification(db, v)
        return .verified(wasAlreadyAttached: false)
    }

    /// The verification's outcome, for its repeats.
    private static func recordContactVerification(_ db: some StoreConnection, _ v: ContactVerificationCompletion)
        throws(RainError)
    {
        guard let key = v.idempotency else { return }
        try recordIdempotentOutcome(
            db, key, accountID: v.accountID, walletID: "", accountCreated: false)
    }

    // MARK: - Passkey ceremonies

    /// Stores a pending ceremony.
    static func insertPasskeyCeremony(_ db: some StoreConnection, _ ceremony: NewPasskeyCeremony) throws(RainError) {
        try db.execute(
            """
            INSERT INTO passkey_ceremonies (id, app_id, device_id, kind, rp_id, origins, challenge, user_handle,
                                            account_id, created_at, expires_at, state)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending')
            """,
            values: [
                .text(ceremony.id), .text(ceremony.appID), .text(ceremony.deviceID), .text(ceremony.kind.rawValue),
                .text(ceremony.rpID), .text(ceremony.origins.joined(separator: "\n")), .bytes(ceremony.challenge),
                ceremony.userHandle.map { .bytes($0) } ?? .null, ceremony.accountID.map { .text($0) } ?? .null,
                .integer(ceremony.createdAt.unixMilliseconds), .integer(ceremony.expiresAt.unixMilliseconds),
            ], operation: "store a passkey ceremony")
    }

    /// Takes a ceremony (see `AuthorityStore.takePasskeyCeremony`); in the caller's transaction.
    /// Its row is locked (PostgreSQL) from the read to the commit, so of concurrent takes exactly
    /// one finds it pending.
    /// With a `claim`, the key's outcome or claim is read after the ceremony's row lock,
    /// so a repeat that raced its first finish sees the first one's claim once that take commits.
    static func takePasskeyCeremony<DB: StoreConnection>(
        _ db: DB, id: String, appID: String, deviceID: String, now: Date, claim: IdempotentClaim?
    ) throws(RainError) -> PasskeyCeremonyTake {
        let op = "read a passkey ceremony"
        let rows = try db.query(
            """
            SELECT id, app_id, device_id, kind, rp_id, origins, challenge, user_handle, account_id,
                   created_at, expires_at, state
            FROM passkey_ceremonies WHERE id = $1 AND app_id = $2 AND device_id = $3
            \(DB.lockRows(of: nil))
            """,
            values: [.text(id), .text(appID), .text(deviceID)], operation: op)
        if let claim, let first = try idempotentOutcome(db, keyHash: claim.keyHash, now: now) {
            return .repeated(first)
        }
        guard let row = rows.first else { return .unknown }
        guard let kind = PasskeyCeremonyKind(rawValue: try row.text(3, op)) else {
            throw RainError(.internalError, "authority store: a passkey ceremony has an unknown kind")
        }
        let ceremony = NewPasskeyCeremony(
            id: try row.text(0, op), appID: try row.text(1, op), deviceID: try row.text(2, op), kind: kind,
            rpID: try row.text(4, op),
            origins: try row.text(5, op).split(separator: "\n").map(String.init),
            challenge: try row.bytes(6, op), userHandle: try row.optionalBytes(7, op),
            accountID: try row.optionalText(8, op),
            createdAt: Date(unixMilliseconds: try row.integer(9, op)),
            expiresAt: Date(unixMilliseconds: try row.integer(10, op)))
        guard try row.text(11, op) == "pending" else { return .used }
        guard now < ceremony.expiresAt else { return .expired }
        try db.execute(
            "UPDATE passkey_ceremonies SET state = 'used' WHERE id = $1", values: [.text(id)],
            operation: "mark a passkey ceremony used")
        if let claim { try claimIdempotencyKey(db, claim, ceremonyID: id, expiresAt: ceremony.expiresAt) }
        return .taken(ceremony)
    }

    // MARK: - Passkey credentials

    /// The credential with this id and rpId in `appID`.
    static func passkeyCredential(_ db: some StoreConnection, id: [UInt8], appID: String, rpID: String)
        throws(RainError) -> PasskeyCredentialRecord?
    {
        let op = "read a passkey credential"
        let rows = try db.query(
            """
            SELECT \(StoreRecords.credentialColumns) FROM passkey_credentials
            WHERE credential_id = $1 AND app_id = $2 AND rp_id = $3
            """,
            values: [.bytes(id), .text(appID), .text(rpID)], operation: op)
        guard let row = rows.first else { return nil }
        return try StoreRecords.credential(row, op)
    }

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

    /// Creates an account from a passkey (see `AuthorityStore.completePasskeySignUp`); in the
    /// caller's transaction.
    static func completePasskeySignUp(_ db: some StoreConnection, _ signUp: PasskeySignUpCompletion)
        throws(RainError) -> LoginRecord
    {
        try requireNewCredential(db, signUp.credential.credentialID)
        let now = signUp.now.unixMilliseconds
        try db.execute(
            "INSERT INTO accounts (id, app_id, created_at) VALUES ($1, $2, $3)",
            values: [.text(signUp.accountID), .text(signUp.appID), .integer(now)], operation: "create the account")
        try insertWallet(db, id: signUp.walletID, accountID: signUp.accountID, keys: signUp.walletKeys, now: now)
        var credential = signUp.credential
        credential.accountID = signUp.accountID
        try insertCredential(db, credential)
        let revoked = try storeLoginSession(
            db, appID: signUp.appID, accountID: signUp.accountID, deviceID: signUp.deviceID,
            session: signUp.session, now: signUp.now)
        if let key = signUp.idempotency {
            try recordIdempotentOutcome(
                db, key, accountID: signUp.accountID, walletID: signUp.walletID,
                accountCreated: true)
        }
        return LoginRecord(
            accountID: signUp.accountID, walletID: signUp.walletID, accountCreated: true,
            revokedElsewhereCount: revoked.count, revokedDeviceIDs: revoked.deviceIDs, isReplacedOnDevice: revoked.isReplaced)
    }

    /// Attaches a credential to its account (see `AuthorityStore.addPasskeyCredential`); in the
    /// caller's transaction.
    static func addPasskeyCredential(
        _ db: some StoreConnection, _ credential: PasskeyCredentialRecord, idempotency: IdempotentOutcomeInput?
    ) throws(RainError) {
        try requireNewCredential(db, credential.credentialID)
        try insertCredential(db, credential)
        if let key = idempotency {
            try recordIdempotentOutcome(
                db, key, accountID: credential.accountID, walletID: "",
                accountCreated: false)
        }
    }

    /// Records a passkey login (see `AuthorityStore.completePasskeyLogin`); in the caller's
    /// transaction. The credential row is locked (PostgreSQL), so two logins with one counter
    /// value never both pass the counter check.
    static func completePasskeyLogin<DB: StoreConnection>(_ db: DB, _ login: PasskeyLoginCompletion)
        throws(RainError) -> LoginRecord
    {
        let op = "read the passkey's account"
        let rows = try db.query(
            """
            SELECT c.account_id, c.sign_count, COALESCE(w.id, '')
            FROM passkey_credentials c LEFT JOIN wallets w ON w.account_id = c.account_id
            WHERE c.credential_id = $1 AND c.app_id = $2 AND c.rp_id = $3
            \(DB.lockRows(of: "c"))
            """,
            values: [.bytes(login.credentialID), .text(login.appID), .text(login.rpID)], operation: op)
        guard let row = rows.first else {
            throw RainError.webAuthn(.credentialUnknown, "no passkey with this id is registered for this domain")
        }
        let accountID = try row.text(0, op)
        let stored = try row.integer(1, op)
        let walletID = try row.text(2, op)
        // WebAuthn §7.2 step 22: when either counter is non-zero, the new one must be greater.
        if stored != 0 || login.signCount != 0, Int64(login.signCount) <= stored {
            throw RainError.webAuthn(
                .signCountRegression,
                "the passkey's signature counter did not increase: the authenticator may be cloned")
        }
        guard !walletID.isEmpty else { throw RainError(.unavailable, "the account's wallet is unavailable") }
        try db.execute(
            """
            UPDATE passkey_credentials SET sign_count = $1, backed_up = $2, last_used_at = $3
            WHERE credential_id = $4
            """,
            values: [
                .integer(Int64(login.signCount)), .boolean(login.isBackedUp),
                .integer(login.now.unixMilliseconds), .bytes(login.credentialID),
            ], operation: "update the passkey's counter")
        let revoked = try storeLoginSession(
            db, appID: login.appID, accountID: accountID, deviceID: login.deviceID, session: login.session,
            now: login.now)
        if let key = login.idempotency {
            try recordIdempotentOutcome(
                db, key, accountID: accountID, walletID: walletID, accountCreated: false)
        }
        return LoginRecord(
            accountID: accountID, walletID: walletID, accountCreated: false, revokedElsewhereCount: revoked.count,
            revokedDeviceIDs: revoked.deviceIDs, isReplacedOnDevice: revoked.isReplaced)
    }

    /// RAIN_102 `credential_already_registered` when any account holds this credential id (in
    /// PostgreSQL a concurrent insert of the same id is a unique violation: the transaction runs
    /// again and lands here).
    private static func requireNewCredential(_ db: some StoreConnection, _ id: [UInt8]) throws(RainError) {
        let rows = try db.query(
            "SELECT 1 FROM passkey_credentials WHERE credential_id = $1", values: [.bytes(id)],
            operation: "check the credential id is new")
        guard rows.isEmpty else {
            throw RainError.webAuthn(
                .credentialAlreadyRegistered, "this passkey is already registered to an account", field: "rawId")
        }
    }

    /// Stores a credential (its flags as the store's yes/no columns).
    private static func insertCredential(_ db: some StoreConnection, _ c: PasskeyCredentialRecord) throws(RainError) {
        try db.execute(
            """
            INSERT INTO passkey_credentials (credential_id, account_id, app_id, rp_id, public_key, algorithm,
                                             sign_count, backup_eligible, backed_up, user_handle, created_at,
                                             last_used_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
            """,
            values: [
                .bytes(c.credentialID), .text(c.accountID), .text(c.appID), .text(c.rpID), .bytes(c.publicKey),
                .integer(Int64(c.algorithm)), .integer(Int64(c.signCount)), .boolean(c.isBackupEligible),
                .boolean(c.isBackedUp), .bytes(c.userHandle), .integer(c.createdAt.unixMilliseconds),
                c.lastUsedAt.map { .integer($0.unixMilliseconds) } ?? .null,
            ], operation: "store the passkey")
    }
}
