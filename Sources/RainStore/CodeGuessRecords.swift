import FoundationEssentials
import RainAuthorityAPI
import RainCore

/// One code check about to be made, for the wrong-guess budgets (`AuthorityStore.reserveCodeGuess`).
package struct NewCodeGuess: Sendable, Equatable {
    /// The slot's id (random); the check gives it back with `releaseCodeGuess` when the code was right.
    package var id: String
    /// The device key that submits the code, in its stored form (`CodeGuesser.deviceKey`).
    package var deviceKey: String
    /// Where the code comes from (`SendSource.key`).
    package var source: String
    /// When the code is checked.
    package var guessedAt: Date

    /// Creates a guess.
    package init(id: String, deviceKey: String, source: String, guessedAt: Date) {
        self.id = id
        self.deviceKey = deviceKey
        self.source = source
        self.guessedAt = guessedAt
    }
}

/// What `AuthorityStore.reserveCodeGuess` did.
package enum CodeGuessReservation: Sendable, Equatable {
    /// The slot was stored: the code may be checked.
    case reserved
    /// A budget is spent; nothing was stored and the code must not be checked. A guess at or after
    /// `retryAfter` passes this budget (unless other guesses come first).
    case limited(CodeGuessLimit, retryAfter: Date)
}
