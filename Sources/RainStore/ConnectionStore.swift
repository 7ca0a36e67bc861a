import Foundation
import RainAuthorityAPI
import RainCore
import RainWire

/// An `AuthorityStore` whose use cases are `StoreOperations` run on one of its connections: the
/// async API below is written once for `SQLiteAuthorityStore` and `PostgresAuthorityStore`. A
/// store supplies `perform` (where its connections run) and keeps what really differs (opening,
/// migrations, `schemaVersion`, `close`).
///
/// An atomic use case runs in one `Connection.transaction`: in SQLite a savepoint of the `BEGIN
/// IMMEDIATE` transaction its group of requests shares (`SQLiteGroupCommitWriter`), whose write lock
/// serializes it against every other writer; in PostgreSQL a READ
/// COMMITTED transaction that takes the row and advisory locks the connection's hooks take
/// (see `PostgresAuthorityStore`) and runs again when it loses a race.
protocol ConnectionStore: AuthorityStore {
    /// The store's connection.
    associatedtype Connection: StoreConnection

    /// Runs `body` with a connection on that connection's queue.
    func perform<T: Sendable>(_ body: @escaping @Sendable (Connection) throws(RainError) -> T) async throws(RainError)
        -> T
}

extension ConnectionStore {
    /// The account that owns `contact` in `appID`, with its wallet.
    package func account(appID: String, contact: RainWalletContact) async throws(RainError) -> AccountRecord? {
        try await perform { db throws(RainError) in try StoreOperations.account(db, appID: appID, contact: contact) }
    }

