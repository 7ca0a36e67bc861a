import Foundation
import RainCore

/// What an authority's `GetInfo` may list among its capabilities, beyond its methods.
public enum AuthorityCapability {
    /// Its `WatchRevocations` streams get a heartbeat as they open and then at the interval it
    /// announces: a device bounds the wait for the first one (`RevocationFeed`). An authority
    /// without it (older, or run with no heartbeat) is never timed out.
    public static let revocationHeartbeat = "revocation-heartbeat"
}

/// Full method names of the authority hop (`proto/authority.proto`): a device daemon calling a
/// remote authority (`rainwalletd authority --listen HOST:PORT`) with the same framing as the
/// device protocol. Requests carry no profile: the app id and device id are request fields.
///
/// Each line names the Swift request → response types: most are generated from the proto
/// (Generated/authority.pb.swift, some renamed by the generator's SWIFT_NAMES); the few whose Swift
/// shape differs from the wire's are written here. The authority's own value types are the
/// messages: `Authority` takes and returns exactly what travels.
public enum AuthorityMethod {
    /// `GetInfoRequest` → `GetInfoResponse`: version, protocol version, capabilities.
    public static let getInfo = "/rain.wallet.v1.Authority/GetInfo"
    /// `SendCodeRequest` → `SendCodeResult`.
    public static let sendLoginCode = "/rain.wallet.v1.Authority/SendLoginCode"
    /// `ConfirmCodeRequest` → `LoginResult`.
    public static let confirmLoginCode = "/rain.wallet.v1.Authority/ConfirmLoginCode"
    /// `RefreshRequest` → `AuthorityRefreshSessionResponse` (its `SessionTokens`).
    public static let refreshSession = "/rain.wallet.v1.Authority/RefreshSession"
    /// `AuthorityAccountInfoRequest` → `AccountInfo`.
    public static let accountInfo = "/rain.wallet.v1.Authority/GetAccountInfo"
    /// `AuthorityRevokeSessionRequest` → `AuthorityRevokeSessionResponse`.
    public static let revokeSession = "/rain.wallet.v1.Authority/RevokeSession"
    /// `ListOutboxRequest` → `ListOutboxResponse` (development; only with `--dev-outbox`).
    public static let listOutbox = "/rain.wallet.v1.Authority/ListOutbox"
    /// `AuthorityWalletRequest` → `WalletInfo`.
    public static let getWallet = "/rain.wallet.v1.Authority/GetWallet"
    /// `AuthorityWalletRequest` → `WalletSecrets` (secrets: never logged).
    public static let exportWallet = "/rain.wallet.v1.Authority/ExportWallet"

    /// `PasskeyBeginRequest` → `PasskeyCeremony`.
    public static let beginPasskeyRegistration = "/rain.wallet.v1.Authority/BeginPasskeyRegistration"
    /// `PasskeyFinishRequest` → `PasskeyFinishResult`.
    public static let finishPasskeyRegistration = "/rain.wallet.v1.Authority/FinishPasskeyRegistration"
    /// `PasskeyBeginRequest` → `PasskeyCeremony`.
    public static let beginPasskeyAuthentication = "/rain.wallet.v1.Authority/BeginPasskeyAuthentication"
    /// `PasskeyFinishRequest` → `PasskeyFinishResult`.
    public static let finishPasskeyAuthentication = "/rain.wallet.v1.Authority/FinishPasskeyAuthentication"
    /// `AuthorityPasskeyCancelRequest` → `AuthorityPasskeyCancelResponse`.
    public static let cancelPasskeyCeremony = "/rain.wallet.v1.Authority/CancelPasskeyCeremony"

    /// `AuthoritySendContactVerificationRequest` → `SendCodeResult`.
    public static let sendContactVerificationCode = "/rain.wallet.v1.Authority/SendContactVerificationCode"
    /// `AuthorityConfirmContactVerificationRequest` → `AccountInfo`.
    public static let confirmContactVerification = "/rain.wallet.v1.Authority/ConfirmContactVerification"

