import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

/// A session to store.
package struct NewSession: Sendable, Equatable {
    /// `ses_…`
    package var id: String
    /// Keyed hash of the access token.
    package var accessHash: [UInt8]
    /// Keyed hash of the refresh token.
    package var refreshHash: [UInt8]
    /// When the access token expires.
    package var accessExpiresAt: Date
    /// The device's raw Ed25519 public key every refresh must be signed with; nil for an unbound
    /// session, which can never be refreshed.
    package var devicePublicKey: [UInt8]?

    /// Creates a session to store.
    package init(
        id: String, accessHash: [UInt8], refreshHash: [UInt8], accessExpiresAt: Date, devicePublicKey: [UInt8]? = nil
    ) {
        self.id = id
        self.accessHash = accessHash
        self.refreshHash = refreshHash
        self.accessExpiresAt = accessExpiresAt
        self.devicePublicKey = devicePublicKey
    }
}

/// A stored session.
package struct SessionRecord: Sendable, Equatable {
    /// `ses_…`
    package var id: String
    /// The app (tenant).
    package var appID: String
    /// The account (`acct_…`).
    package var accountID: String
    /// The device the session is bound to.
    package var deviceID: String
    /// Keyed hash of the access token.
    package var accessHash: [UInt8]
    /// Keyed hash of the refresh token.
    package var refreshHash: [UInt8]
    /// When the access token expires.
    package var accessExpiresAt: Date
    /// When it was created.
    package var createdAt: Date
    /// When it was revoked, or nil while live.
    package var revokedAt: Date?
    /// One of `SessionRevokeReason`.
    package var revokeReason: String?
    /// The device key's wire bytes (`DevicePublicKey.wireBytes`: a raw Ed25519 key or a P-256
    /// point); nil for an unbound session (issued without a key, or before schema version 2),
    /// which can never be refreshed nor used.
    package var devicePublicKey: [UInt8]?
    /// Keyed hash of the refresh token rotated out at the last refresh; nil before the first.
    package var previousRefreshHash: [UInt8]?
    /// When the last refresh rotated the tokens (and issued the current refresh token); nil
    /// before the first.
    package var rotatedAt: Date?
    /// How many times the tokens were rotated (0 after the login).
    package var refreshGeneration: Int = 0
    /// The key a device is moving to (`rebindDevice`), accepted beside `devicePublicKey` until the
    /// device confirms it (`confirmDeviceKey`); nil otherwise.
    package var pendingDevicePublicKey: [UInt8]?
    /// Whether the device has used the current pair: its access token was accepted by a call.
    /// Cleared by each rotation. While it is false, a repeat of the previous refresh token from
    /// the session's device key, even outside the grace window, gets the current pair back (the
    /// device may have lost it before it could save it) instead of revoking the family.
    package var isPairUsed: Bool = false

    /// When the current refresh token was issued: the last rotation, or the login.
    package var refreshIssuedAt: Date { rotatedAt ?? createdAt }
}

/// Which generation of a session's refresh token was presented.
package enum RefreshTokenGeneration: Sendable, Equatable {
    /// The session's current refresh token.
    case current
    /// The one the last refresh rotated out (at `SessionRecord.rotatedAt`).
    case previous
    /// One rotated out before that.
    case older
}

/// A session found by one of its refresh-token hashes.
package struct RefreshCandidate: Sendable, Equatable {
    /// The session (the whole family: rotation keeps the session).
    package var session: SessionRecord
    /// Which of its refresh tokens matched.
    package var generation: RefreshTokenGeneration
}

/// A token rotation to store.
package struct SessionRotation: Sendable, Equatable {
    /// Keyed hash of the new access token.
    package var accessHash: [UInt8]
    /// Keyed hash of the new refresh token.
    package var refreshHash: [UInt8]
    /// When the new access token expires.
    package var accessExpiresAt: Date
    /// The time of the rotation.
    package var rotatedAt: Date

    /// Creates a rotation.
    package init(accessHash: [UInt8], refreshHash: [UInt8], accessExpiresAt: Date, rotatedAt: Date) {
        self.accessHash = accessHash
        self.refreshHash = refreshHash
        self.accessExpiresAt = accessExpiresAt
        self.rotatedAt = rotatedAt
    }
}

/// What a refresh changes in the store.
package enum SessionRefreshChange: Sendable, Equatable {
    /// Nothing (a refusal that burns nothing, or a repeat within the grace window).
    case none
    /// New tokens: the current refresh hash becomes the previous one, the previous one is kept
    /// as an older generation, and the generation count goes up.
    case rotate(SessionRotation)
    /// Revoke the session family with this `SessionRevokeReason`.
    case revoke(reason: String)
}

/// A session found by its access token, with its account.
package struct AccountAccess: Sendable, Equatable {
    /// The session.
    package var session: SessionRecord
    /// The account and its wallet.
    package var account: AccountRecord
    /// The account's contacts, emails first, each kind in the order it was attached.
    package var contacts: [RainWalletContact]
}

/// Session revocation reasons as stored.
package enum SessionRevokeReason {
    /// The account logged in on another device.
    package static let revokedElsewhere = "revoked_elsewhere"
    /// The same device logged in again.
    package static let replaced = "replaced"
    /// The device logged out.
    package static let logout = "logout"
    /// A rotated refresh token was presented again outside the grace window.
    package static let reused = "reused"
    /// A refresh came without a valid device signature, from another device id, or with a stale
    /// timestamp: the token is presumed copied.
    package static let stolenToken = "stolen_token"
    /// The session went unrefreshed for longer than the refresh-token lifetime.
    package static let refreshExpired = "refresh_expired"
}
