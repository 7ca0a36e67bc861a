import Foundation
import RainCore
import RainWebAuthn

/// Passkey ceremonies and credentials (schema version 4).
extension SQLiteAuthorityStore {
    /// Stores a pending ceremony.
    public func insertPasskeyCeremony(_ ceremony: NewPasskeyCeremony) async throws(RainError) {
        _ = try await perform { db throws(RainError) in
            try db.execute(
                """
                INSERT INTO passkey_ceremonies (id, app_id, device_id, kind, rp_id, origins, challenge, user_handle,
                                                account_id, created_at, expires_at, state)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')
                """,
                [
                    .text(ceremony.id), .text(ceremony.appID), .text(ceremony.deviceID), .text(ceremony.kind.rawValue),
                    .text(ceremony.rpID), .text(ceremony.origins.joined(separator: "\n")), .blob(ceremony.challenge),
                    ceremony.userHandle.map { .blob($0) } ?? .null, ceremony.accountID.map { .text($0) } ?? .null,
                    .integer(ceremony.createdAt.unixMilliseconds), .integer(ceremony.expiresAt.unixMilliseconds),
                ], operation: "store a passkey ceremony")
        }
    }

    /// Takes a ceremony (see `AuthorityStore.takePasskeyCeremony`), in one transaction.
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
                    FROM passkey_ceremonies WHERE id = ? AND app_id = ? AND device_id = ?
                    """,
                    [.text(id), .text(appID), .text(deviceID)], operation: op)
                guard let row = rows.first else { return .unknown }
                guard let kind = PasskeyCeremonyKind(rawValue: try row.text(3, op)) else {
                    throw RainError(.internalError, "authority store: a passkey ceremony has an unknown kind")
                }
                let originsText = try row.text(5, op)
                let ceremony = NewPasskeyCeremony(
                    id: try row.text(0, op), appID: try row.text(1, op), deviceID: try row.text(2, op), kind: kind,
                    rpID: try row.text(4, op),
                    origins: originsText.split(separator: "\n").map(String.init), challenge: try row.blob(6, op),
                    userHandle: try row.optionalBlob(7, op), accountID: try row.optionalText(8, op),
                    createdAt: Date(unixMilliseconds: try row.integer(9, op)),
                    expiresAt: Date(unixMilliseconds: try row.integer(10, op)))
                guard try row.text(11, op) == "pending" else { return .used }
                guard now < ceremony.expiresAt else { return .expired }
                try db.execute(
                    "UPDATE passkey_ceremonies SET state = 'used' WHERE id = ?", [.text(id)],
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
                "SELECT \(StoreRecords.credentialColumns) FROM passkey_credentials WHERE credential_id = ? AND app_id = ? AND rp_id = ?",
                [.blob(id), .text(appID), .text(rpID)], operation: op)
            guard let row = rows.first else { return nil }
            return try StoreRecords.credential(row, op)
        }
    }

    /// The account's credentials, oldest first.
    public func passkeyCredentials(accountID: String) async throws(RainError) -> [PasskeyCredentialRecord] {
        try await perform { db throws(RainError) in try Self.passkeyCredentials(db, accountID: accountID) }
    }

    static func passkeyCredentials(_ db: SQLiteConnection, accountID: String) throws(RainError)
        -> [PasskeyCredentialRecord]
    {
        let op = "list the account's passkeys"
        let rows = try db.query(
            "SELECT \(StoreRecords.credentialColumns) FROM passkey_credentials WHERE account_id = ? ORDER BY created_at, rowid",
            [.text(accountID)], operation: op)
        var out: [PasskeyCredentialRecord] = []
        for row in rows { out.append(try StoreRecords.credential(row, op)) }
        return out
    }

    /// Creates an account from a passkey (see `AuthorityStore.completePasskeySignUp`).
    public func completePasskeySignUp(_ signUp: PasskeySignUpCompletion) async throws(RainError) -> LoginRecord {
        try await perform { db throws(RainError) in
            try db.transaction("complete a passkey sign-up") { () throws(RainError) -> LoginRecord in
                try Self.requireNewCredential(db, signUp.credential.credentialID)
                let now = signUp.now.unixMilliseconds
                try db.execute(
                    "INSERT INTO accounts (id, app_id, created_at) VALUES (?, ?, ?)",
                    [.text(signUp.accountID), .text(signUp.appID), .integer(now)], operation: "create the account")
                let keys = signUp.walletKeys
                try db.execute(
                    """
                    INSERT INTO wallets (id, account_id, created_at, entropy_ciphertext, entropy_key_id,
                                         ethereum_address, solana_address)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                    [
                        .text(signUp.walletID), .text(signUp.accountID), .integer(now), .blob(keys.entropyCiphertext),
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

    /// Records a passkey login (see `AuthorityStore.completePasskeyLogin`).
    public func completePasskeyLogin(_ login: PasskeyLoginCompletion) async throws(RainError) -> LoginRecord {
        try await perform { db throws(RainError) in
            try db.transaction("complete a passkey login") { () throws(RainError) -> LoginRecord in
                let op = "read the passkey's account"
                let rows = try db.query(
                    """
                    SELECT c.account_id, c.sign_count, COALESCE(w.id, '')
                    FROM passkey_credentials c LEFT JOIN wallets w ON w.account_id = c.account_id
                    WHERE c.credential_id = ? AND c.app_id = ? AND c.rp_id = ?
                    """,
                    [.blob(login.credentialID), .text(login.appID), .text(login.rpID)], operation: op)
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
                    UPDATE passkey_credentials SET sign_count = ?, backed_up = ?, last_used_at = ?
                    WHERE credential_id = ?
                    """,
                    [
                        .integer(Int64(login.signCount)), .integer(login.isBackedUp ? 1 : 0),
                        .integer(login.now.unixMilliseconds), .blob(login.credentialID),
                    ], operation: "update the passkey's counter")
                let revoked = try Self.storeLoginSession(
                    db, appID: login.appID, accountID: accountID, deviceID: login.deviceID, session: login.session,
                    now: login.now)
                return LoginRecord(
                    accountID: accountID, walletID: walletID, accountCreated: false, revokedElsewhereCount: revoked)
            }
        }
    }

    // MARK: - Shared (called on the queue)

    /// A login's session: revokes the account's sessions on other devices (`revoked_elsewhere`) and
    /// this device's older ones (`replaced`), then stores the new one.
    /// - Returns: how many sessions on other devices were revoked.
    static func storeLoginSession(
        _ db: SQLiteConnection, appID: String, accountID: String, deviceID: String, session: NewSession, now date: Date
    ) throws(RainError) -> Int {
        let now = date.unixMilliseconds
        let revokedElsewhere = try db.execute(
            """
            UPDATE sessions SET revoked_at = ?, revoke_reason = ?
            WHERE app_id = ? AND account_id = ? AND device_id <> ? AND revoked_at IS NULL
            """,
            [
                .integer(now), .text(SessionRevokeReason.revokedElsewhere), .text(appID), .text(accountID),
                .text(deviceID),
            ], operation: "revoke the account's sessions on other devices")
        try db.execute(
            """
            UPDATE sessions SET revoked_at = ?, revoke_reason = ?
            WHERE app_id = ? AND account_id = ? AND device_id = ? AND revoked_at IS NULL
            """,
            [.integer(now), .text(SessionRevokeReason.replaced), .text(appID), .text(accountID), .text(deviceID)],
            operation: "replace the device's older sessions")
        try db.execute(
            """
            INSERT INTO sessions (id, app_id, account_id, device_id, access_hash, refresh_hash,
                                  access_expires_at, created_at, device_public_key)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(session.id), .text(appID), .text(accountID), .text(deviceID), .blob(session.accessHash),
                .blob(session.refreshHash), .integer(session.accessExpiresAt.unixMilliseconds), .integer(now),
                session.devicePublicKey.map { .blob($0) } ?? .null,
            ], operation: "store the session")
        return revokedElsewhere
    }

    /// RAIN_102 `credential_already_registered` when any account holds this credential id.
    private static func requireNewCredential(_ db: SQLiteConnection, _ id: [UInt8]) throws(RainError) {
        let rows = try db.query(
            "SELECT 1 FROM passkey_credentials WHERE credential_id = ?", [.blob(id)],
            operation: "check the credential id is new")
        guard rows.isEmpty else {
            throw RainError.webAuthn(
                .credentialAlreadyRegistered, "this passkey is already registered to an account", field: "rawId")
        }
    }

    private static func insertCredential(_ db: SQLiteConnection, _ c: PasskeyCredentialRecord) throws(RainError) {
        try db.execute(
            """
            INSERT INTO passkey_credentials (credential_id, account_id, app_id, rp_id, public_key, algorithm,
                                             sign_count, backup_eligible, backed_up, user_handle, created_at,
                                             last_used_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .blob(c.credentialID), .text(c.accountID), .text(c.appID), .text(c.rpID), .blob(c.publicKey),
                .integer(Int64(c.algorithm)), .integer(Int64(c.signCount)), .integer(c.isBackupEligible ? 1 : 0),
                .integer(c.isBackedUp ? 1 : 0), .blob(c.userHandle), .integer(c.createdAt.unixMilliseconds),
                c.lastUsedAt.map { .integer($0.unixMilliseconds) } ?? .null,
            ], operation: "store the passkey")
    }
}
