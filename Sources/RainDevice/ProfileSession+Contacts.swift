import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

/// Backup contacts: a code sent to a new contact of the session's account, then confirmed. One
/// verification is pending per profile (`Challenges.verification`), separate from the login's.
/// Both calls are sends: never retried on a transient failure (a rotated or expired access token
/// gets one refresh and one more try, since the refusal means nothing was sent).
extension ProfileSession {
    /// Sends a code that verifies `contact` as a backup contact of the session's account; replaces
    /// this profile's pending verification (not its pending login code).
    /// - Throws: RAIN_102 for a missing or malformed contact (before any request); RAIN_201
    ///   without a live session; RAIN_302 when a send limit refuses it; RAIN_301 when the
    ///   authority could not be reached. A contact another account owns is sent a code like any
    ///   other: the confirm says it.
    public func sendContactVerificationCode(_ contact: RainWalletContact?) async throws(RainError)
        -> SendLoginCodeResponse
    {
        let normalized = try Self.normalized(contact)
        let deviceID = context.deviceID
        let result = try await withSession(what: "send a verification code", transientRetries: 0) {
            (authority, appID, token, proof) async throws(RainError) in
            try await authority.sendContactVerificationCode(
                AuthoritySendContactVerificationRequest(
                    appID: appID, deviceID: deviceID, accessToken: token, contact: normalized),
                caller: AuthorityCaller(proof: proof))
        }
        challenges.verification = result
        return Self.codeSent(result)
    }

    /// Confirms the pending verification: on success the contact is on the account, verified, and
    /// logs in to it. Never retried on a transient failure; it carries an idempotency key
    /// per logical confirm (this challenge, this code), kept while its outcome is unknown, so the
    /// caller's repeat after a lost answer gets the contact verified, nothing applied twice.
    /// - Returns: the account with the contact.
    /// - Throws: RAIN_102 `malformed_code` or `no_pending_code` (before any request); RAIN_203 for
    ///   a wrong, expired or locked code; RAIN_201 without a live session; RAIN_302
    ///   `contact_owned_by_another_account` (after the right code), or `device_key_guess_window` /
    ///   `source_guess_window` when too many wrong codes were entered (the code unchecked).
    public func confirmContactVerification(_ code: String) async throws(RainError) -> AccountResponse {
        let trimmed = try Self.sixDigits(code, what: "a verification code")
        await restore()
        guard let challenge = challenges.verification else {
            throw RainError.invalid(
                "no contact verification is pending on this profile; send a code first", field: "code",
                reason: "no_pending_code")
        }
        let deviceID = context.deviceID
        let key = try idempotencyKey(.contactVerification, for: [challenge.challengeID, trimmed])
        let info: AccountInfo
        do {
            info = try await withSession(what: "confirm the verification", transientRetries: 0) {
                (authority, appID, token, proof) async throws(RainError) in
                try await authority.confirmContactVerification(
                    AuthorityConfirmContactVerificationRequest(
                        appID: appID, deviceID: deviceID, accessToken: token, challengeID: challenge.challengeID,
                        code: trimmed, idempotencyKey: key),
                    caller: AuthorityCaller(proof: proof))
            }
        } catch {
            settle(.contactVerification, key: key, after: error)
            throw error
        }
        settle(.contactVerification, key: key)
        if challenges.verification?.challengeID == challenge.challengeID { challenges.verification = nil }
        logger.info("contact.verified", ["profile": runtime.name, "kind": challenge.contact.kindName])
        return AccountResponse(info)
    }
}
