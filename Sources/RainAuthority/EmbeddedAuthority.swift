import Foundation
import RainCore
import RainCrypto

/// The authority running in-process: accounts, login codes, wallets and session tokens on an
/// `AuthorityStore` (SQLite in the state directory by default), codes delivered by a `CodeSender`
/// (the development outbox by default).
///
/// Rules (DESIGN §4): 6-digit codes from a CSPRNG, stored only as a keyed hash bound to the
/// challenge, compared in constant time; 5-minute lifetime; locked after 3 wrong attempts; a resend
/// or another contact on the same device retires the device's pending code; at most 3 live codes
/// per account across devices (a 4th retires the oldest). A first login creates the account and
/// its wallet; every login revokes the account's sessions on other devices. Codes and tokens are
/// never logged.
public final class EmbeddedAuthority: Authority {
    /// Where data lives.
    public let store: any AuthorityStore
    /// The derived keys.
    public let keys: AuthorityKeys
    /// Lifetimes and limits.
    public let settings: AuthoritySettings
    private let clock: any RainClock
    private let sender: any CodeSender
    private let outbox: OutboxCodeSender?
    private let logger: Logger

    /// How long expired challenges and revoked sessions are kept before `pruneExpired()` deletes them.
    public static let pruneRetention: Duration = .seconds(86_400)

    /// An authority on an explicit store and keys.
    /// - Parameters:
    ///   - sender: delivers codes.
    ///   - outbox: the outbox `listOutbox()` reads, or nil when there is none (then it is RAIN_202).
    public init(
        store: any AuthorityStore, keys: AuthorityKeys, settings: AuthoritySettings = AuthoritySettings(),
        clock: any RainClock = SystemClock(), sender: any CodeSender, outbox: OutboxCodeSender?, logger: Logger
    ) {
        self.store = store
        self.keys = keys
        self.settings = settings
        self.clock = clock
        self.sender = sender
        self.outbox = outbox
        self.logger = logger
    }

    /// An authority on `stateDirectory` (created 0700 if missing): `authority.key`,
    /// `authority.sqlite3` and, with the default sender, `outbox.jsonl`.
    /// - Parameter sender: delivers codes; nil means the outbox in the state directory. An
    ///   `OutboxCodeSender` passed here is also the one `listOutbox()` reads.
    /// - Throws: RAIN_502 when the key file or the database cannot be opened.
    public convenience init(
        stateDirectory: String, settings: AuthoritySettings = AuthoritySettings(), clock: any RainClock = SystemClock(),
        sender: (any CodeSender)? = nil, logger: Logger
    ) async throws(RainError) {
        let keys = try await AuthorityKeys.load(stateDirectory: stateDirectory)
        let store = try await SQLiteAuthorityStore.open(stateDirectory: stateDirectory)
        let chosen = sender ?? OutboxCodeSender(stateDirectory: stateDirectory, logger: logger.child("outbox"))
        self.init(
            store: store, keys: keys, settings: settings, clock: clock, sender: chosen,
            outbox: chosen as? OutboxCodeSender, logger: logger)
    }

    // MARK: - Send

