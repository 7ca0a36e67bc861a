import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

// Login codes: sending one (limits, retiring the device's pending code) and confirming it (the
// attempts, the login that creates the account or revokes the other devices' sessions).
extension EmbeddedAuthority {
    /// Sends a login code (see `Authority.sendLoginCode`), counted against the caller's source, or
    /// this daemon's uid for a caller in-process.
    ///
    /// - Throws: RAIN_102 for a contact that is not normalized, an empty app/device id or an app
    ///   this authority does not serve, RAIN_302 when a send limit refuses it, RAIN_501 when
    ///   delivery fails (the challenge is retired), RAIN_502 when the store fails.
    public func sendLoginCode(_ request: SendCodeRequest, caller: AuthorityCaller) async throws(RainError)
        -> SendCodeResult
    {
        try Self.requireNormalized(request.contact)
        try requireServed(request.appID)
        try Self.requireIdentifier(request.deviceID, field: "deviceId")
        return try await issueCode(
            appID: request.appID, deviceID: request.deviceID, contact: request.contact, purpose: .login,
            targetAccountID: nil, source: caller.source ?? localSource, deadline: caller.deadline)
    }

    /// The time an answer needs to reach the caller once a delivery ended: a delivery stops this
    /// long before the caller's deadline (docs/operations.md "Sending codes").
    static let answerMargin: Duration = .seconds(1)

    /// How long a delivery may take when `left` remains of the caller's deadline: `left` less
    /// `answerMargin`, or less a quarter of `left` when that is shorter, so that a deadline of a
    /// second or less still delivers.
    static func deliveryLimit(left: Duration) -> Duration {
        left - min(answerMargin, left / 4)
    }

