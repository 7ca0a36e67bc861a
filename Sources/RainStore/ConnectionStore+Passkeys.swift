import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWebAuthn
import RainWire

// Passkeys: ceremonies, credentials, and the sign-ups and logins they complete.
extension ConnectionStore {
    /// Stores a pending ceremony.
    package func insertPasskeyCeremony(_ ceremony: NewPasskeyCeremony) async throws(RainError) {
        try await perform { db throws(RainError) -> Void in
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
    }

    /// Takes a ceremony (see `AuthorityStore.takePasskeyCeremony`), in one transaction.
    /// Its row is locked (PostgreSQL) from the read to the commit, so of concurrent takes exactly
    /// one finds it pending.
    /// With a `claim`, the key's outcome or claim is read after the ceremony's row lock,
    /// so a repeat that raced its first finish sees the first one's claim once that take commits.
    package func takePasskeyCeremony(
        id: String, appID: String, deviceID: String, now: Date, claim: IdempotentClaim?
    ) async throws(RainError) -> PasskeyCeremonyTake {
        try await perform { db throws(RainError) in
            try db.transaction("take a passkey ceremony") { () throws(RainError) -> PasskeyCeremonyTake in
                let op = "read a passkey ceremony"
                let rows = try db.query(
                    """
                    SELECT id, app_id, device_id, kind, rp_id, origins, challenge, user_handle, account_id,
                           created_at, expires_at, state
                    FROM passkey_ceremonies WHERE id = $1 AND app_id = $2 AND device_id = $3
                    \(Connection.lockRows(of: nil))
                    """,
                    values: [.text(id), .text(appID), .text(deviceID)], operation: op)
                if let claim, let first = try StoreOperations.idempotentOutcome(db, keyHash: claim.keyHash, now: now) {
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
                if let claim { try StoreOperations.claimIdempotencyKey(db, claim, ceremonyID: id, expiresAt: ceremony.expiresAt) }
                return .taken(ceremony)
            }
        }
    }

    /// The credential with this id and rpId in `appID`.
    package func passkeyCredential(id: [UInt8], appID: String, rpID: String) async throws(RainError)
        -> PasskeyCredentialRecord?
    {
        try await perform { db throws(RainError) in
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
    }

    /// The rpIds the credential with this id is registered for in `appID`, sorted.
    package func passkeyCredentialDomains(id: [UInt8], appID: String) async throws(RainError) -> [String] {
        try await perform { db throws(RainError) in
            let op = "read a passkey credential's domains"
            let rows = try db.query(
                "SELECT rp_id FROM passkey_credentials WHERE credential_id = $1 AND app_id = $2 ORDER BY rp_id",
                values: [.bytes(id), .text(appID)], operation: op)
            var domains: [String] = []
            for row in rows { domains.append(try row.text(0, op)) }
            return domains
        }
    }

    /// The account's credentials, oldest first.
    package func passkeyCredentials(accountID: String) async throws(RainError) -> [PasskeyCredentialRecord] {
        try await perform { db throws(RainError) in try StoreOperations.passkeyCredentials(db, accountID: accountID) }
    }

    /// Removes a passkey unless it is the account's last login method (see
    /// `AuthorityStore.removePasskeyCredential`); in one transaction.
    package func removePasskeyCredential(id: [UInt8], accountID: String) async throws(RainError) -> PasskeyRemoval {
        try await perform { db throws(RainError) in
            try db.transaction("remove a passkey") { () throws(RainError) -> PasskeyRemoval in
                try StoreOperations.removeCredential(db, id: id, accountID: accountID)
            }
        }
    }

    /// Creates an account from a passkey (see `AuthorityStore.completePasskeySignUp`); in
    /// one transaction.
    package func completePasskeySignUp(_ signUp: PasskeySignUpCompletion) async throws(RainError) -> LoginRecord {
        try await perform { db throws(RainError) in
            try db.transaction("complete a passkey sign-up") { () throws(RainError) -> LoginRecord in
                try StoreOperations.requireNewCredential(db, signUp.credential.credentialID)
                let now = signUp.now.unixMilliseconds
                try db.execute(
                    "INSERT INTO accounts (id, app_id, created_at) VALUES ($1, $2, $3)",
                    values: [.text(signUp.accountID), .text(signUp.appID), .integer(now)], operation: "create the account")
                try StoreOperations.insertWallet(
                    db, id: signUp.walletID, accountID: signUp.accountID, keys: signUp.walletKeys, now: now)
                var credential = signUp.credential
                credential.accountID = signUp.accountID
                try StoreOperations.insertCredential(db, credential)
                return try StoreOperations.storeLogin(
                    db, appID: signUp.appID, accountID: signUp.accountID, walletID: signUp.walletID, accountCreated: true,
                    deviceID: signUp.deviceID, session: signUp.session, idempotency: signUp.idempotency, now: signUp.now)
            }
        }
    }

    /// Attaches a credential to its account (see `AuthorityStore.addPasskeyCredential`); in
    /// one transaction.
    package func addPasskeyCredential(_ credential: PasskeyCredentialRecord, idempotency: IdempotentOutcomeInput?)
        async throws(RainError)
    {
        try await perform { db throws(RainError) in
            try db.transaction("add a passkey") { () throws(RainError) in
                try StoreOperations.requireNewCredential(db, credential.credentialID)
                try StoreOperations.insertCredential(db, credential)
                if let key = idempotency {
                    try StoreOperations.recordIdempotentOutcome(
                        db, key, accountID: credential.accountID, walletID: "",
                        accountCreated: false)
                }
            }
        }
    }

    /// Records a passkey login (see `AuthorityStore.completePasskeyLogin`), in one
    /// transaction. The credential row is locked (PostgreSQL), so two logins with one counter
    /// value never both pass the counter check.
    package func completePasskeyLogin(_ login: PasskeyLoginCompletion) async throws(RainError) -> LoginRecord {
        try await perform { db throws(RainError) in
            try db.transaction("complete a passkey login") { () throws(RainError) -> LoginRecord in
                let op = "read the passkey's account"
                let rows = try db.query(
                    """
                    SELECT c.account_id, c.sign_count, COALESCE(w.id, '')
                    FROM passkey_credentials c LEFT JOIN wallets w ON w.account_id = c.account_id
                    WHERE c.credential_id = $1 AND c.app_id = $2 AND c.rp_id = $3
                    \(Connection.lockRows(of: "c"))
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
                return try StoreOperations.storeLogin(
                    db, appID: login.appID, accountID: accountID, walletID: walletID, accountCreated: false,
                    deviceID: login.deviceID, session: login.session, idempotency: login.idempotency, now: login.now)
            }
        }
    }
}
