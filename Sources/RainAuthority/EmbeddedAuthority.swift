import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

/// The authority running in-process: accounts, login codes, wallets and session tokens on an
/// `AuthorityStore` (SQLite in the state directory by default), codes delivered by a `CodeSender`
/// (the development outbox by default).
///
/// Rules (README "Error codes", login-code rules): 6-digit codes from a CSPRNG, stored only as a keyed hash bound to the
/// challenge, compared in constant time; 5-minute lifetime; locked after 3 wrong attempts; a resend
/// or another contact on the same device retires the device's pending code; at most 3 live codes
/// per account across devices (a 4th retires the oldest). A first login creates the account and
/// its wallet; every login revokes the account's sessions on other devices. Codes and tokens are
/// never logged.
///
/// Sessions (issues 3 and 14): a session is bound at login to the device's public key (Ed25519, or
/// P-256 from a TPM). Every call with one of its tokens must come with a `DeviceProof` of that key
/// (the keys its connection proved, or the device's own keys in-process); no proof is RAIN_501 and
/// changes nothing, a proof by another key revokes the whole session. Each refresh rotates both
/// tokens to a pair derived from the old refresh token (`AuthorityKeys.rotatedTokens(from:)`), so a
/// repeat within `AuthoritySettings.refreshGraceWindow` gets the same pair; the old access token
/// stops working at once. Any other reuse of a rotated token revokes the whole session.
public final class EmbeddedAuthority: Authority {
    /// Where data lives.
    package let store: any AuthorityStore
    /// The derived keys.
    public let keys: AuthorityKeys
    /// Lifetimes and limits.
    public let settings: AuthoritySettings
    let clock: any RainClock
    /// Where this process's own sends come from (the daemon's uid), for the per-source limit
    /// when a send is not served for a remote caller.
    let localSource: SendSource
    private let sender: any CodeSender
    private let outbox: OutboxCodeSender?
    let logger: Logger
    /// Where this authority announces the sessions it revoked (issue 19): its server pushes them to
    /// the devices' streams; an embedded authority's device daemon ends its own sessions from it.
    public let revocations = RevocationHub()

    /// An authority on an explicit store and keys.
    /// - Parameters:
    ///   - sender: delivers codes.
    ///   - outbox: the outbox `listOutbox()` reads, or nil when there is none (then it is RAIN_202).
    package init(
        store: any AuthorityStore, keys: AuthorityKeys, settings: AuthoritySettings = AuthoritySettings(),
        clock: any RainClock = SystemClock(), sender: any CodeSender, outbox: OutboxCodeSender?, logger: Logger
    ) {
        self.store = store
        self.keys = keys
        self.settings = settings
        self.clock = clock
        self.localSource = .uid(getuid())
        self.sender = sender
        self.outbox = outbox
        self.logger = logger
    }

    /// An authority on `stateDirectory` (created 0700 if missing): `authority.key`,
    /// `authority.sqlite3` and, with the default sender, `outbox.jsonl`. Once the store is
    /// migrated, every wallet still missing its keys is backfilled (`backfillWallets()`).
    /// - Parameters:
    ///   - sender: delivers codes; nil means the outbox in the state directory. An
    ///     `OutboxCodeSender` passed here is also the one `listOutbox()` reads.
    ///   - store: an opened store (a shared `PostgresAuthorityStore`); nil means
    ///     `authority.sqlite3` in the state directory.
    ///   - masterKey: the master key from the device's key provider; nil means `authority.key` in
    ///     the state directory (created when missing).
    ///   - senderOnStore: makes the sender once the store is open, when the sender keeps state in
    ///     it (the SMS sender's hourly budget, issue 19); what it returns replaces `sender`, nil
    ///     leaves `sender`.
    /// - Throws: RAIN_502 when the key file or the database cannot be opened, or a backfill fails;
    ///   what `senderOnStore` throws.
    package convenience init(
        stateDirectory: String, settings: AuthoritySettings = AuthoritySettings(), clock: any RainClock = SystemClock(),
        sender: (any CodeSender)? = nil, store: (any AuthorityStore)? = nil, masterKey: SymmetricKey? = nil,
        logger: Logger, senderOnStore: ((any AuthorityStore) throws(RainError) -> (any CodeSender)?)? = nil
    ) async throws(RainError) {
        let keys =
            if let masterKey {
                try await AuthorityKeys.load(stateDirectory: stateDirectory, masterKey: masterKey)
            } else {
                try await AuthorityKeys.load(stateDirectory: stateDirectory)
            }
        let opened: any AuthorityStore =
            if let store { store } else { try await SQLiteAuthorityStore.open(stateDirectory: stateDirectory) }
        let storeSender: (any CodeSender)?
        do {
            storeSender = try senderOnStore?(opened)
        } catch {
            if store == nil { await opened.close() }
            throw error
        }
        let chosen =
            storeSender ?? sender ?? OutboxCodeSender(stateDirectory: stateDirectory, logger: logger.child("outbox"))
        self.init(
            store: opened, keys: keys, settings: settings, clock: clock, sender: chosen,
            outbox: chosen as? OutboxCodeSender, logger: logger)
        // Wallets created before they had keys (schema version 2 and earlier) get them now.
        try await backfillWallets()
    }

    // MARK: - Send

    /// Sends a login code (see `Authority.sendLoginCode`), counted against this daemon's uid as
    /// its source.
    ///
    /// - Throws: RAIN_102 for a contact that is not normalized, an empty app/device id or an app
    ///   this authority does not serve, RAIN_302 when a send limit refuses it, RAIN_501 when
    ///   delivery fails (the challenge is retired), RAIN_502 when the store fails.
    public func sendLoginCode(_ request: SendCodeRequest) async throws(RainError) -> SendCodeResult {
        try await sendLoginCode(request, source: localSource)
    }

    /// Sends a login code for a caller from `source` (see `Authority.sendLoginCode(_:source:)`).
    public func sendLoginCode(_ request: SendCodeRequest, source: SendSource) async throws(RainError)
        -> SendCodeResult
    {
        try Self.requireNormalized(request.contact)
        try requireServed(request.appID)
        try Self.requireIdentifier(request.deviceID, field: "deviceId")
        return try await issueCode(
            appID: request.appID, deviceID: request.deviceID, contact: request.contact, purpose: .login,
            targetAccountID: nil, source: source)
    }

