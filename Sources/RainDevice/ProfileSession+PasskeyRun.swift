import RainAuthorityAPI
import RainCore
import RainWire

/// `Passkey/Run`: a whole passkey ceremony with an authenticator the daemon runs itself, so the
/// assertion never leaves the daemon. It is the two-call flow with the authenticator in between:
/// the same begin (and its rules), the same finish (and its session), the same cancel when the
/// authenticator gives up.
extension ProfileSession {
    /// Begins a ceremony of `kind`, runs `authenticator` on its options and finishes it.
    /// - Parameters:
    ///   - kind: sign-up, login or add.
    ///   - authenticator: the daemon's authenticator.
    ///   - timeout: how long the authenticator may wait for the user.
    ///   - prompt: the trusted prompt of the call (PINs, "touch your key").
    /// - Returns: the session after the ceremony, as `Passkey/Finish` answers it.
    /// - Throws: the begin's refusals (RAIN_102 `no_passkey_domain`, `session_live`,
    ///   `passkey_session_live`; RAIN_201 for an add without a session); the authenticator's
    ///   errors, after the ceremony was cancelled at the authority (the session is untouched);
    ///   the finish's refusals.
    func runPasskey(
        _ kind: PasskeyCeremonyKind, with authenticator: any DaemonAuthenticator, timeout: Duration,
        prompt: any DaemonAuthenticatorPrompt
    ) async throws(RainError) -> FinishPasskeyResponse {
        let begun: BeginPasskeyResponse
        switch kind {
        case .signUp: begun = try await beginPasskeySignUp()
        case .login: begun = try await beginPasskeyLogin()
        case .add: begun = try await beginPasskeyAdd()
        }
        let context = DaemonAuthenticatorContext(origin: begun.origin, timeout: timeout, prompt: prompt)
        let responseJSON: String
        do throws(RainError) {
            responseJSON =
                kind == .login
                ? try await authenticator.authenticate(optionsJSON: begun.optionsJSON, context: context)
                : try await authenticator.register(optionsJSON: begun.optionsJSON, context: context)
        } catch {
            // Nothing to finish: the ceremony ends at the authority now rather than when it
            // expires, even when the call itself was cancelled (the task of its own is not).
            let ceremonyID = begun.ceremonyID
            let cancelled = await Task { () async -> RainError? in
                do throws(RainError) {
                    _ = try await self.cancelPasskey(ceremonyID: ceremonyID)
                    return nil
                } catch {
                    return error
                }
            }.value
            if let cancelled {
                logger.warning("passkey.cancel_failed", ["profile": runtime.name, "error": cancelled.code.description])
            }
            logger.info(
                "passkey.authenticator_failed",
                ["profile": runtime.name, "kind": kind.rawValue, "reason": error.details.reason ?? error.code.description])
            throw error
        }
        return try await finishPasskey(ceremonyID: begun.ceremonyID, responseJSON: responseJSON)
    }
}
