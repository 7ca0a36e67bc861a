import RainAuthorityAPI

extension AuthorityDeadlines {
    /// Two minutes for every kind of call: for tests that reach a real authority over a socket but
    /// are not about deadlines, so a machine busy with the rest of the suite cannot fail them (the
    /// same reason a served request gets 120 s in those tests). Tests of the bounds set their own.
    public static let forTests = AuthorityDeadlines(read: .seconds(120), send: .seconds(120), refresh: .seconds(120))
}