    /// Stores a new challenge of `purpose` and delivers its code: the shared path of login codes
    /// and contact verifications. A failed delivery retires the challenge.
    /// - Throws: RAIN_501 when delivery fails, RAIN_502 when the store fails.
    func issueCode(
        appID: String, deviceID: String, contact: RainWalletContact, purpose: ChallengePurpose,
        targetAccountID: String?, source: SendSource
    ) async throws(RainError) -> SendCodeResult {
        let request = SendCodeRequest(appID: appID, deviceID: deviceID, contact: contact)
        let now = clock.now
        let challengeID = try SecureRandom.identifier(prefix: "chl")
        let code = try SecureRandom.digits(count: 6)
        let expiresAt = Date(unixMilliseconds: now.adding(settings.codeLifetime).unixMilliseconds)
        // The slot is taken before the hand-off; the pending code is replaced only once the
        // provider accepted the new one (a failed resend leaves the delivered code usable).
        let outcome = try await store.reserveChallenge(
            NewChallenge(
                id: challengeID, appID: request.appID, deviceID: request.deviceID, contact: request.contact,
                codeHash: keys.codeHash(challengeID: challengeID, code: code), createdAt: now, expiresAt: expiresAt,
                purpose: purpose, targetAccountID: targetAccountID, source: source.key),
            limits: settings.sendLimits)
        switch outcome {
        case .inserted:
            break
        case .limited(let limit, let retryAfter):
            logger.info(
                "code.limited",
                [
                    "purpose": purpose.rawValue, "app": request.appID, "kind": request.contact.kindName,
                    "contact": ContactRedaction.redacted(request.contact), "device": request.deviceID,
                    "limit": limit.rawValue, "source": source.key,
                ])
            throw Self.sendLimitError(limit, retryAfter: retryAfter, now: now)
        }

        let delivery = OutboxDelivery(
            appID: request.appID, kind: request.contact.kindName, contact: request.contact.value, code: code,
            sentAt: now)
        let message = CodeMessage(
            delivery: delivery, purpose: purpose == .login ? .login : .contactVerification, expiresAt: expiresAt)
        do {
            try await sender.deliver(message)
        } catch {
            let refused = CodeDeliveryFailure.isRefusedBeforeAcceptance(error)
            // Refused before acceptance: nobody got the code, the slot is given back. Otherwise the
            // reservation stays (retired): it counts against the limits and cannot be confirmed.
            if refused { try? await store.releaseChallenge(id: challengeID) }
            logger.warning(
                "code.delivery_failed",
                [
                    "app": request.appID, "kind": request.contact.kindName, "challenge": challengeID,
                    "slot": refused ? "given back" : "counted",
                ])
            if let rain = error as? RainError,
                refused || rain.code == .provider
            {
                throw rain
            }
            throw CodeDeliveryFailure.uncertain("the code sender failed")
        }
        let retired = try await store.activateChallenge(
            id: challengeID, maxActivePerAccount: settings.maxActiveCodesPerAccount)
        logger.info(
            "code.sent",
            [
                "purpose": purpose.rawValue,
                "app": request.appID, "kind": request.contact.kindName,
                "contact": ContactRedaction.redacted(request.contact), "challenge": challengeID,
                "device": request.deviceID, "retired": String(retired.count),
            ])
        return SendCodeResult(challengeID: challengeID, contact: request.contact, expiresAt: expiresAt)
    }

    /// RAIN_302 for a send refused by `limit`: the details carry the limit (`reason` and `limit`),
    /// when to retry (`retryAfter`) and how long that is from `now` (`retryAfterMilliseconds`).
    static func sendLimitError(_ limit: CodeSendLimit, retryAfter: Date, now: Date) -> RainError {
        let waitMilliseconds = UInt64(max(0, retryAfter.unixMilliseconds - now.unixMilliseconds))
        let what: String
        switch limit {
        case .contactCooldown: what = "a code was just sent to this contact"
        case .contactWindow: what = "too many codes were sent to this contact"
        case .accountWindow: what = "too many codes were sent for this account"
        case .contactAllAppsWindow: what = "too many codes were sent to this contact (across every app)"
        case .sourceWindow: what = "too many codes were sent from this device or address (across every app and contact)"
        }
        // People read whole seconds: round up, so the time shown is never too early.
        let seconds = (waitMilliseconds + 999) / 1000
        let shown = Date(unixMilliseconds: (retryAfter.unixMilliseconds + 999) / 1000 * 1000)
        return RainError(
            .refused,
            "\(what); try again after \(RFC3339.string(from: shown)) (in \(seconds) s)",
            details: RainError.Details(
                reason: limit.rawValue, retryAfterMilliseconds: waitMilliseconds, limit: limit.rawValue,
                retryAfter: retryAfter))
    }

    // MARK: - Confirm

