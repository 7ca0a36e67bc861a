// The wire counts the access token's lifetime in milliseconds; the device computes deadlines from
// a Duration on its own clock. The two meet here.

extension SessionTokens {
    /// Tokens whose access token lives `accessLifetime` from now (900 s by default; what is left of
    /// it when a refresh repeated within the grace window returns the pair issued a moment earlier).
    /// Kept, and sent, in whole milliseconds.
    public init(accessToken: String, refreshToken: String, accessLifetime: Duration) {
        self.init(
            accessToken: accessToken, refreshToken: refreshToken, accessLifetimeMilliseconds: accessLifetime.milliseconds)
    }

    /// How long the access token lives from now.
    public var accessLifetime: Duration {
        get { .milliseconds(accessLifetimeMilliseconds) }
        set { accessLifetimeMilliseconds = newValue.milliseconds }
    }

    /// No tokens: what an absent tokens message reads as (the receiver refuses it where it matters).
    public static let empty = SessionTokens()

    /// Whether both tokens are there and the lifetime is not negative.
    public var isComplete: Bool { !accessToken.isEmpty && !refreshToken.isEmpty && accessLifetimeMilliseconds >= 0 }
}
