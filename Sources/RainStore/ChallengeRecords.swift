import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

/// The life of a login challenge.
package enum ChallengeState: String, Sendable, Equatable, CaseIterable {
    /// Waiting for the code.
    case pending
    /// Confirmed: a session was issued.
    case used
    /// Replaced by a resend, another contact on the device, or a newer code for the account.
    case retired
    /// Too many wrong codes.
    case locked
}

/// What a code challenge is for.
package enum ChallengePurpose: String, Sendable, Equatable, CaseIterable {
    /// A login code: confirming it opens a session (`confirmLoginCode`).
    case login
    /// A backup-contact verification: confirming it attaches the contact to its target account
    /// (`confirmContactVerification`). The two never cross.
    case verifyContact = "verify_contact"
}

/// A challenge to insert.
package struct NewChallenge: Sendable, Equatable {
    /// `chl_…`
    package var id: String
    /// The app (tenant).
    package var appID: String
    /// The device that asked for the code.
    package var deviceID: String
    /// A normalized contact.
    package var contact: RainWalletContact
    /// The keyed hash of the code (never the code).
    package var codeHash: [UInt8]
    /// When it was created.
    package var createdAt: Date
    /// When the code stops working.
    package var expiresAt: Date
    /// What the code is for.
    package var purpose: ChallengePurpose
    /// The account a verification attaches the contact to; nil for a login.
    package var targetAccountID: String?
    /// Where the send comes from (`SendSource.key`), counted by `CodeSendLimits.sourceMaxSends`;
    /// nil counts against no source limit.
    package var source: String?

    /// Creates a challenge to insert.
    package init(
        id: String, appID: String, deviceID: String, contact: RainWalletContact, codeHash: [UInt8], createdAt: Date,
        expiresAt: Date, purpose: ChallengePurpose = .login, targetAccountID: String? = nil, source: String? = nil
    ) {
        self.source = source
        self.id = id
        self.appID = appID
        self.deviceID = deviceID
        self.contact = contact
        self.codeHash = codeHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.purpose = purpose
        self.targetAccountID = targetAccountID
    }
}

/// What `AuthorityStore.insertChallenge` did.
package struct ChallengeInsertion: Sendable, Equatable {
    /// The account id, or `contact:<kind>:<value>` before an account exists.
    package var accountKey: String
    /// Challenges retired to make room (this device's pending ones, then the account's oldest).
    package var retiredChallengeIDs: [String]
}

/// What `AuthorityStore.insertChallenge` did.
package enum ChallengeInsertionOutcome: Sendable, Equatable {
    /// The challenge was stored.
    case inserted(ChallengeInsertion)
    /// A send limit refused it; nothing was changed. A send at or after `retryAfter` passes this
    /// limit (unless other sends come first).
    case limited(CodeSendLimit, retryAfter: Date)
}

/// A stored challenge.
package struct ChallengeRecord: Sendable, Equatable {
    /// The id.
    package var id: String
    /// The app (tenant).
    package var appID: String
    /// The device that asked for the code.
    package var deviceID: String
    /// The normalized contact the code went to.
    package var contact: RainWalletContact
    /// The account id, or `contact:<kind>:<value>` before an account exists.
    package var accountKey: String
    /// The keyed hash of the code.
    package var codeHash: [UInt8]
    /// When it was created.
    package var createdAt: Date
    /// When the code stops working.
    package var expiresAt: Date
    /// Wrong codes counted so far.
    package var wrongAttempts: Int
    /// Where it is in its life.
    package var state: ChallengeState
    /// What the code is for (`login` for challenges stored before schema version 5).
    package var purpose: ChallengePurpose = .login
    /// The account a verification attaches the contact to; nil for a login.
    package var targetAccountID: String?
}