    /// Confirms a login code (see `Authority.confirmLoginCode`).
    ///
    /// - Throws: RAIN_203 with `reason` wrong (and `attemptsRemaining`), locked, expired, used or
    ///   retired; RAIN_102 `no_pending_code` when the challenge never existed for this app and device;
    ///   RAIN_404 when the account has no wallet record; RAIN_502 when the store fails.
    public func confirmLoginCode(_ request: ConfirmCodeRequest) async throws(RainError) -> LoginResult {
        try requireServed(request.appID)
        // Checked first, so a malformed key neither counts as a wrong code nor uses the challenge.
        let deviceKey = try Self.deviceKey(request.devicePublicKey)
        let now = clock.now
        // A repeat of a confirm that went through (its answer was lost): the first outcome.
        let idempotency = try IdempotentCall(request, keys: keys)
        if let idempotency, let first = try await store.idempotentOutcome(keyHash: idempotency.keyHash, now: now) {
            logger.info("login.repeated", ["app": request.appID, "account": first.accountID, "device": request.deviceID])
            return try idempotency.requiredLogin(of: first, now: now)
        }
        // A contact verification's challenge never logs in (nor does a login code verify a contact).
        guard let challenge = try await store.challenge(id: request.challengeID),
            challenge.appID == request.appID, challenge.deviceID == request.deviceID, challenge.purpose == .login
        else {
            throw RainError.invalid("no pending code; send a new one", field: "challengeId", reason: Self.noPendingCode)
        }
        do {
            try await checkCode(request.code, against: challenge, now: now)
        } catch {
            // The first confirm with this key (on another instance, or another task) committed
            // after the key was looked up above: the challenge is used now, and its outcome answers.
            if let idempotency, challenge.state == .used,
                let first = try await store.idempotentOutcome(keyHash: idempotency.keyHash, now: now)
            {
                logger.info("login.repeated", ["app": request.appID, "account": first.accountID, "device": request.deviceID])
                return try idempotency.requiredLogin(of: first, now: now)
            }
            throw error
        }

        let accessToken = "rwa_" + (try SecureRandom.token())
        let refreshToken = "rwr_" + (try SecureRandom.token())
        // The wallet a first login creates, keys and all, goes in the same transaction as its
        // account. A returning login needs none: its keys (a seed drawn, sealed and derived, about
        // 3 ms) are made only when the contact has no account yet. Should the account vanish in
        // between, the transaction creates one with a wallet without keys, completed below.
        let newWalletID = try SecureRandom.identifier(prefix: "wal")
        let returning = try await store.account(appID: request.appID, contact: challenge.contact) != nil
        let newWalletKeys = returning ? nil : try newWalletKeyMaterial(walletID: newWalletID)
        let tokens = SessionTokens(
            accessToken: accessToken, refreshToken: refreshToken, accessLifetime: settings.accessTokenLifetime)
        let outcome = try await store.completeLogin(
            LoginCompletion(
                challengeID: challenge.id, appID: request.appID, deviceID: request.deviceID, contact: challenge.contact,
                newAccountID: try SecureRandom.identifier(prefix: "acct"), newWalletID: newWalletID,
                newWalletKeys: newWalletKeys,
                session: NewSession(
                    id: try SecureRandom.identifier(prefix: "ses"), accessHash: keys.tokenHash(accessToken),
                    refreshHash: keys.tokenHash(refreshToken), accessExpiresAt: now.adding(settings.accessTokenLifetime),
                    devicePublicKey: deviceKey?.wireBytes),
                now: now,
                idempotency: try idempotency.map { (i) throws(RainError) in
                    try i.outcome(of: tokens, issuedAt: now, expiresAt: challenge.expiresAt)
                }))

        switch outcome {
        case .repeated(let first):
            // A repeat that raced its first confirm: the first one won.
            guard let idempotency else { throw RainError(.internalError, "the login could not be completed; try again") }
            logger.info("login.repeated", ["app": request.appID, "account": first.accountID, "device": request.deviceID])
            return try idempotency.requiredLogin(of: first, now: clock.now)
        case .challengeUnavailable(let current):
            // Another confirm (or a resend) won the race: report the challenge as it is now.
            guard let current else {
                throw RainError.invalid(
                    "no pending code; send a new one", field: "challengeId", reason: Self.noPendingCode)
            }
            try Self.requireUsable(current, now: now)
            throw RainError(.internalError, "the login could not be completed; try again")
        case .loggedIn(let record):
            if !record.accountCreated || newWalletKeys == nil {
                // A returning login completes a wallet that lacks its entropy or a chain. The
                // session is already stored: a failure here is logged, and retried at the next read.
                do {
                    _ = try await completedWallet(accountID: record.accountID)
                } catch {
                    logger.error(
                        "wallet.backfill_failed",
                        ["app": request.appID, "account": record.accountID, "code": error.code.description])
                }
            }
            publishRevocations(of: record, appID: request.appID, deviceID: request.deviceID)
            logger.info(
                "login",
                [
                    "app": request.appID, "account": record.accountID, "created": String(record.accountCreated),
                    "device": request.deviceID, "revokedElsewhere": String(record.revokedElsewhereCount),
                    "deviceBound": String(deviceKey != nil),
                ])
            return LoginResult(
                accountID: record.accountID, walletID: record.walletID, accountCreated: record.accountCreated,
                tokens: tokens)
        }
    }

    /// Checks a submitted code against a challenge: RAIN_203 when the challenge can no longer be
    /// confirmed, or when the code is wrong (counted, locking at the limit). Constant time; a
    /// malformed code is hashed too (as the empty code), so it costs the same and counts as wrong.
    func checkCode(_ code: String, against challenge: ChallengeRecord, now: Date) async throws(RainError) {
        try Self.requireUsable(challenge, now: now)
        let submitted = Self.isWellFormedCode(code) ? code : ""
        let actual = keys.codeHash(challengeID: challenge.id, code: submitted)
        guard constantTimeEquals(actual, challenge.codeHash), !submitted.isEmpty else {
            throw try await wrongCode(challenge, now: now)
        }
    }

    /// Counts a wrong code and returns the error to throw.
    private func wrongCode(_ challenge: ChallengeRecord, now: Date) async throws(RainError) -> RainError {
        let maxAttempts = max(1, settings.maxWrongAttempts)
        guard
            let updated = try await store.recordWrongAttempt(
                challengeID: challenge.id, maxWrongAttempts: maxAttempts, now: now)
        else {
            return RainError.invalid("no pending code; send a new one", field: "challengeId", reason: Self.noPendingCode)
        }
        if updated.state == .pending && updated.wrongAttempts == challenge.wrongAttempts {
            // Not counted: it expired between the two reads.
            return Self.unusableError(updated, now: now)
                ?? Self.wrong(attemptsLeft: maxAttempts - updated.wrongAttempts)
        }
        if updated.state == .pending {
            let left = max(0, maxAttempts - updated.wrongAttempts)
            logger.info(
                "code.wrong", ["app": challenge.appID, "challenge": challenge.id, "attemptsLeft": String(left)])
            return Self.wrong(attemptsLeft: left)
        }
        if updated.state == .locked {
            logger.info("code.locked", ["app": challenge.appID, "challenge": challenge.id])
        }
        return Self.unusableError(updated, now: now) ?? Self.wrong(attemptsLeft: 0)
    }

    /// RAIN_102's reason for a challenge id that names no pending code.
    static let noPendingCode = CodeRejectionReason.noPendingCode.rawValue

    private static func wrong(attemptsLeft: Int) -> RainError {
        let noun = attemptsLeft == 1 ? "attempt" : "attempts"
        return RainError(
            .invalidLoginCode, "the code is wrong; \(attemptsLeft) \(noun) left",
            details: RainError.Details(
                attemptsRemaining: UInt32(clamping: attemptsLeft), reason: CodeRejectionReason.wrong.rawValue))
    }

    /// Throws RAIN_203 when the challenge can no longer be confirmed.
    static func requireUsable(_ challenge: ChallengeRecord, now: Date) throws(RainError) {
        if let error = unusableError(challenge, now: now) { throw error }
    }

