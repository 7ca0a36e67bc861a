// The wire's finish is flat (`logged_in` and the login's fields); the authority and the device think
// of it as a login or nothing. The two meet here and nowhere else.

extension PasskeyFinishResult {
    /// A finished ceremony: a login (sign-up or login), or nil when a passkey was added to a live
    /// session's account. Without a login the fields stay empty and the tokens message is sent
    /// empty, as this message always carried.
    public init(login: LoginResult?) {
        self.init(
            isLoggedIn: login != nil, accountID: login?.accountID ?? "", walletID: login?.walletID ?? "",
            accountCreated: login?.accountCreated ?? false, tokens: login?.tokens ?? .empty)
    }

    /// The new session; nil after a passkey was added (`isLoggedIn` false: the other fields are
    /// then ignored).
    public var login: LoginResult? {
        guard isLoggedIn else { return nil }
        return LoginResult(accountID: accountID, walletID: walletID, accountCreated: accountCreated, tokens: tokens)
    }
}
