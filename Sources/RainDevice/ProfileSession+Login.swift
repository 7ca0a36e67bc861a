import Dispatch
import FoundationEssentials
import RainAccess
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainWire

// Login by code: sending the code, confirming it, and adopting the session a login returns;
// the idempotency keys that make a repeated confirm safe.
extension ProfileSession {
    /// Sends a login code; replaces this profile's pending challenge.
    public func sendLoginCode(_ contact: RainWalletContact?) async throws(RainError) -> SendLoginCodeResponse {
        let normalized = try Self.normalized(contact)
        await restore()
        let result = try await context.authority.sendLoginCode(
            SendCodeRequest(appID: appID, deviceID: context.deviceID, contact: normalized), caller: .anonymous)
        challenges.login = result
        return Self.codeSent(result)
    }

    /// The request's contact, normalized; RAIN_102 when it names none or it is malformed.
    static func normalized(_ contact: RainWalletContact?) throws(RainError) -> RainWalletContact {
        guard let contact else {
            throw RainError.invalid("the request names no contact: set an email or a phone number", field: "contact")
        }
        return try contact.normalized()
    }

    /// What a code send answers: where the code went and until when it is valid.
    static func codeSent(_ result: SendCodeResult) -> SendLoginCodeResponse {
        SendLoginCodeResponse(contact: result.contact, expiresAt: result.expiresAt, resendAfter: result.resendAfter)
    }

    /// Confirms the pending code; on success stores the session before answering.
    public func confirmLoginCode(_ code: String) async throws(RainError) -> ConfirmLoginCodeResponse {
        let trimmed = try Self.sixDigits(code, what: "a login code")
        await restore()
        guard let challenge = challenges.login else {
            throw RainError.invalid(
                "no login code is pending on this profile; send one first", field: "code", reason: "no_pending_code")
        }
        // One idempotency key per logical confirm (this challenge, this code), kept while its outcome
        // is unknown: a repeat after a lost answer gets the first login back, never a second one.
        let key = try idempotencyKey(.loginCode, for: [challenge.challengeID, trimmed])
        loginsInFlight += 1
        defer { loginsInFlight -= 1 }
        let result: LoginResult
        do {
            result = try await context.authority.confirmLoginCode(
                ConfirmCodeRequest(
                    appID: appID, deviceID: context.deviceID, challengeID: challenge.challengeID, code: trimmed,
                    devicePublicKey: context.device.signer.publicKey.wireBytes, idempotencyKey: key),
                caller: .anonymous)
        } catch {
            settle(.loginCode, key: key, after: error)
            throw error
        }
        settle(.loginCode, key: key)
        if challenges.login?.challengeID == challenge.challengeID { challenges.login = nil }
        try await adopt(result, contact: challenge.contact, method: StoredSession.codeMethod)
        return ConfirmLoginCodeResponse(session: runtime.snapshot(), isAccountCreated: result.accountCreated)
    }

    /// The idempotency key of a logical call of `kind` (`parts` say which: the challenge
    /// and the code, the ceremony and the response): the key of the pending call of that kind when
    /// this one repeats it, else a fresh random one (which replaces it).
    func idempotencyKey(_ kind: PendingCallKind, for parts: [String]) throws(RainError) -> [UInt8] {
        let call = parts.joined(separator: "\u{0}")
        if let pending = pendingCalls[kind], pending.call == call { return pending.key }
        let key = try SecureRandom.bytes(count: 32)
        pendingCalls[kind] = (call, key)
        return key
    }

    /// Forgets the key of a call of `kind` once its outcome is known (an answer, or an
    /// error that says what happened); keeps it while the outcome is unknown, for the repeat.
    func settle(_ kind: PendingCallKind, key: [UInt8], after error: RainError? = nil) {
        if let error, Self.isOutcomeUnknown(error) { return }
        if pendingCalls[kind]?.key == key { pendingCalls[kind] = nil }
    }

    /// Whether a call may have taken effect without its answer reaching the device: RAIN_501
    /// `outcome_unknown`, or the authority unreachable or past its deadline.
    static func isOutcomeUnknown(_ error: RainError) -> Bool {
        error.code == .network || error.details.reason == AuthorityOutcome.unknownReason
    }

    /// A code as typed, trimmed; RAIN_102 `malformed_code` unless it is 6 digits.
    static func sixDigits(_ code: String, what: String) throws(RainError) -> String {
        let trimmed = code.trimmingWhitespaceAndNewlines()
        guard trimmed.utf8.count == 6, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw RainError.invalid("\(what) is 6 digits", field: "code", reason: "malformed_code")
        }
        return trimmed
    }

    /// Stores a login's session before anything answers, publishes it and schedules its refresh:
    /// the one path of code and passkey logins.
    func adopt(_ result: LoginResult, contact: RainWalletContact?, method: String) async throws(RainError) {
        let stored = StoredSession(
            accountID: result.accountID, walletID: result.walletID, accessToken: result.tokens.accessToken,
            refreshToken: result.tokens.refreshToken, expiresAt: clock.now.adding(result.tokens.accessLifetime),
            lifetimeSeconds: result.tokens.accessLifetime.timeInterval, contact: contact, method: method)
        try await context.storage.save(stored, profile: runtime.name)
        setSession(stored)
        clearUnsaved()
        // A verification sent for the previous session's account cannot complete on this one.
        challenges.verification = nil
        scheduler.resetPhase()
        runtime.publish(session: stored)
        schedule()
        logger.info(
            "login",
            [
                "profile": runtime.name, "account": result.accountID, "created": result.accountCreated ? "true" : "false",
                "method": method,
            ])
    }
}