    /// The RAIN_203 for a challenge that can no longer be confirmed, or nil when it can.
    private static func unusableError(_ challenge: ChallengeRecord, now: Date) -> RainError? {
        func error(_ reason: CodeRejectionReason, _ message: String) -> RainError {
            RainError(
                .invalidLoginCode, message, details: RainError.Details(attemptsRemaining: 0, reason: reason.rawValue))
        }
        switch challenge.state {
        case .used: return error(.used, "the code was already used; send a new one to log in again")
        case .retired: return error(.retired, "a newer code replaced this one; use the latest code or send a new one")
        case .locked: return error(.locked, "too many wrong attempts; send a new code")
        case .pending:
            return now >= challenge.expiresAt ? error(.expired, "the code expired; send a new one") : nil
        }
    }

    // MARK: - Refresh

    /// Rotates a session's tokens (see `Authority.refreshSession` for the rules).
    ///
    /// The lookup, the checks and the rotation or revocation run in one store transaction, so
    /// concurrent refreshes of one token are serialized: the first rotates, the others find the
    /// token just rotated out within the grace window and get the same pair.
    /// - Throws: RAIN_201 with `details.reason` `refresh_rejected`, `refresh_token_reused`,
    ///   `device_unbound`, `revoked_elsewhere`, `revoked` or `refresh_expired`; RAIN_502 when the
    ///   store fails.
    public func refreshSession(_ request: RefreshRequest, proof: DeviceProof) async throws(RainError) -> SessionTokens {
        try requireServed(request.appID)
        // No proof changes nothing: the device could not prove (a TPM, a keyring), which is no theft.
        guard !proof.isEmpty else { throw DeviceBinding.proofRequired() }
        let now = clock.now
        let keys = self.keys
        let settings = self.settings
        let verdict = try await store.refreshSession(
            appID: request.appID, refreshHash: keys.tokenHash(request.refreshToken), now: now
        ) { candidate in
            Self.decideRefresh(candidate, request: request, proof: proof, now: now, keys: keys, settings: settings)
        }
        switch verdict.outcome {
        case .rotated(let tokens, let generation):
            logger.info(
                "session.refreshed",
                ["app": request.appID, "session": verdict.sessionID ?? "", "generation": String(generation)])
            return tokens
        case .replayed(let tokens, let generation):
            logger.info(
                "session.refresh_repeated",
                ["app": request.appID, "session": verdict.sessionID ?? "", "generation": String(generation)])
            return tokens
        case .unproven:
            throw DeviceBinding.proofRequired()
        case .refused(let reason, let revoked):
            if let revoked {
                logger.warning(
                    "session.family_revoked",
                    [
                        "app": request.appID, "session": verdict.sessionID ?? "", "device": request.deviceID,
                        "reason": revoked,
                    ])
            } else {
                logger.info(
                    "session.refresh_refused",
                    ["app": request.appID, "session": verdict.sessionID ?? "-", "reason": reason])
            }
            throw Self.sessionError(reason)
        }
    }

    /// What a refresh decided, computed inside the store's transaction.
    struct RefreshVerdict: Sendable {
        enum Outcome: Sendable {
            /// Rotated: the new pair and the new generation number.
            case rotated(SessionTokens, generation: Int)
            /// A repeat within the grace window: the pair issued at the last rotation.
            case replayed(SessionTokens, generation: Int)
            /// Refused with this RAIN_201 reason; `revoked` is the revocation reason when the
            /// refusal also revoked the family.
            case refused(reason: String, revoked: String?)
            /// Refused with RAIN_501 `device_proof_required`: nothing proven, nothing changed.
            case unproven
        }
        var outcome: Outcome
        var sessionID: String?
    }

    /// The refresh rules, as a pure function of what the store found (no I/O: it runs while the
    /// store holds its write lock).
    static func decideRefresh(
        _ candidate: RefreshCandidate?, request: RefreshRequest, proof: DeviceProof, now: Date, keys: AuthorityKeys,
        settings: AuthoritySettings
    ) -> (change: SessionRefreshChange, verdict: RefreshVerdict) {
        func refuse(_ reason: String, sessionID: String?) -> (SessionRefreshChange, RefreshVerdict) {
            (.none, RefreshVerdict(outcome: .refused(reason: reason, revoked: nil), sessionID: sessionID))
        }
        func revoke(_ revokeReason: String, _ reason: String, sessionID: String) -> (
            SessionRefreshChange, RefreshVerdict
        ) {
            (
                .revoke(reason: revokeReason),
                RefreshVerdict(outcome: .refused(reason: reason, revoked: revokeReason), sessionID: sessionID)
            )
        }

        guard let candidate else { return refuse(RefreshRefusal.rejected, sessionID: nil) }
        let session = candidate.session
        if session.revokedAt != nil {
            return refuse(RefreshRefusal.reason(forRevoked: session.revokeReason), sessionID: session.id)
        }
        // The device binding (the connection's proof): no device clock is involved. A proof by
        // another key means the token was copied: the family is burned whichever generation was
        // presented. No proof changes nothing.
        switch binding(of: session, proof: proof) {
        case .unbound:
            return refuse(RefreshRefusal.deviceUnbound, sessionID: session.id)
        case .unproven:
            return (.none, RefreshVerdict(outcome: .unproven, sessionID: session.id))
        case .otherKey:
            return revoke(SessionRevokeReason.stolenToken, RefreshRefusal.rejected, sessionID: session.id)
        case .bound:
            break
        }
        // The right key under another device id: a confused device, not a thief.
        guard request.deviceID == session.deviceID else { return refuse(RefreshRefusal.rejected, sessionID: session.id) }

        if now >= session.refreshIssuedAt.adding(settings.refreshTokenLifetime) {
            return revoke(SessionRevokeReason.refreshExpired, RefreshRefusal.expired, sessionID: session.id)
        }

        switch candidate.generation {
        case .current:
            let next = keys.rotatedTokens(from: request.refreshToken)
            let rotation = SessionRotation(
                accessHash: keys.tokenHash(next.accessToken), refreshHash: keys.tokenHash(next.refreshToken),
                accessExpiresAt: now.adding(settings.accessTokenLifetime), rotatedAt: now)
            let tokens = SessionTokens(
                accessToken: next.accessToken, refreshToken: next.refreshToken,
                accessLifetime: settings.accessTokenLifetime)
            return (
                .rotate(rotation),
                RefreshVerdict(
                    outcome: .rotated(tokens, generation: session.refreshGeneration + 1), sessionID: session.id)
            )
        case .previous:
            let next = keys.rotatedTokens(from: request.refreshToken)
            guard let rotatedAt = session.rotatedAt,
                // Within the grace window (a reply lost in transit), or later while the device has
                // never used the current pair: a device that could not save the pair (a full disk)
                // and restarted asks again with the token it kept. The proof of the session's device
                // key was checked above; once the pair was used, a repeat is reuse as before.
                abs(now.unixMilliseconds - rotatedAt.unixMilliseconds) <= settings.refreshGraceWindow.milliseconds
                    || !session.isPairUsed,
                // The pair re-derived from the previous token is the current one, unless the master
                // key changed since: then it is not the same pair and must not be handed out.
                constantTimeEquals(keys.tokenHash(next.refreshToken), session.refreshHash)
            else {
                return revoke(SessionRevokeReason.reused, RefreshRefusal.reused, sessionID: session.id)
            }
            // What is left of the access token issued at the rotation.
            let remaining = max(0, session.accessExpiresAt.unixMilliseconds - now.unixMilliseconds)
            let tokens = SessionTokens(
                accessToken: next.accessToken, refreshToken: next.refreshToken,
                accessLifetime: .milliseconds(remaining))
            return (
                .none,
                RefreshVerdict(outcome: .replayed(tokens, generation: session.refreshGeneration), sessionID: session.id)
            )
        case .older:
            return revoke(SessionRevokeReason.reused, RefreshRefusal.reused, sessionID: session.id)
        }
    }

