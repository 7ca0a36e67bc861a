import Foundation
import RainCore

/// What a passkey ceremony is for.
public enum PasskeyCeremonyKind: String, Sendable, Equatable, CaseIterable {
    /// Registration that creates a new account and wallet.
    case signUp = "sign_up"
    /// Registration that adds a passkey to the account of a live session.
    case add
    /// Authentication (login).
    case login
}

// MARK: - Store records

/// A ceremony to store.
public struct NewPasskeyCeremony: Sendable, Equatable {
    public var id: String
    public var appID: String
    public var deviceID: String
    public var kind: PasskeyCeremonyKind
    public var rpID: String
    public var origins: [String]
    public var challenge: [UInt8]
    /// Registration: the user handle the options carry.
    public var userHandle: [UInt8]?
    /// Add: the account the passkey goes to.
    public var accountID: String?
    public var createdAt: Date
    public var expiresAt: Date

    public init(
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
public enum PasskeyCeremonyTake: Sendable, Equatable {
    /// The ceremony was pending, unexpired and bound to the app and device: it is now used.
    case taken(NewPasskeyCeremony)
    /// Unknown for this app and device.
    case unknown
    /// Already finished or cancelled.
    case used
    /// Past its expiry.
    case expired
}

/// A stored passkey credential.
public struct PasskeyCredentialRecord: Sendable, Equatable {
    public var credentialID: [UInt8]
    public var accountID: String
    public var appID: String
    public var rpID: String
    /// The COSE_Key bytes.
    public var publicKey: [UInt8]
    /// The COSE algorithm identifier.
    public var algorithm: Int
    public var signCount: UInt32
    public var isBackupEligible: Bool
    public var isBackedUp: Bool
    /// The WebAuthn user handle the credential was created with.
    public var userHandle: [UInt8]
    public var createdAt: Date
    public var lastUsedAt: Date?

    public init(
        credentialID: [UInt8], accountID: String, appID: String, rpID: String, publicKey: [UInt8], algorithm: Int,
        signCount: UInt32, isBackupEligible: Bool, isBackedUp: Bool, userHandle: [UInt8], createdAt: Date,
        lastUsedAt: Date?
    ) {
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

/// A passkey sign-up to complete in one transaction: the account, its wallet, its first
/// credential and its first session.
public struct PasskeySignUpCompletion: Sendable, Equatable {
    public var appID: String
    public var deviceID: String
    public var accountID: String
    public var walletID: String
    public var walletKeys: WalletKeyMaterial
    /// The credential; its `accountID` is `accountID`.
    public var credential: PasskeyCredentialRecord
    public var session: NewSession
    public var now: Date

    public init(
        appID: String, deviceID: String, accountID: String, walletID: String, walletKeys: WalletKeyMaterial,
        credential: PasskeyCredentialRecord, session: NewSession, now: Date
    ) {
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
public struct PasskeyLoginCompletion: Sendable, Equatable {
    public var appID: String
    public var deviceID: String
    public var credentialID: [UInt8]
    public var rpID: String
    /// The sign count the assertion reported.
    public var signCount: UInt32
    public var isBackedUp: Bool
    public var session: NewSession
    public var now: Date

    public init(
        appID: String, deviceID: String, credentialID: [UInt8], rpID: String, signCount: UInt32, isBackedUp: Bool,
        session: NewSession, now: Date
    ) {
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
