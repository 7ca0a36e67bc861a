import Foundation
import RainCore

/// A finished ceremony (`Authority/FinishPasskey…` response): a login (sign-up or login), or nothing
/// when a passkey was added to a live session's account.
public struct PasskeyFinishResult: WireMessage, Equatable {
    /// The new session; nil after a passkey was added.
    public var login: LoginResult?

    /// Creates the result.
    public init(login: LoginResult?) { self.login = login }
}

extension PasskeyBeginRequest {
    /// The request for a sign-up (`accessToken` nil: sent empty) or for adding a passkey to the
    /// live session's account.
    public init(appID: String, deviceID: String, rpID: String, origins: [String], accessToken: String?) {
        self.init(appID: appID, deviceID: deviceID, rpID: rpID, origins: origins, accessToken: accessToken ?? "")
    }
}
