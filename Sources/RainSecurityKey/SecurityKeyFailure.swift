import RainCore

/// Why a security key operation failed: the `details.reason` of its `RainError`, stable for
/// callers and tests (as `WebAuthnFailure` is for the relying party).
public enum SecurityKeyFailure: String, Sendable, CaseIterable {
    /// The PIN was wrong; `details.attemptsRemaining` says how many tries are left (RAIN_202).
    case pinInvalid = "security_key_pin_invalid"
    /// Too many wrong PINs in a row: the key refuses PINs until it is unplugged and plugged in
    /// again (RAIN_202).
    case pinAuthBlocked = "security_key_pin_auth_blocked"
    /// No PIN tries are left: only resetting the key (which deletes its credentials) helps (RAIN_202).
    case pinBlocked = "security_key_pin_blocked"
    /// The key has a PIN and the operation needs it (RAIN_202).
    case pinRequired = "security_key_pin_required"
    /// The key has no PIN yet and the operation needs one (RAIN_202).
    case pinNotSet = "security_key_pin_not_set"
    /// The new PIN breaks the key's policy (too short, too long) (RAIN_102).
    case pinPolicy = "security_key_pin_policy"
    /// Nobody touched the key in time (RAIN_401).
    case timeout = "security_key_timeout"
    /// The operation was cancelled, by the user or because another key was touched first (RAIN_401).
    case cancelled = "security_key_cancelled"
    /// No security key is plugged in (RAIN_404).
    case notFound = "security_key_not_found"
    /// The key was unplugged, or stopped answering (RAIN_404).
    case removed = "security_key_removed"
    /// The key holds no credential for this relying party (or none of the allowed ones) (RAIN_404).
    case noCredentials = "security_key_no_credentials"
    /// The key already holds one of the excluded credentials (RAIN_302).
    case credentialExcluded = "security_key_credential_excluded"
    /// The key does not speak CTAP2 (a U2F-only key), or refused an option (RAIN_404).
    case unsupported = "security_key_unsupported"
    /// Anything else the key or libfido2 reported (RAIN_501); the message names the status.
    case failed = "security_key_failed"
}
