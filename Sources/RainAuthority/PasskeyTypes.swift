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

/// `Authority.beginPasskeyRegistration` and `beginPasskeyAuthentication` input.
public struct PasskeyBeginRequest: Sendable {
    public var appID: String
    public var deviceID: String
    /// The relying-party id: the profile's passkey domain.
    public var rpID: String
    /// The origins the response's client data may carry: `https://<rpID>` and one
    /// `android:apk-key-hash:<base64url>` per configured Android signing certificate.
    public var origins: [String]
    /// Registration only: the live session's access token to add a passkey to its account, or nil
    /// for a sign-up (a new account). Never logged.
    public var accessToken: String?

    public init(appID: String, deviceID: String, rpID: String, origins: [String], accessToken: String? = nil) {
        self.appID = appID
        self.deviceID = deviceID
        self.rpID = rpID
        self.origins = origins
        self.accessToken = accessToken
    }
}

/// A begun ceremony: its id and the W3C options JSON for the authenticator.
public struct PasskeyCeremony: Sendable, Equatable {
    /// Opaque `pkc_…` id; the finish and the cancel name it.
    public var ceremonyID: String
    /// `PublicKeyCredentialCreationOptionsJSON` or `PublicKeyCredentialRequestOptionsJSON`.
    public var optionsJSON: String
    /// When the challenge stops being accepted.
    public var expiresAt: Date

    public init(ceremonyID: String, optionsJSON: String, expiresAt: Date) {
        self.ceremonyID = ceremonyID
        self.optionsJSON = optionsJSON
        self.expiresAt = expiresAt
    }
}

/// `Authority.finishPasskeyRegistration` and `finishPasskeyAuthentication` input.
public struct PasskeyFinishRequest: Sendable {
    public var appID: String
    public var deviceID: String
    public var ceremonyID: String
    /// W3C `RegistrationResponseJSON` or `AuthenticationResponseJSON`.
    public var responseJSON: String
    /// The device's raw 32-byte Ed25519 public key the new session is bound to (as in
    /// `ConfirmCodeRequest`); unused when a passkey is added.
    public var devicePublicKey: [UInt8]

    public init(appID: String, deviceID: String, ceremonyID: String, responseJSON: String, devicePublicKey: [UInt8] = []) {
        self.appID = appID
        self.deviceID = deviceID
        self.ceremonyID = ceremonyID
        self.responseJSON = responseJSON
        self.devicePublicKey = devicePublicKey
    }
}

extension PasskeyFinishRequest: CustomStringConvertible, CustomDebugStringConvertible {
    /// The request without its response JSON.
    public var description: String {
        "PasskeyFinishRequest(appID: \(appID), deviceID: \(deviceID), ceremonyID: \(ceremonyID), "
            + "responseJSON: \(responseJSON.utf8.count) bytes)"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
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
