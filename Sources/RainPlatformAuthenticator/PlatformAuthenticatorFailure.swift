import RainCore

/// Why the platform authenticator refused: the `details.reason` of its `RainError`, stable for
/// callers and tests (as `SecurityKeyFailure` is for security keys).
public enum PlatformAuthenticatorFailure: String, Sendable, CaseIterable {
    /// The key provider is not `tpm2`: there is no platform authenticator, and no software
    /// stand-in (RAIN_404).
    case unavailable = "platform_authenticator_unavailable"
    /// The PIN was wrong; the TPM counted it, and `details.attemptsRemaining` says how many tries
    /// are left before rainwallet stops asking (RAIN_202).
    case pinInvalid = "platform_pin_invalid"
    /// No try is left short of the TPM's lockout: rainwallet does not ask until the TPM has
    /// forgotten a wrong try; `details.retryAfterMilliseconds` says when (RAIN_302).
    case pinTriesExhausted = "platform_pin_tries_exhausted"
    /// The chosen PIN is not 6 to 32 digits (RAIN_102).
    case pinPolicy = "platform_pin_policy"
    /// The user gave no PIN where one was needed (RAIN_401).
    case pinCancelled = "platform_pin_cancelled"
    /// No platform passkey for this relying party (among the allowed ones, of this account) (RAIN_401).
    case noCredentials = "platform_no_credentials"
    /// The passkey file does not open with this state's storage key, or is damaged (RAIN_102).
    case storeDamaged = "platform_store_damaged"
    /// Another ceremony chose the PIN while this one waited for it (RAIN_302).
    case busy = "platform_busy"
}

extension RainError {
    /// An error with a `PlatformAuthenticatorFailure` reason.
    static func platform(
        _ code: Code, _ failure: PlatformAuthenticatorFailure, _ message: String, attemptsRemaining: UInt32? = nil,
        retryAfterMilliseconds: UInt64? = nil
    ) -> RainError {
        RainError(
            code, message,
            details: Details(
                attemptsRemaining: attemptsRemaining, reason: failure.rawValue, retryAfterMilliseconds: retryAfterMilliseconds))
    }

    /// RAIN_102 for options the authenticator cannot honour, with the software authenticator's
    /// reasons (`rp_id_not_allowed`, `algorithm_not_supported`, …), so a caller reacts the same to both.
    static func platformRefusal(_ message: String, reason: String) -> RainError {
        RainError(.invalidArgument, message, details: Details(reason: reason))
    }
}
