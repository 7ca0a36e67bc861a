import Foundation
import RainAuthorityAPI
import RainCore
import RainWire

/// Where the authority keeps accounts, contacts, wallets, login challenges and sessions.
///
/// Each method is one use case and runs as one transaction, so a crash never leaves an account
/// without its wallet or a challenge both used and pending. SQL stays behind this protocol: the
/// embedded default is `SQLiteAuthorityStore`; a PostgreSQL store can implement the same calls.
/// Implementations never run blocking work on the Swift concurrency pool.
///
/// Every method throws `RainError` only: RAIN_502 when the store fails.
package protocol AuthorityStore: Sendable {
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
    /// - `contactCooldown`: the contact's last send is less than `limits.contactCooldown` old
    ///   (retry at that send + the cooldown);
    /// - `contactWindow`: the contact already has `limits.contactMaxSends` sends within
    ///   `limits.contactWindow` (retry when the oldest counted one leaves the window);
    /// - `accountWindow`: the account key already has `limits.accountMaxSends` sends within
    ///   `limits.accountWindow` (same);
    /// and against the challenges of every app:
    /// - `contactAllAppsWindow`: the contact already has `limits.contactAllAppsMaxSends` sends
    ///   within `limits.contactAllAppsWindow`, whatever their app (same);
    /// - `sourceWindow`: the challenge's source already has `limits.sourceMaxSends` sends within
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

    /// Issue 20: the outcome a call with this idempotency key (its keyed hash) recorded (a confirm's
    /// login, a passkey finish, a contact verification, or a passkey finish still running), while
    /// its challenge's or ceremony's lifetime lasts; nil when there is none.
    func idempotentOutcome(keyHash: [UInt8], now: Date) async throws(RainError) -> IdempotentOutcome?

    /// Issue 20: forgets the claim a passkey finish took on its idempotency key with its ceremony
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
    /// `refreshTokensRetiredBefore`, and the SMS budget's slots taken before `smsSlotsTakenBefore`
    /// (issue 19; callers keep them at least the budget's window, which counts them).
    @discardableResult
    func prune(
        challengesExpiredBefore: Date, sessionsRevokedBefore: Date, refreshTokensRetiredBefore: Date,
        smsSlotsTakenBefore: Date
    ) async throws(RainError) -> PruneResult

    // MARK: SMS budget (issue 19)

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

    // MARK: Backup contacts (issue 4)

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

    // MARK: Passkeys (issue 4)

    /// Stores a begun passkey ceremony (state pending).
    func insertPasskeyCeremony(_ ceremony: NewPasskeyCeremony) async throws(RainError)

    /// Takes a ceremony for its finish or its cancel: when it is pending, unexpired and bound to
    /// `appID` and `deviceID`, marks it used and returns it; otherwise says why not. Single use:
    /// of concurrent takes, one wins.
    ///
    /// Issue 20: with a `claim`, an outcome (or claim) already recorded for its key is returned
    /// (`.repeated`) instead, and a take that wins records the claim in the same transaction.
    func takePasskeyCeremony(id: String, appID: String, deviceID: String, now: Date, claim: IdempotentClaim?)
        async throws(RainError) -> PasskeyCeremonyTake

    /// The credential with this id and rpId in `appID`, or nil.
    func passkeyCredential(id: [UInt8], appID: String, rpID: String) async throws(RainError) -> PasskeyCredentialRecord?

    /// The account's credentials, oldest first (all rpIds).
    func passkeyCredentials(accountID: String) async throws(RainError) -> [PasskeyCredentialRecord]

    /// Creates the account, its wallet, its first credential and a session, revoking nothing else
    /// (the account is new). - Throws: RAIN_102 `credential_already_registered` when the
    /// credential id exists (any account); nothing is then stored.
    func completePasskeySignUp(_ signUp: PasskeySignUpCompletion) async throws(RainError) -> LoginRecord

    /// Attaches a credential to an existing account; with `idempotency`, records the finish's
    /// outcome in the same transaction (issue 20).
    /// - Throws: RAIN_102 `credential_already_registered` when the credential id exists.
    func addPasskeyCredential(_ credential: PasskeyCredentialRecord, idempotency: IdempotentOutcomeInput?)
        async throws(RainError)

    /// Records a passkey login in one transaction: the sign count moves forward (a counter that
    /// does not increase while either side is non-zero is refused), `last_used_at` and the backup
    /// state are updated, the account's sessions on other devices are revoked and the device's
    /// older ones replaced, and the new session is stored.
    /// - Throws: RAIN_102 `credential_unknown` when the credential vanished, `sign_count_regression`
    ///   when the counter did not increase; nothing is then changed.
    func completePasskeyLogin(_ login: PasskeyLoginCompletion) async throws(RainError) -> LoginRecord

    /// Closes the store; later calls throw RAIN_502.
    func close() async

    /// The store's direct reader, when it has one (nil by default): the hottest session reads
    /// answered on a thread of the store's own, without the Swift concurrency pool.
    var directReader: (any DirectStoreReader)? { get }
}