    /// Sends a login code (see `Authority.sendLoginCode`).
    ///
    /// - Throws: RAIN_102 for a contact that is not normalized or an empty app/device id, RAIN_501
    ///   when delivery fails (the challenge is retired), RAIN_502 when the store fails.
    public func sendLoginCode(_ request: SendCodeRequest) async throws(RainError) -> SendCodeResult {
        try Self.requireNormalized(request.contact)
        try Self.requireIdentifier(request.appID, field: "appId")
        try Self.requireIdentifier(request.deviceID, field: "deviceId")

        let now = clock.now
        let challengeID = try SecureRandom.identifier(prefix: "chl")
        let code = try SecureRandom.digits(count: 6)
        let expiresAt = Date(unixMilliseconds: now.adding(settings.codeLifetime).unixMilliseconds)
        let insertion = try await store.insertChallenge(
            NewChallenge(
                id: challengeID, appID: request.appID, deviceID: request.deviceID, contact: request.contact,
                codeHash: keys.codeHash(challengeID: challengeID, code: code), createdAt: now, expiresAt: expiresAt),
            maxActivePerAccount: settings.maxActiveCodesPerAccount)

        let delivery = OutboxDelivery(
            appID: request.appID, kind: request.contact.kindName, contact: request.contact.value, code: code,
            sentAt: now)
        do {
            try await sender.deliver(delivery)
        } catch {
            // A code nobody received must not count as live.
            try? await store.retireChallenge(id: challengeID)
            logger.warning(
                "code.delivery_failed",
                ["app": request.appID, "kind": request.contact.kindName, "challenge": challengeID])
            if let rain = error as? RainError, rain.code == .provider { throw rain }
            throw RainError(
                .provider, "the login code could not be delivered; try again later",
                underlying: SendableErrorDescription(error))
        }
        logger.info(
            "code.sent",
            [
                "app": request.appID, "kind": request.contact.kindName,
                "contact": ContactRedaction.redacted(request.contact), "challenge": challengeID,
                "device": request.deviceID, "retired": String(insertion.retiredChallengeIDs.count),
            ])
        return SendCodeResult(challengeID: challengeID, contact: request.contact, expiresAt: expiresAt)
    }

    // MARK: - Confirm

    /// Confirms a login code (see `Authority.confirmLoginCode`).
    ///
    /// - Throws: RAIN_203 with `reason` wrong (and `attemptsRemaining`), locked, expired, used or
    ///   retired; RAIN_102 `no_pending_code` when the challenge never existed for this app and device;
    ///   RAIN_404 when the account has no wallet record; RAIN_502 when the store fails.
    public func confirmLoginCode(_ request: ConfirmCodeRequest) async throws(RainError) -> LoginResult {
        let now = clock.now
        guard let challenge = try await store.challenge(id: request.challengeID),
            challenge.appID == request.appID, challenge.deviceID == request.deviceID
        else {
            throw RainError.invalid("no pending code; send a new one", field: "challengeId", reason: "no_pending_code")
        }
        try Self.requireUsable(challenge, now: now)

        let submitted = Self.isWellFormedCode(request.code) ? request.code : ""
        let expected = challenge.codeHash
        let actual = keys.codeHash(challengeID: challenge.id, code: submitted)
        // A malformed code is hashed too (as the empty code), so it costs the same and counts as wrong.
        guard constantTimeEquals(actual, expected), !submitted.isEmpty else {
            throw try await wrongCode(challenge, now: now)
        }

        let accessToken = "rwa_" + (try SecureRandom.token())
        let refreshToken = "rwr_" + (try SecureRandom.token())
        let outcome = try await store.completeLogin(
            LoginCompletion(
                challengeID: challenge.id, appID: request.appID, deviceID: request.deviceID, contact: challenge.contact,
                newAccountID: try SecureRandom.identifier(prefix: "acct"),
                newWalletID: try SecureRandom.identifier(prefix: "wal"),
                session: NewSession(
                    id: try SecureRandom.identifier(prefix: "ses"), accessHash: keys.tokenHash(accessToken),
                    refreshHash: keys.tokenHash(refreshToken), accessExpiresAt: now.adding(settings.accessTokenLifetime)
                ),
                now: now))

        switch outcome {
        case .challengeUnavailable(let current):
            // Another confirm (or a resend) won the race: report the challenge as it is now.
            guard let current else {
                throw RainError.invalid(
                    "no pending code; send a new one", field: "challengeId", reason: "no_pending_code")
            }
            try Self.requireUsable(current, now: now)
            throw RainError(.internalError, "the login could not be completed; try again")
        case .loggedIn(let record):
            logger.info(
                "login",
                [
                    "app": request.appID, "account": record.accountID, "created": String(record.accountCreated),
                    "device": request.deviceID, "revokedElsewhere": String(record.revokedElsewhereCount),
                ])
            return LoginResult(
                accountID: record.accountID, walletID: record.walletID, accountCreated: record.accountCreated,
                tokens: SessionTokens(
                    accessToken: accessToken, refreshToken: refreshToken, accessLifetime: settings.accessTokenLifetime))
        }
    }