    /// RAIN_201 `details.reason` values of refresh and account reads (the wire strings of
    /// `SessionEndReason`, shared with the device).
    enum RefreshRefusal {
        /// Unknown token, or no valid proof of possession of the device key.
        static let rejected = SessionEndReason.refreshRejected.rawValue
        /// A rotated token presented again outside the grace window.
        static let reused = SessionEndReason.refreshTokenReused.rawValue
        /// The session has no device key.
        static let deviceUnbound = SessionEndReason.deviceUnbound.rawValue
        /// The account logged in on another device.
        static let revokedElsewhere = SessionEndReason.revokedElsewhere.rawValue
        /// Logout, or a newer login on the same device.
        static let revoked = SessionEndReason.revoked.rawValue
        /// Unrefreshed for longer than the refresh-token lifetime.
        static let expired = SessionEndReason.refreshExpired.rawValue
        /// The access token is past its expiry.
        static let accessExpired = SessionEndReason.accessExpired.rawValue
        /// The access token is unknown (or was rotated away).
        static let invalidToken = SessionEndReason.invalidToken.rawValue

        /// The refusal reason for a refresh of a revoked session.
        static func reason(forRevoked revokeReason: String?) -> String {
            switch revokeReason {
            case SessionRevokeReason.revokedElsewhere: revokedElsewhere
            case SessionRevokeReason.reused: reused
            case SessionRevokeReason.stolenToken: rejected
            case SessionRevokeReason.refreshExpired: expired
            default: revoked
            }
        }
    }

    /// RAIN_201 with `reason` in the details and a message for people.
    static func sessionError(_ reason: String) -> RainError {
        let message =
            switch reason {
            case RefreshRefusal.reused:
                "the refresh token was already used; the session was ended for safety; log in again"
            case RefreshRefusal.deviceUnbound:
                "the session is not bound to a device key and cannot be refreshed; log in again"
            case RefreshRefusal.revokedElsewhere: "the account logged in on another device; log in again"
            case RefreshRefusal.revoked: "the session was ended; log in again"
            case RefreshRefusal.expired: "the session expired; log in again"
            case RefreshRefusal.accessExpired: "the access token expired; refresh the session"
            case RefreshRefusal.invalidToken: "the access token is not valid; refresh the session or log in again"
            default: "the refresh was refused; log in again"
            }
        return RainError(.sessionExpired, message, details: RainError.Details(reason: reason))
    }

    // MARK: - Account

    /// The account behind a live access token (see `Authority.accountInfo`).
    /// - Throws: RAIN_201 with `details.reason` `invalid_token`, `revoked_elsewhere`, `revoked` or
    ///   `access_expired` (a revoked session reports its revocation even once the token expired);
    ///   RAIN_502 when the store fails.
    public func accountInfo(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError)
        -> AccountInfo
    {
        try requireServed(appID)
        guard !proof.isEmpty else { throw DeviceBinding.proofRequired() }
        let now = clock.now
        // One trip to the store: the session and the passkeys together (the hottest authority read).
        guard let found = try await store.accountAccessWithPasskeys(appID: appID, accessHash: keys.tokenHash(accessToken))
        else { throw Self.sessionError(RefreshRefusal.invalidToken) }
        try Self.requireLive(found.access, now: now)
        try await requireBinding(found.access.session, proof: proof)
        await markUsed(found.access)
        return try Self.accountInfo(found.access, passkeys: found.passkeys)
    }

    /// The account of a live session with its contacts, backup status and passkeys.
    /// - Throws: RAIN_404 when the account has no wallet; RAIN_502 when the store fails.
    func accountInfo(_ access: AccountAccess) async throws(RainError) -> AccountInfo {
        try Self.accountInfo(access, passkeys: try await store.passkeyCredentials(accountID: access.account.id))
    }

    /// The account of a live session with its contacts, backup status and these passkeys.
    /// - Throws: RAIN_404 when the account has no wallet.
    static func accountInfo(_ access: AccountAccess, passkeys records: [PasskeyCredentialRecord]) throws(RainError)
        -> AccountInfo
    {
        guard !access.account.walletID.isEmpty else { throw Self.noWallet() }
        let passkeys = records.map {
            PasskeyInfo(
                credentialID: Base64URL.encode($0.credentialID), rpID: $0.rpID, createdAt: $0.createdAt,
                lastUsedAt: $0.lastUsedAt)
        }
        // Every stored contact is verified (attached only by a confirmed code).
        return AccountInfo(
            accountID: access.account.id, walletID: access.account.walletID, createdAt: access.account.createdAt,
            contacts: access.contacts, needsBackupEmail: !AccountInfo.hasEmail(access.contacts), passkeys: passkeys)
    }

    /// The session behind a live access token, with its account, used by a caller that proved the
    /// session's device key.
    /// - Throws: RAIN_201 with `details.reason` `invalid_token`, `revoked_elsewhere`, `revoked`,
    ///   `access_expired`, `device_unbound` or `refresh_rejected` (another key: the session is now
    ///   revoked); RAIN_501 `device_proof_required`; RAIN_502 when the store fails.
    func liveAccess(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError) -> AccountAccess {
        try requireServed(appID)
        guard !proof.isEmpty else { throw DeviceBinding.proofRequired() }
        let now = clock.now
        guard let access = try await store.accountAccess(appID: appID, accessHash: keys.tokenHash(accessToken)) else {
            throw Self.sessionError(RefreshRefusal.invalidToken)
        }
        try Self.requireLive(access, now: now)
        try await requireBinding(access.session, proof: proof)
        await markUsed(access)
        return access
    }

