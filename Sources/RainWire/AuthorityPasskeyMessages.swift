import Foundation
import RainCore

/// `Authority/BeginPasskeyRegistration` and `Authority/BeginPasskeyAuthentication` request. Its
/// description hides the access token.
public struct AuthorityPasskeyBeginRequest: WireMessage, Equatable, CustomStringConvertible {
    public var appID: String
    public var deviceID: String
    /// The passkey domain.
    public var rpID: String
    /// Accepted client-data origins.
    public var origins: [String]
    /// Registration: the access token of the session whose account gets the passkey; empty for a sign-up.
    public var accessToken: String

    /// Creates the request.
    public init(appID: String, deviceID: String, rpID: String, origins: [String], accessToken: String = "") {
        self.appID = appID
        self.deviceID = deviceID
        self.rpID = rpID
        self.origins = origins
        self.accessToken = accessToken
    }

    /// The request without its token.
    public var description: String {
        "AuthorityPasskeyBeginRequest(appID: \(appID), deviceID: \(deviceID), rpID: \(rpID), origins: \(origins), "
            + "accessToken: \(accessToken.isEmpty ? "none" : "<redacted>"))"
    }
}

/// A begun ceremony.
public struct AuthorityPasskeyBeginResponse: WireMessage, Equatable {
    public var ceremonyID: String
    /// W3C options JSON.
    public var optionsJSON: String
    public var expiresAt: Date

    /// Creates the response.
    public init(ceremonyID: String, optionsJSON: String, expiresAt: Date) {
        self.ceremonyID = ceremonyID
        self.optionsJSON = optionsJSON
        self.expiresAt = expiresAt
    }
}

/// `Authority/FinishPasskeyRegistration` and `Authority/FinishPasskeyAuthentication` request.
public struct AuthorityPasskeyFinishRequest: WireMessage, Equatable, CustomStringConvertible {
    public var appID: String
    public var deviceID: String
    public var ceremonyID: String
    /// W3C response JSON.
    public var responseJSON: String
    /// The device's raw 32-byte Ed25519 public key.
    public var devicePublicKey: [UInt8]

    /// Creates the request.
    public init(appID: String, deviceID: String, ceremonyID: String, responseJSON: String, devicePublicKey: [UInt8]) {
        self.appID = appID
        self.deviceID = deviceID
        self.ceremonyID = ceremonyID
        self.responseJSON = responseJSON
        self.devicePublicKey = devicePublicKey
    }

    /// The request without its response JSON.
    public var description: String {
        "AuthorityPasskeyFinishRequest(appID: \(appID), deviceID: \(deviceID), ceremonyID: \(ceremonyID), "
            + "responseJSON: \(responseJSON.utf8.count) bytes)"
    }
}

/// A finished ceremony: a login (sign-up or login) or nothing (a passkey added).
public struct AuthorityPasskeyFinishResponse: WireMessage, Equatable {
    /// False after a passkey was added (no new session).
    public var isLoggedIn: Bool
    public var accountID: String
    public var walletID: String
    public var accountCreated: Bool
    public var tokens: AuthoritySessionTokens

    /// Creates the response.
    public init(isLoggedIn: Bool, accountID: String, walletID: String, accountCreated: Bool, tokens: AuthoritySessionTokens) {
        self.isLoggedIn = isLoggedIn
        self.accountID = accountID
        self.walletID = walletID
        self.accountCreated = accountCreated
        self.tokens = tokens
    }
}

/// `Authority/CancelPasskeyCeremony` request.
public struct AuthorityPasskeyCancelRequest: WireMessage, Equatable {
    public var appID: String
    public var deviceID: String
    public var ceremonyID: String

    /// Creates the request.
    public init(appID: String, deviceID: String, ceremonyID: String) {
        self.appID = appID
        self.deviceID = deviceID
        self.ceremonyID = ceremonyID
    }
}

/// `Authority/CancelPasskeyCeremony` response (empty).
public struct AuthorityPasskeyCancelResponse: WireMessage, Equatable {
    /// Creates the response.
    public init() {}
}