    /// Records a pending challenge unless a send limit refuses it (see
    /// `AuthorityStore.insertChallenge`), in one transaction that keeps every other send of the
    /// device, the contact and the account key out from the count to the insert.
    package func insertChallenge(_ challenge: NewChallenge, maxActivePerAccount: Int, limits: CodeSendLimits)
        async throws(RainError) -> ChallengeInsertionOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("record a login challenge") { () throws(RainError) -> ChallengeInsertionOutcome in
                try StoreOperations.insertChallenge(db, challenge, maxActivePerAccount: maxActivePerAccount, limits: limits)
            }
        }
    }

    /// Reserves a challenge's send-limit slot (see `AuthorityStore.reserveChallenge`), in one transaction.
    package func reserveChallenge(_ challenge: NewChallenge, limits: CodeSendLimits) async throws(RainError)
        -> ChallengeInsertionOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("reserve a login challenge") { () throws(RainError) -> ChallengeInsertionOutcome in
                try StoreOperations.reserveChallenge(db, challenge, limits: limits)
            }
        }
    }

    /// Makes a reservation pending (see `AuthorityStore.activateChallenge`), in one transaction.
    package func activateChallenge(id: String, maxActivePerAccount: Int) async throws(RainError) -> [String] {
        try await perform { db throws(RainError) in
            try db.transaction("activate a delivered challenge") { () throws(RainError) -> [String] in
                try StoreOperations.activateChallenge(db, id: id, maxActivePerAccount: maxActivePerAccount)
            }
        }
    }

    /// Gives a refused reservation's slot back (see `AuthorityStore.releaseChallenge`).
    package func releaseChallenge(id: String) async throws(RainError) {
        try await perform { db throws(RainError) in try StoreOperations.releaseChallenge(db, id: id) }
    }

    /// The challenge with this id, whatever its state.
    package func challenge(id: String) async throws(RainError) -> ChallengeRecord? {
        try await perform { db throws(RainError) in try StoreOperations.challenge(db, id: id) }
    }

    /// Retires a challenge if it is still pending.
    package func retireChallenge(id: String) async throws(RainError) {
        try await perform { db throws(RainError) in try StoreOperations.retireChallenge(db, id: id) }
    }

    /// Counts a wrong code, locking at `maxWrongAttempts`, in one transaction: one conditional
    /// `UPDATE`, which the challenge's row lock serializes, so concurrent wrong guesses are all
    /// counted.
    package func recordWrongAttempt(challengeID: String, maxWrongAttempts: Int, now: Date) async throws(RainError)
        -> ChallengeRecord?
    {
        try await perform { db throws(RainError) in
            try db.transaction("count a wrong code") { () throws(RainError) -> ChallengeRecord? in
                try StoreOperations.recordWrongAttempt(
                    db, challengeID: challengeID, maxWrongAttempts: maxWrongAttempts, now: now)
            }
        }
    }

    /// Completes a login (see `AuthorityStore.completeLogin`), in one transaction.
    package func completeLogin(_ login: LoginCompletion) async throws(RainError) -> LoginCompletionOutcome {
        try await perform { db throws(RainError) in
            try db.transaction("complete a login") { () throws(RainError) -> LoginCompletionOutcome in
                try StoreOperations.completeLogin(db, login)
            }
        }
    }

    /// The outcome recorded with this idempotency key (see `AuthorityStore.idempotentOutcome`).
    package func idempotentOutcome(keyHash: [UInt8], now: Date) async throws(RainError) -> IdempotentOutcome? {
        try await perform { db throws(RainError) in
            try StoreOperations.idempotentOutcome(db, keyHash: keyHash, now: now)
        }
    }

    /// Forgets a claim without an outcome (see `AuthorityStore.releaseIdempotentClaim`).
    package func releaseIdempotentClaim(keyHash: [UInt8]) async throws(RainError) {
        try await perform { db throws(RainError) in try StoreOperations.releaseIdempotentClaim(db, keyHash: keyHash) }
    }

    /// Revokes the unrevoked session holding this refresh-token hash as its current or previous one.
    @discardableResult
    package func revokeSession(appID: String, refreshHash: [UInt8], reason: String, now: Date) async throws(RainError)
        -> Bool
    {
        try await perform { db throws(RainError) in
            try StoreOperations.revokeSession(db, appID: appID, refreshHash: refreshHash, reason: reason, now: now)
        }
    }

    /// Revokes the live session with this id.
    @discardableResult
    package func revokeSession(id: String, reason: String, now: Date) async throws(RainError) -> Bool {
        try await perform { db throws(RainError) in
            try StoreOperations.revokeSession(db, id: id, reason: reason, now: now)
        }
    }

    /// Step 1 of a device key move (see `AuthorityStore.rebindDevice`), in one transaction.
    @discardableResult
    package func rebindDevice(deviceID: String, currentKeys: [[UInt8]], newKey: [UInt8]) async throws(RainError)
        -> Int
    {
        try await perform { db throws(RainError) in
            try db.transaction("move a device to a new key") { () throws(RainError) -> Int in
                try StoreOperations.rebindDevice(db, deviceID: deviceID, currentKeys: currentKeys, newKey: newKey)
            }
        }
    }

    /// Step 2 of a device key move (see `AuthorityStore.confirmDeviceKey`), in one transaction.
    @discardableResult
    package func confirmDeviceKey(deviceID: String, key: [UInt8]) async throws(RainError) -> Int {
        try await perform { db throws(RainError) in
            try db.transaction("confirm a device's new key") { () throws(RainError) -> Int in
                try StoreOperations.confirmDeviceKey(db, deviceID: deviceID, key: key)
            }
        }
    }

    /// Runs one refresh (see `AuthorityStore.refreshSession`) in one transaction, which keeps every
    /// other refresh of the session out from the lookup to the commit.
    package func refreshSession<Verdict: Sendable>(
        appID: String, refreshHash: [UInt8], now: Date,
        decide: @escaping @Sendable (RefreshCandidate?) -> (change: SessionRefreshChange, verdict: Verdict)
    ) async throws(RainError) -> Verdict {
        try await perform { db throws(RainError) in
            try db.transaction("refresh a session") { () throws(RainError) -> Verdict in
                try StoreOperations.refreshSession(db, appID: appID, refreshHash: refreshHash, now: now, decide: decide)
            }
        }
    }

    /// Marks the session's current pair used on its first use (see `AuthorityStore.markPairUsed`).
    @discardableResult
    package func markPairUsed(sessionID: String, accessHash: [UInt8]) async throws(RainError) -> Bool {
        try await perform { db throws(RainError) in
            try StoreOperations.markPairUsed(db, sessionID: sessionID, accessHash: accessHash)
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
        try await perform { db throws(RainError) in try StoreOperations.sessions(db, appID: appID, accountID: accountID) }
    }

    /// The wallet of `accountID`, with its key material, or nil when the account has none.
    package func wallet(accountID: String) async throws(RainError) -> WalletRecord? {
        try await perform { db throws(RainError) in try StoreOperations.wallet(db, accountID: accountID) }
    }

    /// Every wallet that lacks its entropy or an address, oldest first.
    package func walletsMissingKeys() async throws(RainError) -> [WalletRecord] {
        try await perform { db throws(RainError) in try StoreOperations.walletsMissingKeys(db) }
    }

    /// Stores a wallet's keys in one statement, only if its entropy ciphertext is still
    /// `expectedCiphertext` (nil: still none), so two backfills never replace each other's entropy.
    @discardableResult
    package func storeWalletKeys(walletID: String, keys: WalletKeyMaterial, expectedCiphertext: [UInt8]?)
        async throws(RainError) -> Bool
    {
        try await perform { db throws(RainError) in
            try StoreOperations.storeWalletKeys(db, walletID: walletID, keys: keys, expectedCiphertext: expectedCiphertext)
        }
    }

    /// Deletes old challenges, revoked sessions, old rotated-out refresh hashes and old SMS budget
    /// slots, in one transaction.
    @discardableResult
    package func prune(
        challengesExpiredBefore: Date, sessionsRevokedBefore: Date, refreshTokensRetiredBefore: Date,
        smsSlotsTakenBefore: Date
    ) async throws(RainError) -> PruneResult {
        try await perform { db throws(RainError) in
            try db.transaction("prune old challenges and sessions") { () throws(RainError) -> PruneResult in
                var result = try StoreOperations.prune(
                    db, challengesExpiredBefore: challengesExpiredBefore, sessionsRevokedBefore: sessionsRevokedBefore,
                    refreshTokensRetiredBefore: refreshTokensRetiredBefore)
                result.smsSlotsDeleted = try StoreOperations.pruneSMSSlots(db, takenBefore: smsSlotsTakenBefore)
                return result
            }
        }
    }

    // MARK: - SMS budget (issue 19)

    /// Takes a slot of the SMS budget (see `AuthorityStore.takeSMSSlot`), in one transaction.
    package func takeSMSSlot(id: String, limit: Int, window: Duration, now: Date) async throws(RainError)
        -> SMSSlotOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("take an SMS budget slot") { () throws(RainError) -> SMSSlotOutcome in
                try StoreOperations.takeSMSSlot(db, id: id, limit: limit, window: window, now: now)
            }
        }
    }

    /// Gives an SMS budget slot back (see `AuthorityStore.releaseSMSSlot`).
    package func releaseSMSSlot(id: String) async throws(RainError) {
        try await perform { db throws(RainError) in try StoreOperations.releaseSMSSlot(db, id: id) }
    }

    // MARK: - Backup contacts

    /// The account of `appID` that owns `contact`, or nil.
    package func contactOwner(appID: String, contact: RainWalletContact) async throws(RainError) -> String? {
        try await perform { db throws(RainError) in try StoreOperations.accountID(db, appID: appID, contact: contact) }
    }

    /// Completes a contact verification (see `AuthorityStore.completeContactVerification`), in one
    /// transaction.
    package func completeContactVerification(_ v: ContactVerificationCompletion) async throws(RainError)
        -> ContactVerificationOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("complete a contact verification") { () throws(RainError) -> ContactVerificationOutcome in
                try StoreOperations.completeContactVerification(db, v)
            }
        }
    }

    // MARK: - Passkeys

    /// Stores a pending ceremony.
    package func insertPasskeyCeremony(_ ceremony: NewPasskeyCeremony) async throws(RainError) {
        try await perform { db throws(RainError) in try StoreOperations.insertPasskeyCeremony(db, ceremony) }
    }

    /// Takes a ceremony (see `AuthorityStore.takePasskeyCeremony`), in one transaction: of
    /// concurrent takes exactly one finds it pending.
    package func takePasskeyCeremony(
        id: String, appID: String, deviceID: String, now: Date, claim: IdempotentClaim?
    ) async throws(RainError) -> PasskeyCeremonyTake {
        try await perform { db throws(RainError) in
            try db.transaction("take a passkey ceremony") { () throws(RainError) -> PasskeyCeremonyTake in
                try StoreOperations.takePasskeyCeremony(
                    db, id: id, appID: appID, deviceID: deviceID, now: now, claim: claim)
            }
        }
    }

    /// The credential with this id and rpId in `appID`.
    package func passkeyCredential(id: [UInt8], appID: String, rpID: String) async throws(RainError)
        -> PasskeyCredentialRecord?
    {
        try await perform { db throws(RainError) in
            try StoreOperations.passkeyCredential(db, id: id, appID: appID, rpID: rpID)
        }
    }

    /// The account's credentials, oldest first.
    package func passkeyCredentials(accountID: String) async throws(RainError) -> [PasskeyCredentialRecord] {
        try await perform { db throws(RainError) in try StoreOperations.passkeyCredentials(db, accountID: accountID) }
    }

    /// Creates an account from a passkey (see `AuthorityStore.completePasskeySignUp`), in one transaction.
    package func completePasskeySignUp(_ signUp: PasskeySignUpCompletion) async throws(RainError) -> LoginRecord {
        try await perform { db throws(RainError) in
            try db.transaction("complete a passkey sign-up") { () throws(RainError) -> LoginRecord in
                try StoreOperations.completePasskeySignUp(db, signUp)
            }
        }
    }

    /// Attaches a credential to its account (see `AuthorityStore.addPasskeyCredential`), in one transaction.
    package func addPasskeyCredential(_ credential: PasskeyCredentialRecord, idempotency: IdempotentOutcomeInput?)
        async throws(RainError)
    {
        try await perform { db throws(RainError) in
            try db.transaction("add a passkey") { () throws(RainError) in
                try StoreOperations.addPasskeyCredential(db, credential, idempotency: idempotency)
            }
        }
    }

    /// Records a passkey login (see `AuthorityStore.completePasskeyLogin`), in one transaction: two
    /// logins with one counter value never both pass the counter check.
    package func completePasskeyLogin(_ login: PasskeyLoginCompletion) async throws(RainError) -> LoginRecord {
        try await perform { db throws(RainError) in
            try db.transaction("complete a passkey login") { () throws(RainError) -> LoginRecord in
                try StoreOperations.completePasskeyLogin(db, login)
            }
        }
    }
}