    /// Counts a wrong code and returns the error to throw.
    private func wrongCode(_ challenge: ChallengeRecord, now: Date) async throws(RainError) -> RainError {
        let maxAttempts = max(1, settings.maxWrongAttempts)
        guard
            let updated = try await store.recordWrongAttempt(
                challengeID: challenge.id, maxWrongAttempts: maxAttempts, now: now)
        else {
            return RainError.invalid("no pending code; send a new one", field: "challengeId", reason: "no_pending_code")
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

    private static func wrong(attemptsLeft: Int) -> RainError {
        let noun = attemptsLeft == 1 ? "attempt" : "attempts"
        return RainError(
            .invalidLoginCode, "the code is wrong; \(attemptsLeft) \(noun) left",
            details: RainError.Details(attemptsRemaining: UInt32(clamping: attemptsLeft), reason: "wrong"))
    }

    /// Throws RAIN_203 when the challenge can no longer be confirmed.
    private static func requireUsable(_ challenge: ChallengeRecord, now: Date) throws(RainError) {
        if let error = unusableError(challenge, now: now) { throw error }
    }

    /// The RAIN_203 for a challenge that can no longer be confirmed, or nil when it can.
    private static func unusableError(_ challenge: ChallengeRecord, now: Date) -> RainError? {
        func error(_ reason: String, _ message: String) -> RainError {
            RainError(
                .invalidLoginCode, message, details: RainError.Details(attemptsRemaining: 0, reason: reason))
        }
        switch challenge.state {
        case .used: return error("used", "the code was already used; send a new one to log in again")
        case .retired: return error("retired", "a newer code replaced this one; use the latest code or send a new one")
        case .locked: return error("locked", "too many wrong attempts; send a new code")
        case .pending:
            return now >= challenge.expiresAt ? error("expired", "the code expired; send a new one") : nil
        }
    }

    // MARK: - Sessions, outbox, maintenance

    /// Revokes the session holding `refreshToken` (reason `logout`); unknown tokens succeed.
    /// - Throws: RAIN_502 when the store fails.
    public func revokeSession(appID: String, refreshToken: String) async throws(RainError) {
        let revoked = try await store.revokeSession(
            appID: appID, refreshHash: keys.tokenHash(refreshToken), reason: SessionRevokeReason.logout, now: clock.now)
        if revoked { logger.info("session.logout", ["app": appID]) }
    }

    /// The development outbox.
    /// - Throws: RAIN_202 unless `settings.isDevOutboxEnabled` and an outbox sender is configured.
    public func listOutbox() async throws(RainError) -> [OutboxDelivery] {
        guard settings.isDevOutboxEnabled, let outbox else {
            throw RainError(.unauthorized, "the development outbox is disabled")
        }
        return try await outbox.entries()
    }

    /// Deletes challenges that expired more than a day ago and sessions revoked more than a day ago.
    /// - Throws: RAIN_502 when the store fails.
    @discardableResult
    public func pruneExpired() async throws(RainError) -> PruneResult {
        let cutoff = clock.now.adding(.zero - Self.pruneRetention)
        let result = try await store.prune(challengesExpiredBefore: cutoff, sessionsRevokedBefore: cutoff)
        logger.info(
            "prune",
            ["challenges": String(result.challengesDeleted), "sessions": String(result.sessionsDeleted)])
        return result
    }

    // MARK: - Input checks

    private static func requireNormalized(_ contact: RainWalletContact) throws(RainError) {
        let normalized = try contact.normalized()
        guard normalized == contact else {
            throw RainError.invalid(
                "the contact is not normalized; pass it through RainWalletContact.normalized() first",
                field: contact.kindName, reason: "not_normalized")
        }
    }

    private static func requireIdentifier(_ value: String, field: String) throws(RainError) {
        guard !value.isEmpty, value.utf8.count <= 256 else {
            throw RainError.invalid("\(field) must be 1 to 256 bytes", field: field)
        }
    }

    static func isWellFormedCode(_ code: String) -> Bool {
        let bytes = Array(code.utf8)
        return bytes.count == 6 && bytes.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }
}
