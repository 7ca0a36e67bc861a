import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainWire
import Synchronization

/// Where the authority keeps accounts, contacts, wallets, login challenges and sessions.
///
/// Each method is one use case and runs as one transaction, so a crash never leaves an account
/// without its wallet or a challenge both used and pending. SQL stays behind this protocol: the
/// embedded default is `SQLiteAuthorityStore`; a PostgreSQL store can implement the same calls.
/// Implementations never run blocking work on the Swift concurrency pool.
///
/// Every method throws `RainError` only: RAIN_502 when the store fails.
package protocol AuthorityStore: Sendable {
    /// How many of the store's operations failed (threw RAIN_502) since it opened: what the
    /// authority's `store_errors_total` metric reports.
    var failedOperationCount: Int { get }

    /// The schema version the store is at after its migrations ran.
    func schemaVersion() async throws(RainError) -> Int

    /// The account that owns `contact` in `appID`, with its wallet, or nil.
    func account(appID: String, contact: RainWalletContact) async throws(RainError) -> AccountRecord?

    /// Records a new pending challenge, unless a send limit refuses it.
    ///
    /// In one write transaction: derives the account key (the target account of a verification,
    /// else the account id when the contact belongs to an account, else `contact:<kind>:<value>`),
    /// then checks `limits` against the challenges already stored in the challenge's app, of every
    /// purpose and state, counted by `created_at` up to `challenge.createdAt`:
    /// - `contact_cooldown`: the contact's last send is less than `limits.contactCooldown` old
    ///   (retry at that send + the cooldown);
    /// - `contact_window`: the contact already has `limits.contactMaxSends` sends within
    ///   `limits.contactWindow` (retry when the oldest counted one leaves the window);
    /// - `account_window`: the account key already has `limits.accountMaxSends` sends within
    ///   `limits.accountWindow` (same);
    /// and against the challenges of every app:
    /// - `contact_all_apps_window`: the contact already has `limits.contactAllAppsMaxSends` sends
    ///   within `limits.contactAllAppsWindow`, whatever their app (same);
    /// - `source_window`: the challenge's source already has `limits.sourceMaxSends` sends within
    ///   `limits.sourceWindow` (same; not checked when the challenge has no source).
    /// When several apply, the one with the latest retry time is returned; nothing is then changed.
    /// Otherwise it retires every pending challenge of the app, device and purpose (resend
    /// replaces, switching contact retires), retires the oldest pending, unexpired challenges of
    /// the account key (across devices) until fewer than `maxActivePerAccount` remain, then
    /// inserts the challenge. Because the check and the insert share the transaction, two
    /// concurrent sends can never both pass the last free slot.
    /// - Returns: `.inserted` with the ids of the retired challenges and the account key used, or
    ///   `.limited` with the limit hit and the earliest time a send can pass it.
    func insertChallenge(_ challenge: NewChallenge, maxActivePerAccount: Int, limits: CodeSendLimits)
        async throws(RainError) -> ChallengeInsertionOutcome

    /// Takes a send-limit slot for a challenge whose code is about to be handed to a provider: the
    /// same locks and limits as `insertChallenge`, but the challenge is stored as a reservation
    /// (counted by every limit, never confirmable) and nothing pending is retired, so a failed
    /// delivery leaves the code already delivered usable.
    /// - Returns: `.inserted` (no retired ids yet) with the account key, or `.limited`.
    func reserveChallenge(_ challenge: NewChallenge, limits: CodeSendLimits) async throws(RainError)
        -> ChallengeInsertionOutcome

    /// Makes a reservation the pending challenge once the provider accepted its code, retiring
    /// what `insertChallenge` would have retired, in one transaction.
    /// - Returns: the ids of the retired challenges.
    func activateChallenge(id: String, maxActivePerAccount: Int) async throws(RainError) -> [String]

    /// Deletes a reservation whose code the provider refused before accepting it: its send-limit
    /// slot is given back.
    func releaseChallenge(id: String) async throws(RainError)

    /// The challenge with this id, whatever its state, or nil.
    func challenge(id: String) async throws(RainError) -> ChallengeRecord?

    /// The retired challenges of `purpose` for one app on one device that have not expired at
    /// `now`, newest first, at most `limit` (the codes a Resend replaced).
    func retiredChallenges(appID: String, deviceID: String, purpose: ChallengePurpose, now: Date, limit: Int)
        async throws(RainError) -> [ChallengeRecord]

    /// Takes a slot of the wrong-guess budgets for a code about to be checked, in one transaction
    /// under the source's and the device key's locks (so concurrent checks never both take the last
    /// slot): counts the stored guesses of `guess.deviceKey` and of `guess.source` within
    /// `limits.guessWindow` before `guess.guessedAt` (across every app and account); at
    /// `deviceKeyMaxWrongGuesses` or `sourceMaxWrongGuesses` it stores nothing and returns
    /// `.limited` with the budget that clears last and when; else it stores the guess. The slot
    /// stays counted unless `releaseCodeGuess` gives it back (the code was right).
    func reserveCodeGuess(_ guess: NewCodeGuess, limits: CodeSendLimits) async throws(RainError)
        -> CodeGuessReservation

    /// Deletes the guess slot `id`: the code it checked was right, and only wrong codes count.
    func releaseCodeGuess(id: String) async throws(RainError)

    /// Retires a challenge if it is still pending (a failed delivery).
    func retireChallenge(id: String) async throws(RainError)

    /// Counts a wrong code against a pending, unexpired challenge; the attempt that reaches
    /// `maxWrongAttempts` locks it.
    /// - Returns: the challenge after the update (unchanged when it was no longer pending), or nil
    ///   when it does not exist.
    func recordWrongAttempt(challengeID: String, maxWrongAttempts: Int, now: Date) async throws(RainError)
        -> ChallengeRecord?

    /// Completes a login in one transaction: marks the challenge used (only if it is still pending
    /// and unexpired for that app and device), finds the contact's account or creates the account,
    /// its verified contact and its wallet record, revokes the account's other sessions
    /// (`revoked_elsewhere` on other devices, `replaced` on the same one) and stores the new session.
    /// - Returns: `.challengeUnavailable` with the challenge as it is when it could not be used.
    /// - Throws: RAIN_404 when an existing account has no wallet record.
    func completeLogin(_ login: LoginCompletion) async throws(RainError) -> LoginCompletionOutcome

    /// The outcome a call with this idempotency key (its keyed hash) recorded (a confirm's
    /// login, a passkey finish, a contact verification, or a passkey finish still running), while
    /// its challenge's or ceremony's lifetime lasts; nil when there is none.
    func idempotentOutcome(keyHash: [UInt8], now: Date) async throws(RainError) -> IdempotentOutcome?

    /// Records the outcome of a call whose effect is outside the store (a signature), unless its
    /// key has one already: the first outcome stays.
    /// - Returns: the outcome the key holds now (this one, or the first if another call with the
    ///   same key got there before).
    func recordIdempotentOutcome(_ input: IdempotentOutcomeInput, accountID: String, walletID: String, now: Date)
        async throws(RainError) -> IdempotentOutcome

    /// Forgets the claim a passkey finish took on its idempotency key with its ceremony
    /// (`takePasskeyCeremony`) when the finish failed before recording an outcome, so a repeat is
    /// told the ceremony is used instead of "still running". A recorded outcome is kept.
    func releaseIdempotentClaim(keyHash: [UInt8]) async throws(RainError)

    /// Revokes the unrevoked session of `appID` whose current or previous refresh-token hash is
    /// this one (a device that lost a refresh reply logs out with the previous token).
    /// - Returns: whether a session was revoked.
    @discardableResult
    func revokeSession(appID: String, refreshHash: [UInt8], reason: String, now: Date) async throws(RainError) -> Bool

    /// Revokes the session with this id if it is still live (a token used by another device key:
    /// the whole family is burned).
    /// - Returns: whether it was revoked.
    @discardableResult
    func revokeSession(id: String, reason: String, now: Date) async throws(RainError) -> Bool

    /// Step 1 of a device key move, in one transaction: every live session of `deviceID` bound to
    /// one of `currentKeys` gets `newKey` as its pending key (a session already bound to `newKey`
    /// is left as it is). Idempotent.
    /// - Returns: how many sessions were changed.
    @discardableResult
    func rebindDevice(deviceID: String, currentKeys: [[UInt8]], newKey: [UInt8]) async throws(RainError) -> Int

    /// Step 2, in one transaction: every live session of `deviceID` whose pending key is `key`
    /// becomes bound to `key` alone. Idempotent.
    /// - Returns: how many sessions were changed.
    @discardableResult
    func confirmDeviceKey(deviceID: String, key: [UInt8]) async throws(RainError) -> Int

    /// Runs one refresh in one transaction that holds the write lock from the lookup to the commit,
    /// so two refreshes of the same token are serialized: the second sees the first's rotation.
    ///
    /// Finds the session of `appID` by this refresh-token hash: its current one, else the previous
    /// one (rotated out at `SessionRecord.rotatedAt`), else an older one of the same family. Calls
    /// `decide` exactly once with what it found (nil when nothing), inside the transaction, then
    /// applies the change: `.rotate` only to a live session found by its current hash (anything
    /// else is RAIN_502); `.revoke` to the session if still live. `decide` must not block.
    /// - Returns: the verdict `decide` returned.
    func refreshSession<Verdict: Sendable>(
        appID: String, refreshHash: [UInt8], now: Date,
        decide: @escaping @Sendable (RefreshCandidate?) -> (change: SessionRefreshChange, verdict: Verdict)
    ) async throws(RainError) -> Verdict

    /// Marks the session's current pair used (see `SessionRecord.isPairUsed`): one conditional
    /// `UPDATE` that changes the row only while the session still holds `accessHash` as its
    /// access-token hash and the mark is not set yet, so only a pair's first use writes, and a
    /// mark that arrives after a rotation does not touch the new pair.
    /// - Returns: whether the row changed.
    @discardableResult
    func markPairUsed(sessionID: String, accessHash: [UInt8]) async throws(RainError) -> Bool

    /// The session of `appID` whose current access-token hash is this one, whatever its state,
    /// with its account, wallet id (empty when the account has no wallet) and contacts; nil when
    /// there is none.
    func accountAccess(appID: String, accessHash: [UInt8]) async throws(RainError) -> AccountAccess?

    /// `accountAccess` and, when a session was found, its account's passkeys: one trip to the store
    /// for the hottest read (Account/Get). A default implementation makes the two calls.
    func accountAccessWithPasskeys(appID: String, accessHash: [UInt8]) async throws(RainError)
        -> (access: AccountAccess, passkeys: [PasskeyCredentialRecord])?

    /// `accountAccess` and, when a session was found, its account's wallet (nil when it has none):
    /// one trip to the store for Wallet/Get. A default implementation makes the two calls.
    func accountAccessWithWallet(appID: String, accessHash: [UInt8]) async throws(RainError)
        -> (access: AccountAccess, wallet: WalletRecord?)?

    /// The wallet of an account, with its key material, or nil when the account has none.
    func wallet(accountID: String) async throws(RainError) -> WalletRecord?

    /// Every wallet that lacks its entropy or one of its addresses (created before wallets had
    /// keys, or before a chain was added), oldest first.
    func walletsMissingKeys() async throws(RainError) -> [WalletRecord]

    /// Stores a wallet's key material in one statement, but only if its entropy ciphertext is still
    /// `expectedCiphertext` (nil: it still has none), so concurrent backfills never replace each
    /// other's entropy.
    /// - Returns: whether the wallet was updated.
    @discardableResult
    func storeWalletKeys(walletID: String, keys: WalletKeyMaterial, expectedCiphertext: [UInt8]?)
        async throws(RainError) -> Bool

    /// The sessions of an account, oldest first.
    func sessions(appID: String, accountID: String) async throws(RainError) -> [SessionRecord]

    /// Deletes challenges and passkey ceremonies that expired before `challengesExpiredBefore`
    /// (callers keep challenges at least `CodeSendLimits.longestWindow`, since the send limits
    /// count them), sessions revoked before `sessionsRevokedBefore` (with their rotated-out refresh
    /// hashes), rotated-out refresh hashes older than the previous generation retired before
    /// `refreshTokensRetiredBefore`, wrong guesses made before `challengesExpiredBefore` (the
    /// longest window covers the guess window too), and the SMS budget's slots taken before
    /// `smsSlotsTakenBefore` (callers keep them at least the budget's window, which counts them).
    @discardableResult
    func prune(
        challengesExpiredBefore: Date, sessionsRevokedBefore: Date, refreshTokensRetiredBefore: Date,
        smsSlotsTakenBefore: Date
    ) async throws(RainError) -> PruneResult

    // MARK: SMS budget

    /// Takes a slot of the authority's SMS budget, in one transaction that keeps every other take
    /// out from the count to the insert (SQLite: its write lock; PostgreSQL: one advisory lock every
    /// instance takes), so the instances sharing the store never hand out more than `limit` slots
    /// within any `window`: counts the slots taken after `now - window` (by any instance); at
    /// `limit` or more it changes nothing and returns `.full` with when a slot frees (the counted
    /// slot whose leaving the window makes room, taken + `window`); else it stores slot `id`,
    /// taken at `now`.
    func takeSMSSlot(id: String, limit: Int, window: Duration, now: Date) async throws(RainError) -> SMSSlotOutcome

    /// Deletes the slot `id` (its message was refused before the gateway accepted it): its room is
    /// given back.
    func releaseSMSSlot(id: String) async throws(RainError)

    // MARK: Backup contacts

    /// The id of the account of `appID` that owns `contact` (verified or not), or nil.
    func contactOwner(appID: String, contact: RainWalletContact) async throws(RainError) -> String?

    /// Completes a contact verification in one transaction: marks the challenge used (only if it is
    /// a pending, unexpired verification challenge of that app, device and account), then checks
    /// the contact's owner again: another account's contact retires the challenge and is reported
    /// (`.ownedByAnotherAccount`), never moved; this account's contact is marked verified; a free
    /// contact is attached to the account, verified (added beside any contact of its kind).
    /// Pending login challenges keyed by the contact move to the account's limit.
    func completeContactVerification(_ verification: ContactVerificationCompletion) async throws(RainError)
        -> ContactVerificationOutcome

    // MARK: Passkeys

    /// Stores a begun passkey ceremony (state pending).
    func insertPasskeyCeremony(_ ceremony: NewPasskeyCeremony) async throws(RainError)

    /// Takes a ceremony for its finish or its cancel: when it is pending, unexpired and bound to
    /// `appID` and `deviceID`, marks it used and returns it; otherwise says why not. Single use:
    /// of concurrent takes, one wins.
    ///
    /// With a `claim`, an outcome (or claim) already recorded for its key is returned
    /// (`.repeated`) instead, and a take that wins records the claim in the same transaction.
    func takePasskeyCeremony(id: String, appID: String, deviceID: String, now: Date, claim: IdempotentClaim?)
        async throws(RainError) -> PasskeyCeremonyTake

    /// The credential with this id and rpId in `appID`, or nil.
    func passkeyCredential(id: [UInt8], appID: String, rpID: String) async throws(RainError) -> PasskeyCredentialRecord?

    /// The rpIds the credential with this id is registered for in `appID` (none when it is unknown).
    func passkeyCredentialDomains(id: [UInt8], appID: String) async throws(RainError) -> [String]

    /// The account's credentials, oldest first (all rpIds).
    func passkeyCredentials(accountID: String) async throws(RainError) -> [PasskeyCredentialRecord]

    /// Creates the account, its wallet, its first credential and a session, revoking nothing else
    /// (the account is new). - Throws: RAIN_102 `credential_already_registered` when the
    /// credential id exists (any account); nothing is then stored.
    func completePasskeySignUp(_ signUp: PasskeySignUpCompletion) async throws(RainError) -> LoginRecord

    /// Attaches a credential to an existing account; with `idempotency`, records the finish's
    /// outcome in the same transaction.
    /// - Throws: RAIN_102 `credential_already_registered` when the credential id exists.
    func addPasskeyCredential(_ credential: PasskeyCredentialRecord, idempotency: IdempotentOutcomeInput?)
        async throws(RainError)

    /// Removes the account's credential `id` in one transaction, unless it is the account's last way
    /// to log in (no other passkey of any domain, no contact): then nothing changes.
    func removePasskeyCredential(id: [UInt8], accountID: String) async throws(RainError) -> PasskeyRemoval

    /// Records a passkey login in one transaction: the sign count moves forward (a counter that
    /// does not increase while either side is non-zero is refused), `last_used_at` and the backup
    /// state are updated, the account's sessions on other devices are revoked and the device's
    /// older ones replaced, and the new session is stored.
    /// - Throws: RAIN_102 `credential_unknown` when the credential vanished, `sign_count_regression`
    ///   when the counter did not increase; nothing is then changed.
    func completePasskeyLogin(_ login: PasskeyLoginCompletion) async throws(RainError) -> LoginRecord

    /// Closes the store; later calls throw RAIN_502.
    /// The audit anchor with the most entries among `deviceKeys` (their stored forms), or nil when
    /// none has one.
    func auditAnchor(deviceKeys: [String]) async throws(RainError) -> AuditAnchorRecord?

    /// Moves the anchor of `anchor.deviceKey` forward to `anchor`, in one transaction: stored when
    /// the key has none or one with fewer entries; refused, changing nothing, when it has more
    /// (`behind`) or as many with another hash (`conflict`).
    func anchorAuditHead(_ anchor: AuditAnchorRecord) async throws(RainError) -> AuditAnchorOutcome

    /// Records `check` as the store's master-key check unless it holds one, in one transaction
    /// that instances starting together take one after the other: `.recorded` on a store without
    /// accounts, `.adopted` on one with accounts (written by a build without the check), or
    /// `.existing` with the check already stored (compared by the caller; never replaced).
    func recordKeyCheck(_ check: StoreKeyCheck, at date: Date) async throws(RainError) -> StoreKeyCheckOutcome

    /// The store's master-key check, or nil when none is recorded yet.
    func keyCheck() async throws(RainError) -> StoreKeyCheck?

    /// Whether the store holds data a master key protects: an account, or a recorded key check.
    func holdsKeyedData() async throws(RainError) -> Bool

    func close() async

    /// The count of committed writes, when this process is the store's only writer (SQLite, whose
    /// file is the locked state directory's); nil where others may write too (PostgreSQL shared
    /// by instances), and by default.
    var soleWriterChanges: StoreChangeCount? { get }

    /// The schema versions found when the store opened, when it has a schema (nil by default):
    /// the authority warns when a newer build migrated it (`SchemaCompatibility.isStoreNewer`).
    var schemaCompatibility: SchemaCompatibility? { get }
}

