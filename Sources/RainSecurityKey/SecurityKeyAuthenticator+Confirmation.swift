import RainCore
import RainCrypto

extension SecurityKeyAuthenticator {
    /// Makes a confirmation credential on the first key touched (all plugged keys blink).
    ///
    /// The credential is non-resident (nothing is stored on the key) and made for
    /// ``TouchConfirmation/relyingPartyID``; a key with a PIN asks it on the prompt, as
    /// CTAP 2.0 keys need it to make any credential.
    /// - Parameter context: the time limit and the prompt of the call that adds the key.
    /// - Returns: the key to store.
    /// - Throws: RAIN_404 `security_key_not_found` when no key is plugged in; the reasons of
    ///   ``register(optionsJSON:context:)`` otherwise.
    public func registerConfirmationKey(context: DaemonAuthenticatorContext) async throws(RainError) -> ConfirmationKey {
        // A random handle: the credential names no account, and no two registrations share one.
        let userID = try SecureRandom.bytes(count: 16)
        let clientDataHash = try SecureRandom.bytes(count: 32)
        let user = SecurityKeyUser(id: userID, name: "rainwalletd", displayName: "rainwalletd confirmations")
        let (registration, name) = try await run(context, status: TouchConfirmation.touchStatus) {
            (device, pin) throws(RainError) in
            let registration = try device.makeCredential(
                rpID: TouchConfirmation.relyingPartyID, rpName: TouchConfirmation.relyingPartyName,
                clientDataHash: clientDataHash, user: user, residentKey: false, secretPIN: pin)
            return (registration, device.info.product)
        }
        return try TouchConfirmation.key(from: registration, name: name)
    }

    /// Waits for a touch of a registered confirmation key and checks its assertion.
    ///
    /// Every plugged key is asked at once with the registered credential IDs; only a key holding
    /// one can answer. No PIN is asked: the touch (UP) is the confirmation, in addition to the
    /// code the user typed.
    /// - Parameters:
    ///   - keys: the registered confirmation keys; none is `confirmation_key_missing`, and no
    ///     key is asked.
    ///   - challenge: ``TouchConfirmation/challenge(promptText:code:request:)`` of this action.
    ///   - context: the prompt's time limit and the prompt, which shows "touch your confirmation key".
    /// - Throws: RAIN_401 `confirmation_key_timeout` when nobody touched a key in time;
    ///   RAIN_404 `confirmation_key_missing` when no plugged key holds a registered credential;
    ///   RAIN_401 `confirmation_key_refused` when the assertion does not verify; RAIN_401
    ///   `security_key_cancelled` when the call was cancelled.
    public func confirmTouch(
        keys: [ConfirmationKey], challenge: [UInt8], context: DaemonAuthenticatorContext
    ) async throws(RainError) {
        // With no credential to allow, the keys would look for discoverable ones: a credential any
        // program of the user could have made for the same relying party.
        guard !keys.isEmpty else { throw Self.confirmationError(.securityKey(noCredentials: "confirm")) }
        let allowed = keys.map(\.credentialID)
        let assertions: [SecurityKeyAssertion]
        do throws(RainError) {
            assertions = try await run(context, usesPIN: false, status: TouchConfirmation.touchStatus) {
                (device, _) throws(RainError) in
                try device.getAssertion(
                    rpID: TouchConfirmation.relyingPartyID, clientDataHash: challenge, allowCredentialIDs: allowed,
                    secretPIN: nil)
            }
        } catch {
            throw Self.confirmationError(error)
        }
        guard let assertion = assertions.first else { throw Self.confirmationError(.securityKey(noCredentials: "confirm")) }
        try TouchConfirmation.verify(assertion, challenge: challenge, keys: keys)
    }

    /// A key's failure as the confirmation's: what the user must do, not what libfido2 said.
    static func confirmationError(_ error: RainError) -> RainError {
        switch error.details.reason {
        case SecurityKeyFailure.timeout.rawValue:
            return RainError(
                .userCancelled,
                "the confirmation key was not touched in time: nothing was done; ask again and touch the key when it blinks",
                details: .init(reason: TouchConfirmationFailure.timeout.rawValue), underlying: error)
        case SecurityKeyFailure.notFound.rawValue, SecurityKeyFailure.noCredentials.rawValue,
            SecurityKeyFailure.removed.rawValue:
            return RainError(
                .unavailable,
                "no plugged security key is a registered confirmation key: plug in the key added with "
                    + "`rainwallet prompt add-key` and ask again",
                details: .init(reason: TouchConfirmationFailure.missing.rawValue), underlying: error)
        default:
            return error
        }
    }
}
