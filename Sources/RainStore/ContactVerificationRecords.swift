import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

/// Input of `AuthorityStore.completeContactVerification`.
package struct ContactVerificationCompletion: Sendable, Equatable {
    /// The verification challenge being confirmed.
    package var challengeID: String
    /// The app (tenant).
    package var appID: String
    /// The device that asked for the code.
    package var deviceID: String
    /// The account the contact is attached to (the live session's).
    package var accountID: String
    /// The challenge's contact.
    package var contact: RainWalletContact
    /// The time of the confirmation.
    package var now: Date
    /// The confirm's idempotency key and sealed outcome, stored with the verification so
    /// a repeat gets it (`idempotentOutcome`); nil without a key.
    package var idempotency: IdempotentOutcomeInput?

    /// Creates the input.
    package init(
        challengeID: String, appID: String, deviceID: String, accountID: String, contact: RainWalletContact, now: Date,
        idempotency: IdempotentOutcomeInput? = nil
    ) {
        self.idempotency = idempotency
        self.challengeID = challengeID
        self.appID = appID
        self.deviceID = deviceID
        self.accountID = accountID
        self.contact = contact
        self.now = now
    }
}

/// Output of `AuthorityStore.completeContactVerification`.
package enum ContactVerificationOutcome: Sendable, Equatable {
    /// The contact is on the account, verified; `wasAlreadyAttached` when it already was.
    case verified(wasAlreadyAttached: Bool)
    /// Another account owns the contact (it was taken after the code was sent); the challenge was
    /// retired and nothing else changed.
    case ownedByAnotherAccount
    /// The challenge was no longer a pending verification of this app, device and account (or
    /// expired); carries it as it is now, or nil when it does not exist.
    case challengeUnavailable(ChallengeRecord?)
    /// A verification with this idempotency key was already completed (by a concurrent
    /// repeat, possibly on another instance): its outcome.
    case repeated(IdempotentOutcome)
}