    /// How a session relates to a caller's proof.
    enum DeviceBindingCheck: Equatable {
        /// A proven key is the session's device key or its pending one.
        case bound
        /// The session has no device key (issued unbound, or before schema version 2).
        case unbound
        /// The caller proved no key.
        case unproven
        /// The caller proved other keys only: the token was copied.
        case otherKey
    }

    /// Compares the session's keys (wire bytes: Ed25519 or P-256) with the proven ones.
    static func binding(of session: SessionRecord, proof: DeviceProof) -> DeviceBindingCheck {
        guard let key = session.devicePublicKey else { return .unbound }
        if proof.isEmpty { return .unproven }
        if proof.contains(wireBytes: key) { return .bound }
        if let pending = session.pendingDevicePublicKey, proof.contains(wireBytes: pending) { return .bound }
        return .otherKey
    }

    /// Throws unless `proof` holds the session's key: RAIN_501 without a proof (nothing changes),
    /// RAIN_201 `device_unbound` for a session without a key, and for a proof by another key
    /// RAIN_201 `refresh_rejected` after revoking the session family (`stolen_token`).
    func requireBinding(_ session: SessionRecord, proof: DeviceProof) async throws(RainError) {
        switch Self.binding(of: session, proof: proof) {
        case .bound:
            return
        case .unproven:
            throw DeviceBinding.proofRequired()
        case .unbound:
            throw Self.sessionError(RefreshRefusal.deviceUnbound)
        case .otherKey:
            try await store.revokeSession(id: session.id, reason: SessionRevokeReason.stolenToken, now: clock.now)
            publishRevocation(of: session, reason: SessionRevokeReason.stolenToken)
            logger.warning(
                "session.family_revoked",
                [
                    "app": session.appID, "session": session.id, "device": session.deviceID,
                    "reason": SessionRevokeReason.stolenToken,
                ])
            throw Self.sessionError(RefreshRefusal.rejected)
        }
    }

    /// Records the first use of a session's current pair (`SessionRecord.isPairUsed`): from then
    /// on a repeat of the previous refresh token outside the grace window is reuse. Writes only
    /// when the mark is not set yet. A failure to mark is logged and the call goes on: it is a
    /// read, and the pair then stays recoverable a little longer.
    func markUsed(_ access: AccountAccess) async {
        guard !access.session.isPairUsed else { return }
        do {
            try await store.markPairUsed(sessionID: access.session.id, accessHash: access.session.accessHash)
        } catch {
            logger.warning("session.mark_used_failed", ["session": access.session.id, "error": error.code.description])
        }
    }

    /// Throws RAIN_201 unless the session behind `access` is unrevoked and its access token unexpired.
    static func requireLive(_ access: AccountAccess, now: Date) throws(RainError) {
        if access.session.revokedAt != nil {
            throw sessionError(
                access.session.revokeReason == SessionRevokeReason.revokedElsewhere
                    ? RefreshRefusal.revokedElsewhere : RefreshRefusal.revoked)
        }
        guard now < access.session.accessExpiresAt else { throw sessionError(RefreshRefusal.accessExpired) }
    }

    // MARK: - Wallets

    /// The bytes of 128-bit entropy a wallet is created from (12 words).
    static let walletEntropyByteCount = 16

    /// The associated data a wallet's entropy is sealed with: `rain.wallet.v1:<walletID>`, so a
    /// ciphertext moved to another wallet's row does not decrypt.
    static func walletAssociatedData(walletID: String) -> [UInt8] { Array("rain.wallet.v1:\(walletID)".utf8) }

    /// The wallet behind a live access token (see `Authority.wallet`).
    /// - Throws: RAIN_201 like `accountInfo`; RAIN_404 when the account has no wallet; RAIN_502
    ///   when the store fails or the entropy does not decrypt.
    public func wallet(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError) -> WalletInfo {
        try requireServed(appID)
        guard !proof.isEmpty else { throw DeviceBinding.proofRequired() }
        let now = clock.now
        // One trip to the store: the session and the wallet together.
        guard let found = try await store.accountAccessWithWallet(appID: appID, accessHash: keys.tokenHash(accessToken))
        else { throw Self.sessionError(RefreshRefusal.invalidToken) }
        try Self.requireLive(found.access, now: now)
        try await requireBinding(found.access.session, proof: proof)
        await markUsed(found.access)
        guard let stored = found.wallet else { throw Self.noWallet() }
        return try Self.walletInfo(stored.hasAllKeys ? stored : try await completeKeys(stored))
    }

    /// What Wallet/Get shows of a wallet.
    /// - Throws: RAIN_502 when the wallet has no addresses.
    static func walletInfo(_ wallet: WalletRecord) throws(RainError) -> WalletInfo {
        guard let ethereum = wallet.ethereumAddress, let solana = wallet.solanaAddress else {
            throw RainError(.internalError, "the wallet's addresses are missing")
        }
        return WalletInfo(walletID: wallet.id, createdAt: wallet.createdAt, ethereumAddress: ethereum, solanaAddress: solana)
    }

    /// The wallet's recovery phrase and private keys (see `Authority.exportWallet`). Logs that an
    /// export happened, never what it returned.
    /// - Throws: RAIN_201 like `accountInfo`; RAIN_404 when the account has no wallet; RAIN_502
    ///   when the store fails or the entropy does not decrypt (another master key).
    public func exportWallet(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError)
        -> WalletSecrets
    {
        let access = try await liveAccess(appID: appID, accessToken: accessToken, proof: proof)
        let wallet = try await completedWallet(accountID: access.account.id)
        let derived = try WalletKeys.derive(entropy: try openEntropy(wallet))
        logger.info("wallet.exported", ["app": appID, "account": access.account.id, "wallet": wallet.id])
        return WalletSecrets(
            mnemonic: derived.mnemonic, ethereumPrivateKeyHex: derived.ethereumPrivateKeyHex,
            solanaKeypairBase58: derived.solanaKeypairBase58)
    }

    /// Gives every wallet that lacks its entropy or an address its keys: new entropy when it has
    /// none, else the missing addresses derived from its entropy. Each wallet is one store update.
    /// - Returns: how many wallets were completed.
    /// - Throws: RAIN_502 when the store fails or an entropy does not decrypt.
    @discardableResult
    public func backfillWallets() async throws(RainError) -> Int {
        var completed = 0
        for wallet in try await store.walletsMissingKeys() {
            _ = try await completeKeys(wallet)
            completed += 1
        }
        if completed > 0 { logger.info("wallet.backfill", ["wallets": String(completed)]) }
        return completed
    }