    /// Stores a new challenge of `purpose` and delivers its code: the shared path of login codes
    /// and contact verifications. A failed delivery retires the challenge. With a `deadline` (the
    /// caller's), the delivery ends in time to answer before it (`deliveryLimit(left:)`).
    /// - Throws: RAIN_301 / RAIN_501 when delivery fails, RAIN_502 when the store fails.
    func issueCode(
        appID: String, deviceID: String, contact: RainWalletContact, purpose: ChallengePurpose,
        targetAccountID: String?, source: SendSource, deadline: ContinuousClock.Instant?
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
            metrics.sendLimitRefusals.increment(MetricLabels(limit.rawValue))
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
            delivery: delivery, purpose: purpose == .login ? .login : .contactVerification, expiresAt: expiresAt,
            timeLimit: deadline.map { Self.deliveryLimit(left: ContinuousClock.now.duration(to: $0)) })
        do {
            if let limit = message.timeLimit, limit <= .zero {
                throw CodeDeliveryFailure.refusedTemporarily(
                    "the call's deadline left no time to deliver the code (\(limit.milliseconds) ms)")
            }
            try await sender.deliver(message)
        } catch {
            let refused = CodeDeliveryFailure.isRefusedBeforeAcceptance(error)
            // Refused before acceptance: nobody got the code, the slot is given back. Otherwise the
            // reservation stays (retired): it counts against the limits and cannot be confirmed.
            var slot = refused ? "given back" : "counted"
            if refused {
                do {
                    try await store.releaseChallenge(id: challengeID)
                } catch {
                    slot = "not given back (\(error.code))"
                }
            }
            let rain = error as? RainError
            let diagnosis = rain?.underlying as? CodeDeliveryDiagnosis
            // A failure without one of the delivery reasons is answered as uncertain below.
            metrics.delivery(
                rain?.details.reason.flatMap { AuthorityMetrics.deliveryOutcomes.contains($0) ? $0 : nil }
                    ?? CodeDeliveryFailure.uncertainReason)
            logger.warning(
                "code.delivery_failed",
                [
                    "purpose": purpose.rawValue, "app": request.appID, "kind": request.contact.kindName,
                    "contact": ContactRedaction.redacted(request.contact), "challenge": challengeID,
                    "error": rain?.code.description ?? "unexpected",
                    "reason": rain?.details.reason ?? CodeDeliveryFailure.uncertainReason,
                    "server": diagnosis?.server ?? "none", "transfer": diagnosis?.transferError ?? "none",
                    "reply": diagnosis?.reply ?? "none", "slot": slot,
                    "timeLimitMs": message.timeLimit.map { String($0.milliseconds) } ?? "none",
                ])
            if let rain, refused || rain.code == .provider {
                throw rain
            }
            throw CodeDeliveryFailure.uncertain("the code sender failed")
        }
        metrics.delivery("delivered")
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
        return SendCodeResult(
            challengeID: challengeID, contact: request.contact, expiresAt: expiresAt,
            resendAfter: Date(unixMilliseconds: now.adding(settings.sendLimits.contactCooldown).unixMilliseconds))
    }

    /// RAIN_302 for a send refused by `limit`: the details carry the limit (`reason` and `limit`),
    /// when to retry (`retryAfter`) and how long that is from `now` (`retryAfterMilliseconds`).
    static func sendLimitError(_ limit: CodeSendLimit, retryAfter: Date, now: Date) -> RainError {
        let what: String
        switch limit {
        case .contactCooldown: what = "a code was just sent to this contact"
        case .contactWindow: what = "too many codes were sent to this contact"
        case .accountWindow: what = "too many codes were sent for this account"
        case .contactAllAppsWindow: what = "too many codes were sent to this contact (across every app)"
        case .sourceWindow: what = "too many codes were sent from this device or address (across every app and contact)"
        }
        return refusal(what, limit: limit.rawValue, retryAfter: retryAfter, now: now)
    }

    /// RAIN_302 for a code not checked because a wrong-guess budget is spent: the details carry the
    /// budget (`reason` and `limit`) and when to retry, as for a send limit.
    static func guessLimitError(_ limit: CodeGuessLimit, retryAfter: Date, now: Date) -> RainError {
        let what: String
        switch limit {
        case .deviceKeyGuessWindow: what = "too many wrong codes were entered on this device (across every account)"
        case .sourceGuessWindow: what = "too many wrong codes were entered from this address (across every account)"
        }
        return refusal(what + "; the code was not checked", limit: limit.rawValue, retryAfter: retryAfter, now: now)
    }

    /// RAIN_302 saying `what`, with the limit's name and when to retry.
    private static func refusal(_ what: String, limit: String, retryAfter: Date, now: Date) -> RainError {
        let waitMilliseconds = UInt64(max(0, retryAfter.unixMilliseconds - now.unixMilliseconds))
        // People read whole seconds: round up, so the time shown is never too early.
        let seconds = (waitMilliseconds + 999) / 1000
        let shown = Date(unixMilliseconds: (retryAfter.unixMilliseconds + 999) / 1000 * 1000)
        return RainError(
            .refused,
            "\(what); try again after \(RFC3339.string(from: shown)) (in \(seconds) s)",
            details: RainError.Details(
                reason: limit, retryAfterMilliseconds: waitMilliseconds, limit: limit, retryAfter: retryAfter))
    }

    /// Confirms a login code (see `Authority.confirmLoginCode`), its wrong guesses counted against
    /// the caller's source, or this daemon's uid for a caller in-process.
    ///
    /// - Throws: RAIN_203 with `reason` wrong (and `attemptsRemaining`), locked, expired, used or
    ///   retired; RAIN_102 `no_pending_code` when the challenge never existed for this app and device;
    ///   RAIN_302 `device_key_guess_window` or `source_guess_window` (with a retry-after) when a
    ///   wrong-guess budget is spent, the code unchecked; RAIN_404 when the account has no wallet
    ///   record; RAIN_502 when the store fails.
    public func confirmLoginCode(_ request: ConfirmCodeRequest, caller: AuthorityCaller) async throws(RainError)
        -> LoginResult
    {
        let source = caller.source ?? localSource
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
            try await checkCode(
                request.code, against: challenge, now: now,
                guesser: CodeGuesser(
                    deviceKey: request.devicePublicKey, appID: request.appID, deviceID: request.deviceID, source: source))
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
            throw Self.challengeTaken(current, now: now, code: "code", call: "login")
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
    ///
    /// Before the code is compared, the guess takes a slot of `guesser`'s wrong-guess budgets
    /// (per device key and per source, across every account): when either is spent the code is
    /// not compared at all (RAIN_302 with a retry-after), so even the right code gets nothing. A
    /// right code gives its slot back; a wrong one keeps it.
    func checkCode(_ code: String, against challenge: ChallengeRecord, now: Date, guesser: CodeGuesser)
        async throws(RainError)
    {
        try Self.requireUsable(challenge, now: now)
        let slot = try await reserveGuess(guesser, challenge: challenge, now: now)
        let submitted = Self.isWellFormedCode(code) ? code : ""
        let actual = keys.codeHash(challengeID: challenge.id, code: submitted)
        guard constantTimeEquals(actual, challenge.codeHash), !submitted.isEmpty else {
            if !submitted.isEmpty, try await isRetiredCode(submitted, replacedBy: challenge, now: now) {
                await giveBack(slot, challenge)
                throw retiredCode(challenge)
            }
            throw try await wrongCode(challenge, now: now)
        }
        await giveBack(slot, challenge)
    }

    /// How many of the codes a Resend replaced are compared before a code counts as wrong.
    static let retiredCodesChecked = 3

    /// Whether `code` is one a Resend replaced by `challenge` (same app, device and purpose, not
    /// expired): the user typed the code of an earlier message. It is told so, and the pending
    /// code loses no attempt. Only a code that was really sent matches, so a guess gains nothing.
    private func isRetiredCode(_ code: String, replacedBy challenge: ChallengeRecord, now: Date) async throws(RainError)
        -> Bool
    {
        let retired = try await store.retiredChallenges(
            appID: challenge.appID, deviceID: challenge.deviceID, purpose: challenge.purpose, now: now,
            limit: Self.retiredCodesChecked)
        return retired.contains { constantTimeEquals(keys.codeHash(challengeID: $0.id, code: code), $0.codeHash) }
    }

    /// RAIN_203 `retired`: the code typed is one a newer code replaced; `attemptsRemaining` is
    /// the pending code's, untouched.
    func retiredCode(_ challenge: ChallengeRecord) -> RainError {
        RainError(
            .invalidLoginCode,
            "that code was replaced by a newer one: use the code of the latest message (no attempt was used)",
            details: RainError.Details(
                attemptsRemaining: UInt32(max(0, max(1, settings.maxWrongAttempts) - challenge.wrongAttempts)),
                reason: "retired"))
    }

    /// Gives a guess slot back: only wrong codes spend the budgets.
    private func giveBack(_ slot: String?, _ challenge: ChallengeRecord) async {
        if let slot {
            // Only wrong codes spend the budgets. Should this fail, the slot counts one guess too
            // many for an hour: the code was right, so the confirm goes on.
            do {
                try await store.releaseCodeGuess(id: slot)
            } catch {
                logger.warning("code.guess_release_failed", ["app": challenge.appID, "code": error.code.description])
            }
        }
    }

    /// Takes a slot of the wrong-guess budgets for one code check; returns its id (nil when the
    /// budgets are off).
    /// - Throws: RAIN_302 `device_key_guess_window` or `source_guess_window` when a budget is spent.
    private func reserveGuess(_ guesser: CodeGuesser, challenge: ChallengeRecord, now: Date) async throws(RainError)
        -> String?
    {
        let limits = settings.sendLimits
        guard limits.hasGuessBudgets else { return nil }
        let id = try SecureRandom.identifier(prefix: "gss")
        let outcome = try await store.reserveCodeGuess(
            NewCodeGuess(id: id, deviceKey: guesser.deviceKey, source: guesser.source.key, guessedAt: now),
            limits: limits)
        switch outcome {
        case .reserved:
            return id
        case .limited(let limit, let retryAfter):
            logger.info(
                "code.guesses_limited",
                [
                    "purpose": challenge.purpose.rawValue, "app": challenge.appID, "challenge": challenge.id,
                    "device": challenge.deviceID, "limit": limit.rawValue, "source": guesser.source.key,
                ])
            throw Self.guessLimitError(limit, retryAfter: retryAfter, now: now)
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

    /// The error for a confirm whose challenge another call took first (a confirm or a resend): how
    /// the challenge is now (RAIN_203), RAIN_102 `no_pending_code` when it is gone, else RAIN_502
    /// naming the `call` that could not be completed.
    static func challengeTaken(_ current: ChallengeRecord?, now: Date, code: String, call: String) -> RainError {
        guard let current else {
            return RainError.invalid("no pending \(code); send a new one", field: "challengeId", reason: noPendingCode)
        }
        return unusableError(current, now: now) ?? RainError(.internalError, "the \(call) could not be completed; try again")
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
}
