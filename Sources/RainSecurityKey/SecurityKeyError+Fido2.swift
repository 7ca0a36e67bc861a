internal import CFido2
import RainCore

extension RainError {
    /// Translates a libfido2 status (`FIDO_ERR_*`, which are CTAP2 status bytes when positive and
    /// libfido2's own failures when negative) into a `RainError` with a `SecurityKeyFailure` reason.
    /// - Parameters:
    ///   - status: the non-zero return of a `fido_*` call.
    ///   - operation: what was being done, for the message ("make credential").
    ///   - retriesLeft: PIN tries left, read after a wrong PIN.
    ///   - timedOut: the host's own deadline passed; libfido2 then reports a failed read
    ///     (`FIDO_ERR_RX`), the same status as an unplugged key.
    static func securityKey(_ status: Int32, _ operation: String, retriesLeft: Int? = nil, timedOut: Bool = false) -> RainError {
        let name = fido_strerr(status).map { String(cString: $0) } ?? "status \(status)"
        func error(_ code: Code, _ failure: SecurityKeyFailure, _ message: String, attempts: Int? = nil) -> RainError {
            RainError(
                code, "\(operation): \(message) (\(name))",
                details: .init(attemptsRemaining: attempts.flatMap { UInt32(exactly: $0) }, reason: failure.rawValue))
        }
        switch status {
        case FIDO_ERR_PIN_INVALID, FIDO_ERR_PIN_AUTH_INVALID:
            let left = retriesLeft.map { " (\($0) tries left)" } ?? ""
            return error(.unauthorized, .pinInvalid, "wrong security key PIN\(left)", attempts: retriesLeft)
        case FIDO_ERR_PIN_AUTH_BLOCKED:
            return error(.unauthorized, .pinAuthBlocked, "too many wrong PINs: unplug the security key and plug it in again")
        case FIDO_ERR_PIN_BLOCKED:
            return error(
                .unauthorized, .pinBlocked, "the security key's PIN is blocked; only a reset (which erases it) unblocks it")
        case FIDO_ERR_PIN_REQUIRED:
            return error(.unauthorized, .pinRequired, "the security key needs its PIN")
        case FIDO_ERR_PIN_NOT_SET:
            return error(.unauthorized, .pinNotSet, "the security key has no PIN; set one first")
        case FIDO_ERR_PIN_POLICY_VIOLATION:
            return error(.invalidArgument, .pinPolicy, "the PIN does not meet the security key's rules (at least 4 characters)")
        case FIDO_ERR_USER_ACTION_TIMEOUT, FIDO_ERR_ACTION_TIMEOUT, FIDO_ERR_TIMEOUT:
            return error(.userCancelled, .timeout, "the security key was not touched in time")
        case FIDO_ERR_RX where timedOut, FIDO_ERR_TX where timedOut:
            return error(.userCancelled, .timeout, "the security key was not touched in time")
        case FIDO_ERR_KEEPALIVE_CANCEL, FIDO_ERR_OPERATION_DENIED:
            return error(.userCancelled, .cancelled, "cancelled")
        case FIDO_ERR_RX, FIDO_ERR_TX, FIDO_ERR_RX_NOT_CBOR, FIDO_ERR_RX_INVALID_CBOR:
            return error(.unavailable, .removed, "the security key was removed or stopped answering")
        case FIDO_ERR_NO_CREDENTIALS, FIDO_ERR_NOTFOUND:
            return error(.unavailable, .noCredentials, "the security key has no passkey for this site")
        case FIDO_ERR_CREDENTIAL_EXCLUDED:
            return error(.refused, .credentialExcluded, "this security key is already registered")
        case FIDO_ERR_UNSUPPORTED_OPTION, FIDO_ERR_UNSUPPORTED_ALGORITHM, FIDO_ERR_INVALID_COMMAND:
            return error(.unavailable, .unsupported, "the security key does not support this")
        default:
            return error(.provider, .failed, "the security key failed")
        }
    }

    /// RAIN_401 `security_key_cancelled` for `operation`.
    static func securityKey(cancelled operation: String) -> RainError { securityKey(FIDO_ERR_KEEPALIVE_CANCEL, operation) }

    /// RAIN_404 `security_key_no_credentials` for `operation`.
    static func securityKey(noCredentials operation: String) -> RainError { securityKey(FIDO_ERR_NO_CREDENTIALS, operation) }
}
