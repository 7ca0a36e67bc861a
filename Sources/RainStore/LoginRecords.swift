import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

/// An account and its wallet.
package struct AccountRecord: Sendable, Equatable {
    /// `acct_…`
    package var id: String
    /// The app (tenant) the account belongs to.
    package var appID: String
    /// `wal_…`
    package var walletID: String
    /// When the account was created.
    package var createdAt: Date
}

/// Input of `AuthorityStore.completeLogin`.
package struct LoginCompletion: Sendable, Equatable {
    /// The challenge being confirmed.
    package var challengeID: String
    /// The app (tenant).
    package var appID: String
    /// The device that asked for the code.
    package var deviceID: String
    /// The challenge's contact.
    package var contact: RainWalletContact
    /// Used only when the login creates the account.
    package var newAccountID: String
    /// Used only when the login creates the account.
    package var newWalletID: String
    /// The new wallet's key material (its encrypted entropy, bound to `newWalletID`, and its
    /// addresses), stored with it in the same transaction. Used only when the login creates the
    /// account; nil stores a wallet without keys (backfilled later).
    package var newWalletKeys: WalletKeyMaterial?
    /// The session to store.
    package var session: NewSession
    /// The time of the login.
    package var now: Date
    /// The confirm's idempotency key (its keyed hash) and its sealed tokens, stored with
    /// the login so a repeat gets this outcome (`idempotentOutcome`); nil without a key.
    package var idempotency: IdempotentOutcomeInput?

    /// Creates the input.
    package init(
        challengeID: String, appID: String, deviceID: String, contact: RainWalletContact, newAccountID: String,
        newWalletID: String, newWalletKeys: WalletKeyMaterial? = nil, session: NewSession, now: Date,
        idempotency: IdempotentOutcomeInput? = nil
    ) {
        self.idempotency = idempotency
        self.newWalletKeys = newWalletKeys
        self.challengeID = challengeID
        self.appID = appID
        self.deviceID = deviceID
        self.contact = contact
        self.newAccountID = newAccountID
        self.newWalletID = newWalletID
        self.session = session
        self.now = now
    }
}

/// A completed login.
package struct LoginRecord: Sendable, Equatable {
    /// The account (`acct_…`).
    package var accountID: String
    /// The account's wallet (`wal_…`).
    package var walletID: String
    /// True when this login created the account and its wallet.
    package var accountCreated: Bool
    /// Sessions on other devices revoked by this login.
    package var revokedElsewhereCount: Int
    /// The devices whose sessions this login revoked, each once (pushed to them).
    package var revokedDeviceIDs: [String] = []
    /// Whether the login replaced an older session of the same device and app (another profile of
    /// that app on the device, told in-process or by a push).
    package var isReplacedOnDevice: Bool = false
}

/// Output of `AuthorityStore.completeLogin`.
package enum LoginCompletionOutcome: Sendable, Equatable {
    /// The login went through.
    case loggedIn(LoginRecord)
    /// A login with this idempotency key was already completed (by a concurrent repeat,
    /// possibly on another instance): its outcome, for the caller to return.
    case repeated(IdempotentOutcome)
    /// The challenge was no longer pending (or expired, or not this device's) when the
    /// transaction ran; carries it as it is now, or nil when it does not exist.
    case challengeUnavailable(ChallengeRecord?)
}