    /// The account's wallet with all its keys, completing it first when it lacks some.
    /// - Throws: RAIN_404 when the account has no wallet; RAIN_502 when the store fails.
    private func completedWallet(accountID: String) async throws(RainError) -> WalletRecord {
        guard let wallet = try await store.wallet(accountID: accountID) else { throw Self.noWallet() }
        return wallet.hasAllKeys ? wallet : try await completeKeys(wallet)
    }

    /// Stores what `wallet` lacks. The update only applies while the wallet's ciphertext is still
    /// the one read, so a concurrent backfill wins cleanly and this one re-reads its result.
    private func completeKeys(_ wallet: WalletRecord) async throws(RainError) -> WalletRecord {
        var current = wallet
        for _ in 0..<3 {
            if current.hasAllKeys { return current }
            let material: WalletKeyMaterial
            if let ciphertext = current.entropyCiphertext {
                let derived = try WalletKeys.derive(entropy: try openEntropy(current))
                material = WalletKeyMaterial(
                    entropyCiphertext: ciphertext, entropyKeyID: current.entropyKeyID ?? keys.masterKeyID,
                    ethereumAddress: derived.ethereumAddress, solanaAddress: derived.solanaAddress)
            } else {
                material = try newWalletKeyMaterial(walletID: current.id)
            }
            if try await store.storeWalletKeys(
                walletID: current.id, keys: material, expectedCiphertext: current.entropyCiphertext)
            {
                logger.info(
                    "wallet.keys_completed",
                    ["wallet": current.id, "newEntropy": String(current.entropyCiphertext == nil)])
                current.entropyCiphertext = material.entropyCiphertext
                current.entropyKeyID = material.entropyKeyID
                current.ethereumAddress = material.ethereumAddress
                current.solanaAddress = material.solanaAddress
                return current
            }
            guard let reread = try await store.wallet(accountID: current.accountID) else { throw Self.noWallet() }
            current = reread
        }
        throw RainError(.internalError, "the wallet's keys could not be stored; try again")
    }

    /// New entropy for wallet `walletID`, sealed with the wallet-encryption key, and its addresses.
    func newWalletKeyMaterial(walletID: String) throws(RainError) -> WalletKeyMaterial {
        let entropy = try SecureRandom.bytes(count: Self.walletEntropyByteCount)
        let derived = try WalletKeys.derive(entropy: entropy)
        let sealed = try AESGCM.seal(
            entropy, using: keys.walletKey, authenticating: Self.walletAssociatedData(walletID: walletID))
        return WalletKeyMaterial(
            entropyCiphertext: sealed.combined, entropyKeyID: keys.masterKeyID,
            ethereumAddress: derived.ethereumAddress, solanaAddress: derived.solanaAddress)
    }

    /// Decrypts a wallet's entropy.
    /// - Throws: RAIN_502 when it has none, it was sealed under another master key, or it does not
    ///   authenticate.
    private func openEntropy(_ wallet: WalletRecord) throws(RainError) -> [UInt8] {
        guard let ciphertext = wallet.entropyCiphertext else {
            throw RainError(.internalError, "the wallet has no entropy")
        }
        let keyID = wallet.entropyKeyID ?? keys.masterKeyID
        guard keyID == keys.masterKeyID else {
            throw RainError(
                .internalError,
                "wallet \(wallet.id) is encrypted under master key \(keyID), not this authority's (\(keys.masterKeyID))")
        }
        do {
            return try AESGCM.open(
                AESGCM.SealedBox(combined: ciphertext), using: keys.walletKey,
                authenticating: Self.walletAssociatedData(walletID: wallet.id))
        } catch {
            throw RainError(
                .internalError, "wallet \(wallet.id): its entropy does not decrypt", underlying: SendableErrorDescription(error))
        }
    }

    /// RAIN_404 for an account without a wallet.
    static func noWallet() -> RainError { RainError(.unavailable, "the account's wallet is unavailable") }

    // MARK: - Sessions, outbox, maintenance

    /// Revokes the session holding `refreshToken` as its current or previous refresh token (reason
    /// `logout`); unknown tokens succeed. The device binding is that of every other token call: a
    /// proof by another key than the session's (or its pending one) is a copied token, so the
    /// session family is revoked as stolen (`stolen_token`, not `logout`) and the call is refused.
    /// The lookup, the check and the revocation run in one store transaction.
    /// - Throws: RAIN_501 `device_proof_required` without a proof; RAIN_201 `refresh_rejected`
    ///   for a proof by another key; RAIN_502 when the store fails.
    public func revokeSession(appID: String, refreshToken: String, proof: DeviceProof) async throws(RainError) {
        try requireServed(appID)
        guard !proof.isEmpty else { throw DeviceBinding.proofRequired() }
        let verdict = try await store.refreshSession(
            appID: appID, refreshHash: keys.tokenHash(refreshToken), now: clock.now
        ) { candidate in
            Self.decideLogout(candidate, proof: proof)
        }
        switch verdict {
        case .nothing:
            return
        case .loggedOut:
            logger.info("session.logout", ["app": appID])
        case .stolen(let session):
            publishRevocation(of: session, reason: SessionRevokeReason.stolenToken)
            logger.warning(
                "session.family_revoked",
                [
                    "app": session.appID, "session": session.id, "device": session.deviceID,
                    "reason": SessionRevokeReason.stolenToken,
                ])
            throw Self.sessionError(RefreshRefusal.rejected)
        }
    }

    /// What a logout decided.
    enum LogoutVerdict: Sendable, Equatable {
        /// An unknown, older or already revoked token: nothing to do, and a success.
        case nothing
        /// The session is revoked (`logout`).
        case loggedOut
        /// A proof by another key: the family is revoked as stolen.
        case stolen(SessionRecord)
    }

    /// The logout rules, a pure function of what the store found (it runs inside the transaction).
    /// A session without a device key (issued unbound) may still be logged out: ending it gives no
    /// one anything, and such a session serves no other call.
    static func decideLogout(_ candidate: RefreshCandidate?, proof: DeviceProof) -> (
        change: SessionRefreshChange, verdict: LogoutVerdict
    ) {
        guard let candidate, candidate.session.revokedAt == nil else { return (.none, .nothing) }
        if binding(of: candidate.session, proof: proof) == .otherKey {
            return (.revoke(reason: SessionRevokeReason.stolenToken), .stolen(candidate.session))
        }
        // Like before: only the current or the previous refresh token logs out.
        guard candidate.generation != .older else { return (.none, .nothing) }
        return (.revoke(reason: SessionRevokeReason.logout), .loggedOut)
    }

