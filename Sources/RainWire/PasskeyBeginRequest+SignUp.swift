extension PasskeyBeginRequest {
    /// The request for a sign-up (`accessToken` nil: sent empty) or for adding a passkey to the
    /// live session's account.
    public init(appID: String, deviceID: String, rpID: String, origins: [String], accessToken: String?) {
        self.init(appID: appID, deviceID: deviceID, rpID: rpID, origins: origins, accessToken: accessToken ?? "")
    }
}
