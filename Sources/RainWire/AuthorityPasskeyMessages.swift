import Foundation
import RainCore

/// `Authority.beginPasskeyRegistration` and `beginPasskeyAuthentication` input
/// (`Authority/BeginPasskeyRegistration` and `Authority/BeginPasskeyAuthentication` request). Its
/// description hides the access token.
public struct PasskeyBeginRequest: WireMessage, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public var appID: String
    public var deviceID: String
    /// The relying-party id: the profile's passkey domain.
    public var rpID: String
    /// The origins the response's client data may carry: `https://<rpID>` and one
    /// `android:apk-key-hash:<base64url>` per configured Android signing certificate.
    public var origins: [String]
    /// Registration only: the live session's access token to add a passkey to its account, or nil
    /// for a sign-up (a new account). Never logged. Sent empty for nil.
    public var accessToken: String?

    /// Creates the request.
    public init(appID: String, deviceID: String, rpID: String, origins: [String], accessToken: String? = nil) {
        self.appID = appID
        self.deviceID = deviceID
        self.rpID = rpID
        self.origins = origins
        self.accessToken = accessToken
    }

    /// The request without its token.
    public var description: String {
        "PasskeyBeginRequest(appID: \(appID), deviceID: \(deviceID), rpID: \(rpID), origins: \(origins), "
            + "accessToken: \(accessToken == nil ? "none" : "<redacted>"))"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
}

/// `Authority.finishPasskeyRegistration` and `finishPasskeyAuthentication` input
/// (`Authority/FinishPasskey…` request). Its description hides the response JSON.
public struct PasskeyFinishRequest: WireMessage, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public var appID: String
    public var deviceID: String
    public var ceremonyID: String
    /// W3C `RegistrationResponseJSON` or `AuthenticationResponseJSON`.
    public var responseJSON: String
    /// The device's raw 32-byte Ed25519 public key the new session is bound to (as in
    /// `ConfirmCodeRequest`); unused when a passkey is added.
    public var devicePublicKey: [UInt8]
    /// Random bytes (16 to 64) the device chose for this logical finish and keeps across
    /// its repeats; a repeat within the ceremony's lifetime gets the first outcome (the same
    /// tokens) instead of failing on the used ceremony. Empty: no idempotency. A secret: never logged.
    public var idempotencyKey: [UInt8]

    /// Creates the request.
    public init(
        appID: String, deviceID: String, ceremonyID: String, responseJSON: String, devicePublicKey: [UInt8] = [],
        idempotencyKey: [UInt8] = []
    ) {
        self.appID = appID
        self.deviceID = deviceID
        self.ceremonyID = ceremonyID
        self.responseJSON = responseJSON
        self.devicePublicKey = devicePublicKey
        self.idempotencyKey = idempotencyKey
    }

    /// The request without its response JSON and idempotency key.
    public var description: String {
        "PasskeyFinishRequest(appID: \(appID), deviceID: \(deviceID), ceremonyID: \(ceremonyID), "
            + "responseJSON: \(responseJSON.utf8.count) bytes, idempotencyKey: "
            + (idempotencyKey.isEmpty ? "none)" : "<redacted>)")
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
}

/// A finished ceremony (`Authority/FinishPasskey…` response): a login (sign-up or login), or nothing
/// when a passkey was added to a live session's account.
public struct PasskeyFinishResult: WireMessage, Equatable {
    /// The new session; nil after a passkey was added.
    public var login: LoginResult?

    /// Creates the result.
    public init(login: LoginResult?) { self.login = login }
}
