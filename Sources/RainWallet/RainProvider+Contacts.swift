import FoundationEssentials
import RainCore
internal import RainWire

/// Backup contacts: attach a verified email or phone number to the logged-in account, so the
/// account stays reachable when a passkey is lost. The verified contact becomes a login method:
/// a later code login with it reaches the same account and wallet.
extension RainProvider {
    /// Sends a 6-digit code that verifies `contact` as a backup contact of the logged-in account.
    /// Calling again replaces the pending verification. Same code rules as login codes (5-minute
    /// expiry, 3 wrong attempts). Never retried automatically.
    ///
    /// - Returns: the contact as normalized and when the code expires.
    /// - Throws: RAIN_102 for an invalid email or phone number, before any request; RAIN_201
    ///   without a live session; RAIN_302 when a send limit refuses it (`limit`, `retryAfter`);
    ///   RAIN_501 when delivery failed; RAIN_101 when the daemon is not running. A contact that
    ///   belongs to another account is sent a code like any other: `confirmContactVerification`
    ///   says so once the right code is entered.
    @discardableResult
    nonisolated(nonsending) public func sendContactVerificationCode(to contact: RainWalletContact) async throws -> CodeSent {
        let normalized = try contact.normalized()
        let sent = try await call(
            Method.contactSendVerificationCode, SendLoginCodeRequest(contact: normalized),
            as: SendLoginCodeResponse.self)
        return CodeSent(contact: sent.contact, expiresAt: sent.expiresAt, resendAfter: sent.resendAfter)
    }

    /// Confirms the code of the pending verification: the contact is attached to the account,
    /// verified (a second email is added beside the first; one already attached succeeds again).
    ///
    /// - Returns: the account with the contact (`needsBackupEmail` false once an email is on it).
    /// - Throws: RAIN_102 for input that is not 6 digits or when no verification is pending;
    ///   RAIN_203 for a wrong code (details `attemptsRemaining`; the verification stays), an
    ///   expired or locked one (details `reason`); RAIN_201 without a live session; RAIN_302
    ///   `contact_owned_by_another_account` (with the right code) when the contact belongs to
    ///   another account (accounts are never merged: log in with it instead), or
    ///   `device_key_guess_window` / `source_guess_window` when too many wrong codes were entered (the
    ///   code was not checked; `retryAfter`).
    @discardableResult
    nonisolated(nonsending) public func confirmContactVerification(_ code: String) async throws -> Account {
        let trimmed = code.trimmingWhitespaceAndNewlines()
        guard trimmed.utf8.count == 6, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw RainError.invalid("a verification code is 6 digits", field: "code", reason: "malformed_code")
        }
        return Account(
            try await call(
                Method.contactConfirmVerification, ConfirmContactVerificationRequest(code: trimmed),
                as: AccountResponse.self))
    }
}