extension AuthorityStore {
    /// `prune` that keeps every SMS budget slot.
    @discardableResult
    package func prune(challengesExpiredBefore: Date, sessionsRevokedBefore: Date, refreshTokensRetiredBefore: Date)
        async throws(RainError) -> PruneResult
    {
        try await prune(
            challengesExpiredBefore: challengesExpiredBefore, sessionsRevokedBefore: sessionsRevokedBefore,
            refreshTokensRetiredBefore: refreshTokensRetiredBefore, smsSlotsTakenBefore: .distantPast)
    }

    /// `takePasskeyCeremony` without an idempotency claim.
    package func takePasskeyCeremony(id: String, appID: String, deviceID: String, now: Date) async throws(RainError)
        -> PasskeyCeremonyTake
    {
        try await takePasskeyCeremony(id: id, appID: appID, deviceID: deviceID, now: now, claim: nil)
    }

    /// `addPasskeyCredential` without an idempotency key.
    package func addPasskeyCredential(_ credential: PasskeyCredentialRecord) async throws(RainError) {
        try await addPasskeyCredential(credential, idempotency: nil)
    }

    /// No schema of its own to check.
    package var schemaCompatibility: SchemaCompatibility? { nil }

    /// Others may write: no count of changes stands for all of them.
    package var soleWriterChanges: StoreChangeCount? { nil }

