/// Something that answers WebAuthn ceremonies: a platform passkey provider, a security key behind a
/// client, or the software authenticator used in development and tests. It is the `anchor` of
/// `signUpWithPasskey`, `loginWithPasskey` and `addPasskey`.
///
/// It speaks the W3C JSON forms only, so any standard authenticator can take part: options JSON
/// in, response JSON out.
public protocol PasskeyAuthenticator: Sendable {
    /// Creates a credential (`navigator.credentials.create()`).
    /// - Parameters:
    ///   - optionsJSON: a W3C `PublicKeyCredentialCreationOptionsJSON`.
    ///   - origin: the caller's origin, for example `https://example.com`, written into the client data.
    /// - Returns: a W3C `RegistrationResponseJSON`.
    /// - Throws: RAIN_401 when the user dismisses or cancels the ceremony; RAIN_102 for options the
    ///   authenticator cannot honour. Any other error reaches the app as RAIN_501, and a
    ///   `CancellationError` as RAIN_401. (Untyped, as the mobile SDK's: an implementation may also
    ///   declare `throws(RainError)`.)
    func createCredential(optionsJSON: String, origin: String) async throws -> String

    /// Produces an assertion (`navigator.credentials.get()`).
    /// - Parameters:
    ///   - optionsJSON: a W3C `PublicKeyCredentialRequestOptionsJSON`.
    ///   - origin: the caller's origin, written into the client data.
    /// - Returns: a W3C `AuthenticationResponseJSON`.
    /// - Throws: RAIN_401 when the user dismisses or cancels the ceremony (or has no passkey for the
    ///   domain); RAIN_102 for options the authenticator cannot honour. Other errors as for
    ///   `createCredential`.
    func getAssertion(optionsJSON: String, origin: String) async throws -> String
}