    /// `AuthorityBeginDeviceProofRequest` → `AuthorityBeginDeviceProofResponse`: the connection's challenge.
    public static let beginDeviceProof = "/rain.wallet.v1.Authority/BeginDeviceProof"
    /// `AuthorityProveDeviceRequest` → `AuthorityProveDeviceResponse`: proves a device key on the connection.
    public static let proveDevice = "/rain.wallet.v1.Authority/ProveDevice"
    /// `AuthorityRebindDeviceRequest` → `AuthorityRebindDeviceResponse`: step 1 of a device key move.
    public static let rebindDevice = "/rain.wallet.v1.Authority/RebindDevice"
    /// `AuthorityConfirmDeviceKeyRequest` → `AuthorityConfirmDeviceKeyResponse`: step 2.
    public static let confirmDeviceKey = "/rain.wallet.v1.Authority/ConfirmDeviceKey"

    /// `AuthorityWatchRevocationsRequest` → a stream of `AuthorityRevocation`: the proven
    /// device's revocations, pushed.
    public static let watchRevocations = "/rain.wallet.v1.Authority/WatchRevocations"

    /// Every method, in the order above.
    public static let all = [
        getInfo, sendLoginCode, confirmLoginCode, refreshSession, accountInfo, revokeSession, listOutbox, getWallet,
        exportWallet, beginPasskeyRegistration, finishPasskeyRegistration, beginPasskeyAuthentication,
        finishPasskeyAuthentication, cancelPasskeyCeremony, sendContactVerificationCode, confirmContactVerification,
        beginDeviceProof, proveDevice, rebindDevice, confirmDeviceKey, watchRevocations,
    ]
}

/// `Authority.sendLoginCode` input (`Authority/SendLoginCode` request).
public struct SendCodeRequest: WireMessage, Equatable {
    public var appID: String
    public var deviceID: String
    /// A normalized contact. A message without one does not decode (RAIN_102, field `contact`).
    public var contact: RainWalletContact

    /// Creates the request.
    public init(appID: String, deviceID: String, contact: RainWalletContact) {
        self.appID = appID
        self.deviceID = deviceID
        self.contact = contact
    }
}

/// `Authority.sendLoginCode` and `Authority.sendContactVerificationCode` output: the pending
/// challenge (`Authority/SendLoginCode` response).
public struct SendCodeResult: WireMessage, Equatable {
    /// Opaque id of the pending challenge; the device keeps it to confirm.
    public var challengeID: String
    public var contact: RainWalletContact
    public var expiresAt: Date

    /// Creates the result.
    public init(challengeID: String, contact: RainWalletContact, expiresAt: Date) {
        self.challengeID = challengeID
        self.contact = contact
        self.expiresAt = expiresAt
    }
}

/// Tokens of a session. The device computes deadlines on its own clock from `accessLifetime`. Its
/// description hides the tokens.
public struct SessionTokens: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    public var accessToken: String
    public var refreshToken: String
    /// How long the access token lives from now (900 s by default; what is left of it when a
    /// refresh repeated within the grace window returns the pair issued a moment earlier). Sent in
    /// whole milliseconds.
    public var accessLifetime: Duration

    /// Creates the tokens.
    public init(accessToken: String, refreshToken: String, accessLifetime: Duration) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.accessLifetime = accessLifetime
    }

    /// No tokens: what an absent tokens message reads as (the receiver refuses it where it matters).
    public static let empty = SessionTokens(accessToken: "", refreshToken: "", accessLifetime: .zero)

    /// Whether both tokens are there and the lifetime is not negative.
    public var isComplete: Bool { !accessToken.isEmpty && !refreshToken.isEmpty && accessLifetime >= .zero }

    /// The tokens redacted.
    public var description: String {
        "SessionTokens(accessToken: <redacted>, refreshToken: <redacted>, accessLifetime: \(accessLifetime))"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
}
