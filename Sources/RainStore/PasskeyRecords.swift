import FoundationEssentials
import RainAuthorityAPI
import RainCore

// MARK: - Store records

/// A ceremony to store.
package struct NewPasskeyCeremony: Sendable, Equatable {
    package var id: String
    package var appID: String
    package var deviceID: String
    package var kind: PasskeyCeremonyKind
    package var rpID: String
    package var origins: [String]
    package var challenge: [UInt8]
    /// Registration: the user handle the options carry.
    package var userHandle: [UInt8]?
    /// Add: the account the passkey goes to.
    package var accountID: String?
    package var createdAt: Date
    package var expiresAt: Date

    package init(
        id: String, appID: String, deviceID: String, kind: PasskeyCeremonyKind, rpID: String, origins: [String],
        challenge: [UInt8], userHandle: [UInt8]?, accountID: String?, createdAt: Date, expiresAt: Date
    ) {
        self.id = id
        self.appID = appID
        self.deviceID = deviceID
        self.kind = kind
        self.rpID = rpID
        self.origins = origins
        self.challenge = challenge
        self.userHandle = userHandle
        self.accountID = accountID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// How taking a ceremony for its finish went.
package enum PasskeyCeremonyTake: Sendable, Equatable {
    /// The ceremony was pending, unexpired and bound to the app and device: it is now used.
    case taken(NewPasskeyCeremony)
    /// Unknown for this app and device.
    case unknown
    /// Already finished or cancelled.
    case used
    /// Past its expiry.
    case expired
    /// A finish with this take's idempotency key came first: its outcome (or its claim,
    /// while it still runs), whatever became of the ceremony.
    case repeated(IdempotentOutcome)
}

/// A stored passkey credential.
package struct PasskeyCredentialRecord: Sendable, Equatable {
    package var credentialID: [UInt8]
    package var accountID: String
    package var appID: String
    package var rpID: String
    /// The COSE_Key bytes.
    package var publicKey: [UInt8]
    /// The COSE algorithm identifier.
    package var algorithm: Int
    package var signCount: UInt32
    package var isBackupEligible: Bool
    package var isBackedUp: Bool
    /// The WebAuthn user handle the credential was created with.
    package var userHandle: [UInt8]
    package var createdAt: Date
    package var lastUsedAt: Date?
    /// What holds it (`PasskeyKind`'s raw value; "" when unknown, as in rows older than the column).
    package var kind: String

    package init(
        credentialID: [UInt8], accountID: String, appID: String, rpID: String, publicKey: [UInt8], algorithm: Int,
        signCount: UInt32, isBackupEligible: Bool, isBackedUp: Bool, userHandle: [UInt8], createdAt: Date,
        lastUsedAt: Date?, kind: String = ""
    ) {
        self.kind = kind
        self.credentialID = credentialID
        self.accountID = accountID
        self.appID = appID
        self.rpID = rpID
        self.publicKey = publicKey
        self.algorithm = algorithm
        self.signCount = signCount
        self.isBackupEligible = isBackupEligible
        self.isBackedUp = isBackedUp
        self.userHandle = userHandle
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }
}

/// How removing a passkey went.
package enum PasskeyRemoval: Sendable, Equatable {
    /// It was the account's, and is gone.
    case removed
    /// The account holds no credential of that id (another account's is unknown too).
    case unknown
    /// It is the account's last way to log in (no other passkey, no contact): kept.
    case lastLoginMethod
}

/// A passkey sign-up to complete in one transaction: the account, its wallet, its first
/// credential and its first session.
package struct PasskeySignUpCompletion: Sendable, Equatable {
    package var appID: String
    package var deviceID: String
    package var accountID: String
    package var walletID: String
    package var walletKeys: WalletKeyMaterial
    /// The credential; its `accountID` is `accountID`.
    package var credential: PasskeyCredentialRecord
    package var session: NewSession
    package var now: Date
    /// The finish's idempotency key and sealed outcome, stored with the sign-up.
    package var idempotency: IdempotentOutcomeInput?

    package init(
        appID: String, deviceID: String, accountID: String, walletID: String, walletKeys: WalletKeyMaterial,
        credential: PasskeyCredentialRecord, session: NewSession, now: Date, idempotency: IdempotentOutcomeInput? = nil
    ) {
        self.idempotency = idempotency
        self.appID = appID
        self.deviceID = deviceID
        self.accountID = accountID
        self.walletID = walletID
        self.walletKeys = walletKeys
        self.credential = credential
        self.session = session
        self.now = now
    }
}

/// A passkey login to complete in one transaction: the sign-count update and the session.
package struct PasskeyLoginCompletion: Sendable, Equatable {
    package var appID: String
    package var deviceID: String
    package var credentialID: [UInt8]
    package var rpID: String
    /// The sign count the assertion reported.
    package var signCount: UInt32
    package var isBackedUp: Bool
    package var session: NewSession
    package var now: Date
    /// The finish's idempotency key and sealed outcome, stored with the login.
    package var idempotency: IdempotentOutcomeInput?

    package init(
        appID: String, deviceID: String, credentialID: [UInt8], rpID: String, signCount: UInt32, isBackedUp: Bool,
        session: NewSession, now: Date, idempotency: IdempotentOutcomeInput? = nil
    ) {
        self.idempotency = idempotency
        self.appID = appID
        self.deviceID = deviceID
        self.credentialID = credentialID
        self.rpID = rpID
        self.signCount = signCount
        self.isBackedUp = isBackedUp
        self.session = session
        self.now = now
    }
}