/// Session reads that a store answers on a thread of its own and hands to a completion, instead of
/// through `async`: the daemon's hottest calls (Account/Get, Wallet/Get) then cross threads twice
/// (event loop → reader → event loop) instead of four times (loop → pool → store → pool → loop).
///
/// Each read is one read transaction, so it sees a consistent snapshot of what the store's writes
/// committed before it started. `completion` runs on the reader's thread and must not block.
package protocol DirectStoreReader: Sendable {
    /// `AuthorityStore.accountAccessWithPasskeys`, answered to `completion`.
    func accountAccessWithPasskeys(
        appID: String, accessHash: [UInt8],
        completion: @escaping @Sendable (Result<(access: AccountAccess, passkeys: [PasskeyCredentialRecord])?, RainError>) -> Void
    )

    /// `AuthorityStore.accountAccessWithWallet`, answered to `completion`.
    func accountAccessWithWallet(
        appID: String, accessHash: [UInt8],
        completion: @escaping @Sendable (Result<(access: AccountAccess, wallet: WalletRecord?)?, RainError>) -> Void)
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

    /// No direct reader: every read goes through the async API.
    package var directReader: (any DirectStoreReader)? { nil }

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

/// An account and its wallet.
package struct AccountRecord: Sendable, Equatable {
    /// `acct_…`
    package var id: String
    /// The app (tenant) the account belongs to.
    package var appID: String
    /// `wal_…`
    package var walletID: String
    /// When the account was created.
    package var createdAt: Date

    /// Creates a record.
    package init(id: String, appID: String, walletID: String, createdAt: Date) {
        self.id = id
        self.appID = appID
        self.walletID = walletID
        self.createdAt = createdAt
    }
}

/// The life of a login challenge.
package enum ChallengeState: String, Sendable, Equatable, CaseIterable {
    /// Waiting for the code.
    case pending
    /// Confirmed: a session was issued.
    case used
    /// Replaced by a resend, another contact on the device, or a newer code for the account.
    case retired
    /// Too many wrong codes.
    case locked
}

/// What a code challenge is for.
package enum ChallengePurpose: String, Sendable, Equatable, CaseIterable {
    /// A login code: confirming it opens a session (`confirmLoginCode`).
    case login
    /// A backup-contact verification: confirming it attaches the contact to its target account
    /// (`confirmContactVerification`). The two never cross.
    case verifyContact = "verify_contact"
}

/// A challenge to insert.
package struct NewChallenge: Sendable, Equatable {
    /// `chl_…`
    package var id: String
    /// The app (tenant).
    package var appID: String
    /// The device that asked for the code.
    package var deviceID: String
    /// A normalized contact.
    package var contact: RainWalletContact
    /// The keyed hash of the code (never the code).
    package var codeHash: [UInt8]
    /// When it was created.
    package var createdAt: Date
    /// When the code stops working.
    package var expiresAt: Date
    /// What the code is for.
    package var purpose: ChallengePurpose
    /// The account a verification attaches the contact to; nil for a login.
    package var targetAccountID: String?
    /// Where the send comes from (`SendSource.key`), counted by `CodeSendLimits.sourceMaxSends`;
    /// nil counts against no source limit.
    package var source: String?

    /// Creates a challenge to insert.
    package init(
        id: String, appID: String, deviceID: String, contact: RainWalletContact, codeHash: [UInt8], createdAt: Date,
        expiresAt: Date, purpose: ChallengePurpose = .login, targetAccountID: String? = nil, source: String? = nil
    ) {
        self.source = source
        self.id = id
        self.appID = appID
        self.deviceID = deviceID
        self.contact = contact
        self.codeHash = codeHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.purpose = purpose
        self.targetAccountID = targetAccountID
    }
}

/// What `AuthorityStore.insertChallenge` did.
package struct ChallengeInsertion: Sendable, Equatable {
    /// The account id, or `contact:<kind>:<value>` before an account exists.
    package var accountKey: String
    /// Challenges retired to make room (this device's pending ones, then the account's oldest).
    package var retiredChallengeIDs: [String]

    /// Creates a result.
    package init(accountKey: String, retiredChallengeIDs: [String]) {
        self.accountKey = accountKey
        self.retiredChallengeIDs = retiredChallengeIDs
    }
}

/// What `AuthorityStore.insertChallenge` did.
package enum ChallengeInsertionOutcome: Sendable, Equatable {
    /// The challenge was stored.
    case inserted(ChallengeInsertion)
    /// A send limit refused it; nothing was changed. A send at or after `retryAfter` passes this
    /// limit (unless other sends come first).
    case limited(CodeSendLimit, retryAfter: Date)
}

/// A stored challenge.
package struct ChallengeRecord: Sendable, Equatable {
    /// The id.
    package var id: String
    /// The app (tenant).
    package var appID: String
    /// The device that asked for the code.
    package var deviceID: String
    /// The normalized contact the code went to.
    package var contact: RainWalletContact
    /// The account id, or `contact:<kind>:<value>` before an account exists.
    package var accountKey: String
    /// The keyed hash of the code.
    package var codeHash: [UInt8]
    /// When it was created.
    package var createdAt: Date
    /// When the code stops working.
    package var expiresAt: Date
    /// Wrong codes counted so far.
    package var wrongAttempts: Int
    /// Where it is in its life.
    package var state: ChallengeState
    /// What the code is for (`login` for challenges stored before schema version 5).
    package var purpose: ChallengePurpose
    /// The account a verification attaches the contact to; nil for a login.
    package var targetAccountID: String?

    /// Creates a record.
    package init(
        id: String, appID: String, deviceID: String, contact: RainWalletContact, accountKey: String, codeHash: [UInt8],
        createdAt: Date, expiresAt: Date, wrongAttempts: Int, state: ChallengeState,
        purpose: ChallengePurpose = .login, targetAccountID: String? = nil
    ) {
        self.purpose = purpose
        self.targetAccountID = targetAccountID
        self.id = id
        self.appID = appID
        self.deviceID = deviceID
        self.contact = contact
        self.accountKey = accountKey
        self.codeHash = codeHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.wrongAttempts = wrongAttempts
        self.state = state
    }
}

/// A session to store.
package struct NewSession: Sendable, Equatable {
    /// `ses_…`
    package var id: String
    /// Keyed hash of the access token.
    package var accessHash: [UInt8]
    /// Keyed hash of the refresh token.
    package var refreshHash: [UInt8]
    /// When the access token expires.
    package var accessExpiresAt: Date
    /// The device's raw Ed25519 public key every refresh must be signed with; nil for an unbound
    /// session, which can never be refreshed.
    package var devicePublicKey: [UInt8]?

    /// Creates a session to store.
    package init(
        id: String, accessHash: [UInt8], refreshHash: [UInt8], accessExpiresAt: Date, devicePublicKey: [UInt8]? = nil
    ) {
        self.id = id
        self.accessHash = accessHash
        self.refreshHash = refreshHash
        self.accessExpiresAt = accessExpiresAt
        self.devicePublicKey = devicePublicKey
    }
}

/// Input of `AuthorityStore.completeLogin`.
package struct LoginCompletion: Sendable, Equatable {
    /// The challenge being confirmed.
    package var challengeID: String
    /// The app (tenant).
    package var appID: String
    /// The device that asked for the code.
    package var deviceID: String
    /// The challenge's contact.
    package var contact: RainWalletContact
    /// Used only when the login creates the account.
    package var newAccountID: String
    /// Used only when the login creates the account.
    package var newWalletID: String
    /// The new wallet's key material (its encrypted entropy, bound to `newWalletID`, and its
    /// addresses), stored with it in the same transaction. Used only when the login creates the
    /// account; nil stores a wallet without keys (backfilled later).
    package var newWalletKeys: WalletKeyMaterial?
    /// The session to store.
    package var session: NewSession
    /// The time of the login.
    package var now: Date
    /// Issue 20: the confirm's idempotency key (its keyed hash) and its sealed tokens, stored with
    /// the login so a repeat gets this outcome (`idempotentOutcome`); nil without a key.
    package var idempotency: IdempotentOutcomeInput?

    /// Creates the input.
    package init(
        challengeID: String, appID: String, deviceID: String, contact: RainWalletContact, newAccountID: String,
        newWalletID: String, newWalletKeys: WalletKeyMaterial? = nil, session: NewSession, now: Date,
        idempotency: IdempotentOutcomeInput? = nil
    ) {
        self.idempotency = idempotency
        self.newWalletKeys = newWalletKeys
        self.challengeID = challengeID
        self.appID = appID
        self.deviceID = deviceID
        self.contact = contact
        self.newAccountID = newAccountID
        self.newWalletID = newWalletID
        self.session = session
        self.now = now
    }
}

/// A wallet's key material as stored: the BIP-39 entropy encrypted with the wallet-encryption key
/// (AES-256-GCM, `nonce ‖ ciphertext ‖ tag`, bound to the wallet id), the id of the master key it
/// was encrypted under, and the addresses derived from it (in the clear, for reads).
package struct WalletKeyMaterial: Sendable, Equatable {
    /// `nonce ‖ ciphertext ‖ tag` of the entropy.
    package var entropyCiphertext: [UInt8]
    /// The id of the master key whose wallet-encryption key sealed the entropy.
    package var entropyKeyID: String
    /// The EIP-55 address of m/44'/60'/0'/0/0.
    package var ethereumAddress: String?
    /// The base58 address of m/44'/501'/0'/0'.
    package var solanaAddress: String?

    /// Creates the material.
    package init(entropyCiphertext: [UInt8], entropyKeyID: String, ethereumAddress: String?, solanaAddress: String?) {
        self.entropyCiphertext = entropyCiphertext
        self.entropyKeyID = entropyKeyID
        self.ethereumAddress = ethereumAddress
        self.solanaAddress = solanaAddress
    }
}

/// A stored wallet.
package struct WalletRecord: Sendable, Equatable {
    /// `wal_…`
    package var id: String
    /// The account (`acct_…`) it belongs to.
    package var accountID: String
    /// When it was created.
    package var createdAt: Date
    /// The encrypted entropy; nil for a wallet created before wallets had keys.
    package var entropyCiphertext: [UInt8]?
    /// The id of the master key the entropy is encrypted under.
    package var entropyKeyID: String?
    /// The EIP-55 Ethereum address, once derived.
    package var ethereumAddress: String?
    /// The base58 Solana address, once derived.
    package var solanaAddress: String?

    /// Creates a record.
    package init(
        id: String, accountID: String, createdAt: Date, entropyCiphertext: [UInt8]? = nil, entropyKeyID: String? = nil,
        ethereumAddress: String? = nil, solanaAddress: String? = nil
    ) {
        self.id = id
        self.accountID = accountID
        self.createdAt = createdAt
        self.entropyCiphertext = entropyCiphertext
        self.entropyKeyID = entropyKeyID
        self.ethereumAddress = ethereumAddress
        self.solanaAddress = solanaAddress
    }

    /// Whether it has its entropy and both addresses.
    package var hasAllKeys: Bool {
        entropyCiphertext != nil && entropyKeyID != nil && ethereumAddress != nil && solanaAddress != nil
    }
}

/// A completed login.
package struct LoginRecord: Sendable, Equatable {
    /// The account (`acct_…`).
    package var accountID: String
    /// The account's wallet (`wal_…`).
    package var walletID: String
    /// True when this login created the account and its wallet.
    package var accountCreated: Bool
    /// Sessions on other devices revoked by this login.
    package var revokedElsewhereCount: Int
    /// The devices whose sessions this login revoked, each once (issue 19: pushed to them).
    package var revokedDeviceIDs: [String]
    /// Whether the login replaced an older session of the same device and app (another profile of
    /// that app on the device, told in-process or by a push).
    package var isReplacedOnDevice: Bool

    /// Creates a record.
    package init(
        accountID: String, walletID: String, accountCreated: Bool, revokedElsewhereCount: Int,
        revokedDeviceIDs: [String] = [], isReplacedOnDevice: Bool = false
    ) {
        self.accountID = accountID
        self.walletID = walletID
        self.accountCreated = accountCreated
        self.revokedElsewhereCount = revokedElsewhereCount
        self.revokedDeviceIDs = revokedDeviceIDs
        self.isReplacedOnDevice = isReplacedOnDevice
    }
}

/// Issue 20: the kind of call an idempotency key belongs to (the `kind` column of
/// `idempotent_logins`). One key names one call: a key reused for another kind is refused.
package enum IdempotentCallKind: String, Sendable, Equatable {
    /// `Authority/ConfirmLoginCode` (the rows written before the column existed).
    case loginCode = "login_code"
    /// `Authority/FinishPasskeyRegistration` and `FinishPasskeyAuthentication`.
    case passkeyFinish = "passkey_finish"
    /// `Authority/ConfirmContactVerification`.
    case contactVerification = "contact_verification"
}

/// Issue 20: a passkey finish's idempotency key, claimed with its ceremony.
package struct IdempotentClaim: Sendable, Equatable {
    /// The call.
    package var kind: IdempotentCallKind
    /// The keyed hash of the device's idempotency key.
    package var keyHash: [UInt8]

    /// Creates the claim.
    package init(kind: IdempotentCallKind, keyHash: [UInt8]) {
        self.kind = kind
        self.keyHash = keyHash
    }
}

/// Issue 20: what a call with an idempotency key stores with its effect, in the same transaction.
package struct IdempotentOutcomeInput: Sendable, Equatable {
    /// The call.
    package var kind: IdempotentCallKind
    /// The keyed hash of the device's idempotency key (the key itself is never stored).
    package var keyHash: [UInt8]
    /// The challenge (a confirm, a contact verification) or ceremony (a passkey finish) it used.
    package var challengeID: String
    /// The outcome (a login's tokens, or nothing), sealed under a key derived from the idempotency
    /// key and bound to the app, device and challenge: only the device that holds it can open it.
    /// Never empty (an empty value marks a passkey finish still running).
    package var sealedTokens: [UInt8]
    /// Until when a repeat gets this outcome: the challenge's or ceremony's expiry.
    package var expiresAt: Date

    /// Creates the input.
    package init(
        kind: IdempotentCallKind = .loginCode, keyHash: [UInt8], challengeID: String, sealedTokens: [UInt8],
        expiresAt: Date
    ) {
        self.kind = kind
        self.keyHash = keyHash
        self.challengeID = challengeID
        self.sealedTokens = sealedTokens
        self.expiresAt = expiresAt
    }
}

/// Issue 20: the first outcome of a call with an idempotency key, returned to its repeats.
package struct IdempotentOutcome: Sendable, Equatable {
    /// The call.
    package var kind: IdempotentCallKind
    /// The challenge (a confirm, a contact verification) or ceremony (a passkey finish) it used.
    package var challengeID: String
    /// The account it logged in to or changed; empty while a passkey finish is still running.
    package var accountID: String
    /// The account's wallet after a login; empty otherwise.
    package var walletID: String
    /// Whether the login created the account.
    package var accountCreated: Bool
    /// The sealed outcome; empty while a passkey finish that claimed the key is still running.
    package var sealedTokens: [UInt8]

    /// Creates the record.
    package init(
        kind: IdempotentCallKind = .loginCode, challengeID: String, accountID: String, walletID: String,
        accountCreated: Bool, sealedTokens: [UInt8]
    ) {
        self.kind = kind
        self.challengeID = challengeID
        self.accountID = accountID
        self.walletID = walletID
        self.accountCreated = accountCreated
        self.sealedTokens = sealedTokens
    }

    /// Whether this is a passkey finish's claim with no outcome yet (the finish is still running).
    package var isPending: Bool { sealedTokens.isEmpty }
}

/// Output of `AuthorityStore.completeLogin`.
package enum LoginCompletionOutcome: Sendable, Equatable {
    /// The login went through.
    case loggedIn(LoginRecord)
    /// Issue 20: a login with this idempotency key was already completed (by a concurrent repeat,
    /// possibly on another instance): its outcome, for the caller to return.
    case repeated(IdempotentOutcome)
    /// The challenge was no longer pending (or expired, or not this device's) when the
    /// transaction ran; carries it as it is now, or nil when it does not exist.
    case challengeUnavailable(ChallengeRecord?)
}

/// A stored session.
package struct SessionRecord: Sendable, Equatable {
    /// `ses_…`
    package var id: String
    /// The app (tenant).
    package var appID: String
    /// The account (`acct_…`).
    package var accountID: String
    /// The device the session is bound to.
    package var deviceID: String
    /// Keyed hash of the access token.
    package var accessHash: [UInt8]
    /// Keyed hash of the refresh token.
    package var refreshHash: [UInt8]
    /// When the access token expires.
    package var accessExpiresAt: Date
    /// When it was created.
    package var createdAt: Date
    /// When it was revoked, or nil while live.
    package var revokedAt: Date?
    /// One of `SessionRevokeReason`.
    package var revokeReason: String?
    /// The device key's wire bytes (`DevicePublicKey.wireBytes`: a raw Ed25519 key or a P-256
    /// point); nil for an unbound session (issued without a key, or before schema version 2),
    /// which can never be refreshed nor used.
    package var devicePublicKey: [UInt8]?
    /// The key a device is moving to (`rebindDevice`), accepted beside `devicePublicKey` until the
    /// device confirms it (`confirmDeviceKey`); nil otherwise.
    package var pendingDevicePublicKey: [UInt8]?
    /// Keyed hash of the refresh token rotated out at the last refresh; nil before the first.
    package var previousRefreshHash: [UInt8]?
    /// When the last refresh rotated the tokens (and issued the current refresh token); nil
    /// before the first.
    package var rotatedAt: Date?
    /// How many times the tokens were rotated (0 after the login).
    package var refreshGeneration: Int
    /// Whether the device has used the current pair: its access token was accepted by a call.
    /// Cleared by each rotation. While it is false, a repeat of the previous refresh token from
    /// the session's device key, even outside the grace window, gets the current pair back (the
    /// device may have lost it before it could save it) instead of revoking the family.
    package var isPairUsed: Bool

    /// Creates a record.
    package init(
        id: String, appID: String, accountID: String, deviceID: String, accessHash: [UInt8], refreshHash: [UInt8],
        accessExpiresAt: Date, createdAt: Date, revokedAt: Date?, revokeReason: String?,
        devicePublicKey: [UInt8]? = nil, previousRefreshHash: [UInt8]? = nil, rotatedAt: Date? = nil,
        refreshGeneration: Int = 0, pendingDevicePublicKey: [UInt8]? = nil, isPairUsed: Bool = false
    ) {
        self.pendingDevicePublicKey = pendingDevicePublicKey
        self.id = id
        self.appID = appID
        self.accountID = accountID
        self.deviceID = deviceID
        self.accessHash = accessHash
        self.refreshHash = refreshHash
        self.accessExpiresAt = accessExpiresAt
        self.createdAt = createdAt
        self.revokedAt = revokedAt
        self.revokeReason = revokeReason
        self.devicePublicKey = devicePublicKey
        self.previousRefreshHash = previousRefreshHash
        self.rotatedAt = rotatedAt
        self.refreshGeneration = refreshGeneration
        self.isPairUsed = isPairUsed
    }

    /// When the current refresh token was issued: the last rotation, or the login.
    package var refreshIssuedAt: Date { rotatedAt ?? createdAt }
}

/// Which generation of a session's refresh token was presented.
package enum RefreshTokenGeneration: Sendable, Equatable {
    /// The session's current refresh token.
    case current
    /// The one the last refresh rotated out (at `SessionRecord.rotatedAt`).
    case previous
    /// One rotated out before that.
    case older
}

/// A session found by one of its refresh-token hashes.
package struct RefreshCandidate: Sendable, Equatable {
    /// The session (the whole family: rotation keeps the session).
    package var session: SessionRecord
    /// Which of its refresh tokens matched.
    package var generation: RefreshTokenGeneration

    /// Creates a candidate.
    package init(session: SessionRecord, generation: RefreshTokenGeneration) {
        self.session = session
        self.generation = generation
    }
}

/// A token rotation to store.
package struct SessionRotation: Sendable, Equatable {
    /// Keyed hash of the new access token.
    package var accessHash: [UInt8]
    /// Keyed hash of the new refresh token.
    package var refreshHash: [UInt8]
    /// When the new access token expires.
    package var accessExpiresAt: Date
    /// The time of the rotation.
    package var rotatedAt: Date

    /// Creates a rotation.
    package init(accessHash: [UInt8], refreshHash: [UInt8], accessExpiresAt: Date, rotatedAt: Date) {
        self.accessHash = accessHash
        self.refreshHash = refreshHash
        self.accessExpiresAt = accessExpiresAt
        self.rotatedAt = rotatedAt
    }
}

/// What a refresh changes in the store.
package enum SessionRefreshChange: Sendable, Equatable {
    /// Nothing (a refusal that burns nothing, or a repeat within the grace window).
    case none
    /// New tokens: the current refresh hash becomes the previous one, the previous one is kept
    /// as an older generation, and the generation count goes up.
    case rotate(SessionRotation)
    /// Revoke the session family with this `SessionRevokeReason`.
    case revoke(reason: String)
}

/// A session found by its access token, with its account.
package struct AccountAccess: Sendable, Equatable {
    /// The session.
    package var session: SessionRecord
    /// The account and its wallet.
    package var account: AccountRecord
    /// The account's contacts, emails first, each kind in the order it was attached.
    package var contacts: [RainWalletContact]

    /// Creates a result.
    package init(session: SessionRecord, account: AccountRecord, contacts: [RainWalletContact]) {
        self.session = session
        self.account = account
        self.contacts = contacts
    }
}

/// What `AuthorityStore.takeSMSSlot` did.
package enum SMSSlotOutcome: Sendable, Equatable {
    /// The slot was stored.
    case taken
    /// The budget is used up; a slot frees at `retryAfter`.
    case full(retryAfter: Date)
}

/// What `AuthorityStore.prune` deleted.
package struct PruneResult: Sendable, Equatable {
    /// Challenges deleted.
    package var challengesDeleted: Int
    /// Sessions deleted.
    package var sessionsDeleted: Int
    /// Rotated-out refresh-token hashes deleted (of live sessions; a deleted session's go with it).
    package var retiredRefreshTokensDeleted: Int
    /// Passkey ceremonies deleted (they expire with the challenges' cutoff).
    package var passkeyCeremoniesDeleted: Int
    /// Development-outbox deliveries deleted: filled in by `EmbeddedAuthority.pruneExpired()`
    /// (the outbox is a file beside the store); a store leaves it 0.
    package var outboxEntriesDeleted: Int = 0
    /// SMS budget slots deleted (issue 19).
    package var smsSlotsDeleted: Int = 0

    /// Creates a result.
    package init(
        challengesDeleted: Int, sessionsDeleted: Int, retiredRefreshTokensDeleted: Int = 0,
        passkeyCeremoniesDeleted: Int = 0
    ) {
        self.challengesDeleted = challengesDeleted
        self.sessionsDeleted = sessionsDeleted
        self.retiredRefreshTokensDeleted = retiredRefreshTokensDeleted
        self.passkeyCeremoniesDeleted = passkeyCeremoniesDeleted
    }
}

/// Session revocation reasons as stored.
package enum SessionRevokeReason {
    /// The account logged in on another device.
    package static let revokedElsewhere = "revoked_elsewhere"
    /// The same device logged in again.
    package static let replaced = "replaced"
    /// The device logged out.
    package static let logout = "logout"
    /// A rotated refresh token was presented again outside the grace window.
    package static let reused = "reused"
    /// A refresh came without a valid device signature, from another device id, or with a stale
    /// timestamp: the token is presumed copied.
    package static let stolenToken = "stolen_token"
    /// The session went unrefreshed for longer than the refresh-token lifetime.
    package static let refreshExpired = "refresh_expired"
}

/// Input of `AuthorityStore.completeContactVerification`.
package struct ContactVerificationCompletion: Sendable, Equatable {
    /// The verification challenge being confirmed.
    package var challengeID: String
    /// The app (tenant).
    package var appID: String
    /// The device that asked for the code.
    package var deviceID: String
    /// The account the contact is attached to (the live session's).
    package var accountID: String
    /// The challenge's contact.
    package var contact: RainWalletContact
    /// The time of the confirmation.
    package var now: Date
    /// Issue 20: the confirm's idempotency key and sealed outcome, stored with the verification so
    /// a repeat gets it (`idempotentOutcome`); nil without a key.
    package var idempotency: IdempotentOutcomeInput?

    /// Creates the input.
    package init(
        challengeID: String, appID: String, deviceID: String, accountID: String, contact: RainWalletContact, now: Date,
        idempotency: IdempotentOutcomeInput? = nil
    ) {
        self.idempotency = idempotency
        self.challengeID = challengeID
        self.appID = appID
        self.deviceID = deviceID
        self.accountID = accountID
        self.contact = contact
        self.now = now
    }
}

/// Output of `AuthorityStore.completeContactVerification`.
package enum ContactVerificationOutcome: Sendable, Equatable {
    /// The contact is on the account, verified; `wasAlreadyAttached` when it already was.
    case verified(wasAlreadyAttached: Bool)
    /// Another account owns the contact (it was taken after the code was sent); the challenge was
    /// retired and nothing else changed.
    case ownedByAnotherAccount
    /// The challenge was no longer a pending verification of this app, device and account (or
    /// expired); carries it as it is now, or nil when it does not exist.
    case challengeUnavailable(ChallengeRecord?)
    /// Issue 20: a verification with this idempotency key was already completed (by a concurrent
    /// repeat, possibly on another instance): its outcome.
    case repeated(IdempotentOutcome)
}