    /// The development outbox.
    /// - Throws: RAIN_202 unless `settings.isDevOutboxEnabled` and an outbox sender is configured.
    public func listOutbox() async throws(RainError) -> [OutboxDelivery] {
        guard settings.isDevOutboxEnabled, let outbox else {
            throw RainError(.unauthorized, "the development outbox is disabled")
        }
        return try await outbox.entries()
    }

    /// Deletes, in one pass: challenges and passkey ceremonies that expired more than
    /// `settings.pruneRetention` ago (challenges are kept at least `sendLimits.longestWindow`
    /// whatever the retention, since the send limits count them), sessions revoked more than
    /// `settings.pruneRetention` ago, refresh-token hashes rotated out more than
    /// `refreshTokenLifetime` ago (beyond the previous generation, which each session keeps;
    /// presenting such an old token is then refused as unknown, `refresh_rejected`, instead of
    /// revoking the session as reuse), and development-outbox deliveries sent more than
    /// `settings.pruneRetention` ago, and the SMS budget's slots that left its window
    /// (`SMSCodeSender.budgetWindow`). Logs one `prune` line with the counts (never contents).
    /// - Throws: RAIN_502 when the store or the outbox file fails.
    @discardableResult
    package func pruneExpired() async throws(RainError) -> PruneResult {
        let now = clock.now
        let cutoff = now.adding(.zero - settings.pruneRetention)
        let challengeCutoff = now.adding(.zero - settings.challengeRetention)
        var result = try await store.prune(
            challengesExpiredBefore: challengeCutoff, sessionsRevokedBefore: cutoff,
            refreshTokensRetiredBefore: now.adding(.zero - settings.refreshTokenLifetime),
            smsSlotsTakenBefore: now.adding(.zero - SMSCodeSender.budgetWindow))
        if let outbox { result.outboxEntriesDeleted = try await outbox.prune(olderThan: cutoff) }
        logger.info(
            "prune",
            [
                "challenges": String(result.challengesDeleted), "sessions": String(result.sessionsDeleted),
                "retiredRefreshTokens": String(result.retiredRefreshTokensDeleted),
                "passkeyCeremonies": String(result.passkeyCeremoniesDeleted),
                "outbox": String(result.outboxEntriesDeleted), "smsSlots": String(result.smsSlotsDeleted),
            ])
        return result
    }

    // MARK: - Input checks

    static func requireNormalized(_ contact: RainWalletContact) throws(RainError) {
        let normalized = try contact.normalized()
        guard normalized == contact else {
            throw RainError.invalid(
                "the contact is not normalized; pass it through RainWalletContact.normalized() first",
                field: contact.kindName, reason: "not_normalized")
        }
    }

    /// The device key of a login: nil for an empty one (an unbound session), RAIN_102 (field
    /// `devicePublicKey`) for anything but a raw 32-byte Ed25519 key or a 65-byte uncompressed
    /// P-256 point (`DevicePublicKey(wireBytes:)`).
    static func deviceKey(_ bytes: [UInt8]) throws(RainError) -> DevicePublicKey? {
        guard !bytes.isEmpty else { return nil }
        return try DevicePublicKey(wireBytes: bytes)
    }

    // MARK: - Device key moves

    /// Step 1 of a device key move (see `Authority.rebindDevice`): the device's live sessions bound
    /// to a proven key also accept `newKey`. Idempotent.
    /// - Throws: RAIN_501 `device_proof_required` when `proof` lacks `newKey` or holds no other
    ///   key, or is another device's; RAIN_502 when the store fails.
    public func rebindDevice(deviceID: String, newKey: DevicePublicKey, proof: DeviceProof) async throws(RainError) {
        try Self.requireIdentifier(deviceID, field: "deviceId")
        let current = proof.keys.filter { $0 != newKey }
        guard proof.deviceID == deviceID, proof.contains(newKey), !current.isEmpty else {
            throw DeviceBinding.proofRequired()
        }
        let changed = try await store.rebindDevice(
            deviceID: deviceID, currentKeys: current.map(\.wireBytes), newKey: newKey.wireBytes)
        logger.info("device.rebind", ["device": deviceID, "key": newKey.keyID, "sessions": String(changed)])
    }

    /// Step 2 (see `Authority.confirmDeviceKey`): the device's sessions pending `key` are bound to
    /// it alone. Idempotent.
    /// - Throws: RAIN_501 `device_proof_required` when `proof` lacks `key` or is another device's;
    ///   RAIN_502 when the store fails.
    public func confirmDeviceKey(deviceID: String, key: DevicePublicKey, proof: DeviceProof) async throws(RainError) {
        try Self.requireIdentifier(deviceID, field: "deviceId")
        guard proof.deviceID == deviceID, proof.contains(key) else { throw DeviceBinding.proofRequired() }
        let changed = try await store.confirmDeviceKey(deviceID: deviceID, key: key.wireBytes)
        logger.info("device.key_confirmed", ["device": deviceID, "key": key.keyID, "sessions": String(changed)])
    }

    /// RAIN_102 (field `appId`, reason `app_not_served`) for an app id outside
    /// `AuthoritySettings.servedAppIDs`, or one that is empty or too long.
    func requireServed(_ appID: String) throws(RainError) {
        try Self.requireIdentifier(appID, field: "appId")
        guard let served = settings.servedAppIDs, !served.contains(appID) else { return }
        let shown = appID.utf8.count <= 64 ? appID : String(decoding: appID.utf8.prefix(64), as: UTF8.self) + "…"
        throw RainError.invalid(
            "this authority does not serve app id \"\(shown)\"; start it with that app in --apps, or use one of "
                + served.sorted().joined(separator: ", "),
            field: "appId", reason: Self.appNotServedReason)
    }

    /// The `details.reason` of a call for an app the authority does not serve.
    public static let appNotServedReason = "app_not_served"

    static func requireIdentifier(_ value: String, field: String) throws(RainError) {
        guard !value.isEmpty, value.utf8.count <= 256 else {
            throw RainError.invalid("\(field) must be 1 to 256 bytes", field: field)
        }
    }

    static func isWellFormedCode(_ code: String) -> Bool {
        let bytes = Array(code.utf8)
        return bytes.count == 6 && bytes.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }
}
