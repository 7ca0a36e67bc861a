/// What a passkey ceremony is for: the device remembers it with the ceremony it began, and the
/// authority stores it with the ceremony (`RainStore`).
package enum PasskeyCeremonyKind: String, Sendable, Equatable, CaseIterable {
    /// Registration that creates a new account and wallet.
    case signUp = "sign_up"
    /// Registration that adds a passkey to the account of a live session.
    case add
    /// Authentication (login).
    case login
}
