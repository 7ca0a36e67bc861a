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

/// A finished ceremony (`Authority/FinishPasskey…` response): a login (sign-up or login), or nothing
/// when a passkey was added to a live session's account.
public struct PasskeyFinishResult: WireMessage, Equatable {
    /// The new session; nil after a passkey was added.
    public var login: LoginResult?

    /// Creates the result.
    public init(login: LoginResult?) { self.login = login }
}