    /// Two calls: `accountAccess`, then `passkeyCredentials`.
    package func accountAccessWithPasskeys(appID: String, accessHash: [UInt8]) async throws(RainError)
        -> (access: AccountAccess, passkeys: [PasskeyCredentialRecord])?
    {
        guard let access = try await accountAccess(appID: appID, accessHash: accessHash) else { return nil }
        return (access, try await passkeyCredentials(accountID: access.account.id))
    }

    /// Two calls: `accountAccess`, then `wallet`.
    package func accountAccessWithWallet(appID: String, accessHash: [UInt8]) async throws(RainError)
        -> (access: AccountAccess, wallet: WalletRecord?)?
    {
        guard let access = try await accountAccess(appID: appID, accessHash: accessHash) else { return nil }
        return (access, try await wallet(accountID: access.account.id))
    }
}

extension AuthorityStore {
    /// A store that keeps no count (a test's fake) reports none.
    package var failedOperationCount: Int { 0 }
}

/// How many transactions that wrote have committed: it moves after each such commit and before
/// any of its callers is answered, so a value taken before a read and found unchanged after it
/// says nothing was written since (the device's cached reads, `ReadFreshness`).
package final class StoreChangeCount: Sendable {
    private let count = Atomic<UInt64>(0)

    package init() {}

    /// The count now.
    package var value: UInt64 { count.load(ordering: .acquiring) }

    /// One more write committed.
    func advance() { count.add(1, ordering: .releasing) }
}
