import Foundation
import RainCore

/// `Passkey/BeginSignUp`, `Passkey/BeginLogin` and `Passkey/BeginAdd` request (empty).
public struct BeginPasskeyRequest: WireMessage, Equatable {
    public init() {}
}

/// A begun passkey ceremony: what the client's authenticator needs.
public struct BeginPasskeyResponse: WireMessage, Equatable {
    /// Opaque id; `Passkey/Finish` and `Passkey/Cancel` name it.
    public var ceremonyID: String
    /// W3C `PublicKeyCredentialCreationOptionsJSON` or `PublicKeyCredentialRequestOptionsJSON`.
    public var optionsJSON: String
    /// `https://<passkey domain>`, the origin the authenticator writes into the client data.
    public var origin: String
    /// When the ceremony stops being accepted.
    public var expiresAt: Date

    public init(ceremonyID: String, optionsJSON: String, origin: String, expiresAt: Date) {
        self.ceremonyID = ceremonyID
        self.optionsJSON = optionsJSON
        self.origin = origin
        self.expiresAt = expiresAt
    }
}

/// `Passkey/Finish` request: the authenticator's W3C response JSON for a ceremony.
public struct FinishPasskeyRequest: WireMessage, Equatable {
    public var ceremonyID: String
    /// `RegistrationResponseJSON` or `AuthenticationResponseJSON`.
    public var responseJSON: String

    public init(ceremonyID: String, responseJSON: String) {
        self.ceremonyID = ceremonyID
        self.responseJSON = responseJSON
    }
}

/// `Passkey/Finish` response.
public struct FinishPasskeyResponse: WireMessage, Equatable {
    /// The session after the ceremony (new after a sign-up or login, unchanged after an add).
    public var session: SessionSnapshot
    /// True after a sign-up: the ceremony created the account and its wallet.
    public var accountCreated: Bool

    public init(session: SessionSnapshot, accountCreated: Bool) {
        self.session = session
        self.accountCreated = accountCreated
    }
}

/// `Passkey/Cancel` request.
public struct CancelPasskeyRequest: WireMessage, Equatable {
    public var ceremonyID: String
    public init(ceremonyID: String) { self.ceremonyID = ceremonyID }
}

/// `Passkey/Cancel` response (empty).
public struct CancelPasskeyResponse: WireMessage, Equatable {
    public init() {}
}
