import Foundation
import RainCore
import RainWebAuthn

/// Backup contacts and passkeys on PostgreSQL (the same use cases as `SQLiteAuthorityStore`'s).
extension PostgresAuthorityStore {
    /// The account of `appID` that owns `contact`, or nil.
    public func contactOwner(appID: String, contact: RainWalletContact) async throws(RainError) -> String? {
        try await perform { db throws(RainError) in try Self.accountID(db, appID: appID, contact: contact) }
    }

    /// Completes a contact verification (see `AuthorityStore.completeContactVerification`), in one
    /// transaction; a concurrent attach of the same contact is a unique violation, after which the
    /// transaction runs again and finds the owner.
    public func completeContactVerification(_ v: ContactVerificationCompletion) async throws(RainError)
        -> ContactVerificationOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("complete a contact verification") { () throws(RainError) -> ContactVerificationOutcome in
                try Self.lock(db, "contact", v.appID, Self.contactKey(v.contact))
                let now = v.now.unixMilliseconds
                let used = try db.execute(
                    """
                    UPDATE challenges SET state = 'used'
                    WHERE id = $1 AND app_id = $2 AND device_id = $3 AND purpose = 'verify_contact'
                      AND target_account_id = $4 AND state = 'pending' AND expires_at > $5
                    """,
                    [.text(v.challengeID), .text(v.appID), .text(v.deviceID), .text(v.accountID), .integer(now)],
                    operation: "mark the verification challenge used")
                guard used == 1 else {
                    return .challengeUnavailable(try Self.challenge(db, id: v.challengeID))
                }
                if let owner = try Self.accountID(db, appID: v.appID, contact: v.contact) {
                    guard owner == v.accountID else {
                        try db.execute(
                            "UPDATE challenges SET state = 'retired' WHERE id = $1", [.text(v.challengeID)],
                            operation: "retire the verification challenge")
                        return .ownedByAnotherAccount
                    }
                    try db.execute(
                        """
                        UPDATE contacts SET verified_at = COALESCE(verified_at, $1)
                        WHERE app_id = $2 AND kind = $3 AND value = $4
                        """,
                        [.integer(now), .text(v.appID), .text(v.contact.kindName), .text(v.contact.value)],
                        operation: "mark the contact verified")
                    return .verified(wasAlreadyAttached: true)
                }
                try db.execute(
                    "INSERT INTO contacts (app_id, kind, value, account_id, verified_at) VALUES ($1, $2, $3, $4, $5)",
                    [
                        .text(v.appID), .text(v.contact.kindName), .text(v.contact.value), .text(v.accountID),
                        .integer(now),
                    ], operation: "attach the verified contact to the account")
                try db.execute(
                    """
                    UPDATE challenges SET account_key = $1
                    WHERE app_id = $2 AND account_key = $3 AND state = 'pending'
                    """,
                    [.text(v.accountID), .text(v.appID), .text(Self.contactKey(v.contact))],
                    operation: "move the contact's pending challenges to the account")
                return .verified(wasAlreadyAttached: false)
            }
        }
    }

    /// Stores a pending ceremony.
    public func insertPasskeyCeremony(_ ceremony: NewPasskeyCeremony) async throws(RainError) {
        _ = try await perform { db throws(RainError) in
            try db.execute(
                """
                INSERT INTO passkey_ceremonies (id, app_id, device_id, kind, rp_id, origins, challenge, user_handle,
                                                account_id, created_at, expires_at, state)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending')
                """,
                [
                    .text(ceremony.id), .text(ceremony.appID), .text(ceremony.deviceID), .text(ceremony.kind.rawValue),
                    .text(ceremony.rpID), .text(ceremony.origins.joined(separator: "\n")), .bytes(ceremony.challenge),
                    ceremony.userHandle.map { .bytes($0) } ?? .null, ceremony.accountID.map { .text($0) } ?? .null,
                    .integer(ceremony.createdAt.unixMilliseconds), .integer(ceremony.expiresAt.unixMilliseconds),
                ], operation: "store a passkey ceremony")
        }
    }

    /// Takes a ceremony (see `AuthorityStore.takePasskeyCeremony`): its row is locked from the read
    /// to the commit, so of concurrent takes exactly one finds it pending.
    public func takePasskeyCeremony(id: String, appID: String, deviceID: String, now: Date) async throws(RainError)
        -> PasskeyCeremonyTake
    {
        try await perform { db throws(RainError) in
            try db.transaction("take a passkey ceremony") { () throws(RainError) -> PasskeyCeremonyTake in
                let op = "read a passkey ceremony"
                let rows = try db.query(
                    """
                    SELECT id, app_id, device_id, kind, rp_id, origins, challenge, user_handle, account_id,
                           created_at, expires_at, state
                    FROM passkey_ceremonies WHERE id = $1 AND app_id = $2 AND device_id = $3
                    FOR UPDATE
                    """,
                    [.text(id), .text(appID), .text(deviceID)], operation: op)
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
                    "UPDATE passkey_ceremonies SET state = 'used' WHERE id = $1", [.text(id)],
                    operation: "mark a passkey ceremony used")
                return .taken(ceremony)
            }
        }
    }

    /// The credential with this id and rpId in `appID`.
    public func passkeyCredential(id: [UInt8], appID: String, rpID: String) async throws(RainError)
        -> PasskeyCredentialRecord?
    {
        try await perform { db throws(RainError) in
            let op = "read a passkey credential"
            let rows = try db.query(
                """
                SELECT \(StoreRecords.credentialColumns) FROM passkey_credentials
                WHERE credential_id = $1 AND app_id = $2 AND rp_id = $3
                """,
                [.bytes(id), .text(appID), .text(rpID)], operation: op)
            guard let row = rows.first else { return nil }
            return try StoreRecords.credential(row, op)
        }
    }

    /// The account's credentials, oldest first.
    public func passkeyCredentials(accountID: String) async throws(RainError) -> [PasskeyCredentialRecord] {
        try await perform { db throws(RainError) in
            let op = "list the account's passkeys"
            let rows = try db.query(
                "SELECT \(StoreRecords.credentialColumns) FROM passkey_credentials WHERE account_id = $1 ORDER BY created_at, seq",
                [.text(accountID)], operation: op)
            var out: [PasskeyCredentialRecord] = []
            for row in rows { out.append(try StoreRecords.credential(row, op)) }
            return out
        }
    }

    /// Creates an account from a passkey (see `AuthorityStore.completePasskeySignUp`).
    public func completePasskeySignUp(_ signUp: PasskeySignUpCompletion) async throws(RainError) -> LoginRecord {
        try await perform { db throws(RainError) in
            try db.transaction("complete a passkey sign-up") { () throws(RainError) -> LoginRecord in
                try Self.requireNewCredential(db, signUp.credential.credentialID)
                let now = signUp.now.unixMilliseconds
                try db.execute(
                    "INSERT INTO accounts (id, app_id, created_at) VALUES ($1, $2, $3)",
                    [.text(signUp.accountID), .text(signUp.appID), .integer(now)], operation: "create the account")
                let keys = signUp.walletKeys
                try db.execute(
                    """
                    INSERT INTO wallets (id, account_id, created_at, entropy_ciphertext, entropy_key_id,
                                         ethereum_address, solana_address)
                    VALUES ($1, $2, $3, $4, $5, $6, $7)
                    """,
                    [
                        .text(signUp.walletID), .text(signUp.accountID), .integer(now), .bytes(keys.entropyCiphertext),
                        .text(keys.entropyKeyID), keys.ethereumAddress.map { .text($0) } ?? .null,
                        keys.solanaAddress.map { .text($0) } ?? .null,
                    ], operation: "create the wallet")
                var credential = signUp.credential
                credential.accountID = signUp.accountID
                try Self.insertCredential(db, credential)
                let revoked = try Self.storeLoginSession(
                    db, appID: signUp.appID, accountID: signUp.accountID, deviceID: signUp.deviceID,
                    session: signUp.session, now: signUp.now)
                return LoginRecord(
                    accountID: signUp.accountID, walletID: signUp.walletID, accountCreated: true,
                    revokedElsewhereCount: revoked)
            }
        }
    }

    /// Attaches a credential to its account (see `AuthorityStore.addPasskeyCredential`).
    public func addPasskeyCredential(_ credential: PasskeyCredentialRecord) async throws(RainError) {
        try await perform { db throws(RainError) in
            try db.transaction("add a passkey") { () throws(RainError) in
                try Self.requireNewCredential(db, credential.credentialID)
                try Self.insertCredential(db, credential)
            }
        }
    }

    /// Records a passkey login (see `AuthorityStore.completePasskeyLogin`); the credential row is
    /// locked, so two logins with one counter value never both pass the counter check.
    public func completePasskeyLogin(_ login: PasskeyLoginCompletion) async throws(RainError) -> LoginRecord {
        try await perform { db throws(RainError) in
            try db.transaction("complete a passkey login") { () throws(RainError) -> LoginRecord in
                let op = "read the passkey's account"
                let rows = try db.query(
                    """
                    SELECT c.account_id, c.sign_count, COALESCE(w.id, '')
                    FROM passkey_credentials c LEFT JOIN wallets w ON w.account_id = c.account_id
                    WHERE c.credential_id = $1 AND c.app_id = $2 AND c.rp_id = $3
                    FOR UPDATE OF c
                    """,
                    [.bytes(login.credentialID), .text(login.appID), .text(login.rpID)], operation: op)
                guard let row = rows.first else {
                    throw RainError.webAuthn(.credentialUnknown, "no passkey with this id is registered for this domain")
                }
                let accountID = try row.text(0, op)
                let stored = try row.integer(1, op)
                let walletID = try row.text(2, op)
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
                    [
                        .integer(Int64(login.signCount)), .boolean(login.isBackedUp),
                        .integer(login.now.unixMilliseconds), .bytes(login.credentialID),
                    ], operation: "update the passkey's counter")
                let revoked = try Self.storeLoginSession(
                    db, appID: login.appID, accountID: accountID, deviceID: login.deviceID, session: login.session,
                    now: login.now)
                return LoginRecord(
                    accountID: accountID, walletID: walletID, accountCreated: false, revokedElsewhereCount: revoked)
            }
        }
    }

    /// RAIN_102 `credential_already_registered` when any account holds this credential id (a
    /// concurrent insert of the same id is a unique violation: the transaction runs again and
    /// lands here).
    private static func requireNewCredential(_ db: PostgresConnection, _ id: [UInt8]) throws(RainError) {
        let rows = try db.query(
            "SELECT 1 FROM passkey_credentials WHERE credential_id = $1", [.bytes(id)],
            operation: "check the credential id is new")
        guard rows.isEmpty else {
            throw RainError.webAuthn(
                .credentialAlreadyRegistered, "this passkey is already registered to an account", field: "rawId")
        }
    }

    private static func insertCredential(_ db: PostgresConnection, _ c: PasskeyCredentialRecord) throws(RainError) {
        try db.execute(
            """
            INSERT INTO passkey_credentials (credential_id, account_id, app_id, rp_id, public_key, algorithm,
                                             sign_count, backup_eligible, backed_up, user_handle, created_at,
                                             last_used_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
            """,
            [
                .bytes(c.credentialID), .text(c.accountID), .text(c.appID), .text(c.rpID), .bytes(c.publicKey),
                .integer(Int64(c.algorithm)), .integer(Int64(c.signCount)), .boolean(c.isBackupEligible),
                .boolean(c.isBackedUp), .bytes(c.userHandle), .integer(c.createdAt.unixMilliseconds),
                c.lastUsedAt.map { .integer($0.unixMilliseconds) } ?? .null,
            ], operation: "store the passkey")
    }
}
