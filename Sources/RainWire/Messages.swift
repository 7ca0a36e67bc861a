import Foundation
import RainCore

/// A request or response payload: encodes to and decodes from protobuf bytes.
public protocol WireMessage: Sendable {
    /// Decodes protobuf bytes.
    /// - Throws: RAIN_102 (reason `undecodable_payload`) for bytes that are not this message.
    static func decode(_ bytes: [UInt8]) throws(RainError) -> Self
    /// Encodes to protobuf bytes.
    /// - Throws: RAIN_102 for a string with an embedded NUL (protobuf-c cannot carry it).
    func encode() throws(RainError) -> [UInt8]
}

/// `GetInfo` request (empty).
public struct GetInfoRequest: WireMessage, Equatable {
    public init() {}
}

/// `GetInfo` response: what the daemon is and supports.
public struct GetInfoResponse: WireMessage, Equatable {
    public var daemonVersion: String
    public var protocolVersion: UInt32
    public var capabilities: [String]
    public var maxFrameBytes: UInt32
    /// The key provider in use (`tpm2`, `secret-service`, `file`); empty when the daemon does not say.
    public var storageProvider: String
    public init(
        daemonVersion: String, protocolVersion: UInt32, capabilities: [String], maxFrameBytes: UInt32,
        storageProvider: String = ""
    ) {
        self.daemonVersion = daemonVersion
        self.protocolVersion = protocolVersion
        self.capabilities = capabilities
        self.maxFrameBytes = maxFrameBytes
        self.storageProvider = storageProvider
    }
}

/// `SendLoginCode` request.
public struct SendLoginCodeRequest: WireMessage, Equatable {
    /// nil when the message named no contact kind.
    public var contact: RainWalletContact?
    public init(contact: RainWalletContact?) { self.contact = contact }
}

/// `SendLoginCode` response.
public struct SendLoginCodeResponse: WireMessage, Equatable {
    /// The contact as the daemon normalized it.
    public var contact: RainWalletContact?
    public var expiresAt: Date
    public init(contact: RainWalletContact?, expiresAt: Date) {
        self.contact = contact
        self.expiresAt = expiresAt
    }
}

/// `ConfirmLoginCode` request.
public struct ConfirmLoginCodeRequest: WireMessage, Equatable {
    public var code: String
    public init(code: String) { self.code = code }
}

/// `ConfirmLoginCode` response.
public struct ConfirmLoginCodeResponse: WireMessage, Equatable {
    public var session: SessionSnapshot
    public var accountCreated: Bool
    public init(session: SessionSnapshot, accountCreated: Bool) {
        self.session = session
        self.accountCreated = accountCreated
    }
}

/// `Logout` request (empty).
public struct LogoutRequest: WireMessage, Equatable {
    public init() {}
}

/// `Logout` response.
public struct LogoutResponse: WireMessage, Equatable {
    public var hadSession: Bool
    public var revokedAtAuthority: Bool
    public init(hadSession: Bool, revokedAtAuthority: Bool) {
        self.hadSession = hadSession
        self.revokedAtAuthority = revokedAtAuthority
    }
}

/// `Session/GetState` request (empty).
public struct GetSessionStateRequest: WireMessage, Equatable {
    public init() {}
}

/// `Session/AwaitRestore` request.
public struct AwaitRestoreRequest: WireMessage, Equatable {
    /// 0 means the profile's restore timeout (5 s).
    public var timeoutMilliseconds: UInt32
    public init(timeoutMilliseconds: UInt32 = 0) { self.timeoutMilliseconds = timeoutMilliseconds }
}

/// `Session/Watch` request (empty).
public struct WatchRequest: WireMessage, Equatable {
    public init() {}
}

/// One event of the `Watch` stream.
public struct WatchEvent: WireMessage, Equatable {
    /// What changed.
    public enum Kind: String, Sendable, Equatable {
        case authState, sessionState, sessionExpired
        /// The link to the authority changed (`state.authorityLink`).
        case authorityLink
    }
    /// 1 for a watcher's first event, then +1 per event.
    public var sequence: UInt64
    public var kind: Kind
    /// The state after the change.
    public var state: SessionSnapshot
    /// Set for `sessionExpired`.
    public var expiryReason: ExpiryReason?

    public init(sequence: UInt64, kind: Kind, state: SessionSnapshot, expiryReason: ExpiryReason? = nil) {
        self.sequence = sequence
        self.kind = kind
        self.state = state
        self.expiryReason = expiryReason
    }
}

/// `Dev/ListOutbox` request (empty).
public struct ListOutboxRequest: WireMessage, Equatable {
    public init() {}
}

/// One code delivery in the development outbox.
public struct OutboxEntry: Sendable, Equatable {
    public var contact: RainWalletContact?
    public var code: String
    public var sentAt: Date
    public var appID: String
    public init(contact: RainWalletContact?, code: String, sentAt: Date, appID: String) {
        self.contact = contact
        self.code = code
        self.sentAt = sentAt
        self.appID = appID
    }
}

/// `Dev/ListOutbox` response.
public struct ListOutboxResponse: WireMessage, Equatable {
    public var entries: [OutboxEntry]
    public init(entries: [OutboxEntry]) { self.entries = entries }
}

/// `Test/SlowEcho` request (test builds only).
public struct SlowEchoRequest: WireMessage, Equatable {
    public var delayMilliseconds: UInt32
    public var data: [UInt8]
    public init(delayMilliseconds: UInt32, data: [UInt8]) {
        self.delayMilliseconds = delayMilliseconds
        self.data = data
    }
}

/// `Test/SlowEcho` response.
public struct SlowEchoResponse: WireMessage, Equatable {
    public var data: [UInt8]
    public init(data: [UInt8]) { self.data = data }
}

/// `Session/Refresh` request (empty).
public struct RefreshSessionRequest: WireMessage, Equatable {
    public init() {}
}

/// `Account/Get` request (empty).
public struct GetAccountRequest: WireMessage, Equatable {
    public init() {}
}

/// `Account/Get` response.
public struct AccountResponse: WireMessage, Equatable {
    public var accountID: String
    public var walletID: String
    public var createdAt: Date
    /// Verified contacts: emails first, each kind in the order attached.
    public var contacts: [RainWalletContact]
    /// True when the account has no verified email (a passkey-only account, for example): ask the
    /// user for a backup email (`sendContactVerificationCode`) before funding the wallet.
    public var needsBackupEmail: Bool
    /// The account's passkeys, oldest first (every domain).
    public var passkeys: [PasskeyInfo]
    /// Creates the response.
    public init(
        accountID: String, walletID: String, createdAt: Date, contacts: [RainWalletContact],
        needsBackupEmail: Bool = false, passkeys: [PasskeyInfo] = []
    ) {
        self.accountID = accountID
        self.walletID = walletID
        self.createdAt = createdAt
        self.contacts = contacts
        self.needsBackupEmail = needsBackupEmail
        self.passkeys = passkeys
    }

    /// What Account/Get answers for an authority's `AccountInfo`.
    public init(_ info: AccountInfo) {
        self.init(
            accountID: info.accountID, walletID: info.walletID, createdAt: info.createdAt, contacts: info.contacts,
            needsBackupEmail: info.needsBackupEmail, passkeys: info.passkeys)
    }
}

/// `Contact/ConfirmVerification` request: the code the user received.
public struct ConfirmContactVerificationRequest: WireMessage, Equatable, CustomStringConvertible {
    /// The 6 digits (never logged).
    public var code: String
    /// Creates the request.
    public init(code: String) { self.code = code }
    /// The request with the code redacted.
    public var description: String { "ConfirmContactVerificationRequest(code: <redacted>)" }
}

/// `Profile/Configure` request.
public struct ConfigureProfileRequest: WireMessage, Equatable {
    /// Empty when the client sets none.
    public var passkeyDomain: String
    /// The session policy to apply; nil leaves the profile's policy as it is.
    public var sessionPolicy: SessionPolicyFields?
    public init(passkeyDomain: String, sessionPolicy: SessionPolicyFields? = nil) {
        self.passkeyDomain = passkeyDomain
        self.sessionPolicy = sessionPolicy
    }
}

/// `Profile/Configure` response.
public struct ConfigureProfileResponse: WireMessage, Equatable {
    /// The profile's passkey domain ("" when none is set).
    public var passkeyDomain: String
    /// The session policy in effect after the call (every field set; nil from an older daemon).
    public var sessionPolicy: SessionPolicyFields?
    /// The policy keys the daemon's config file sets (`refreshBufferSeconds`, …): they win over a
    /// client's values.
    public var configKeys: [String]
    public init(passkeyDomain: String, sessionPolicy: SessionPolicyFields? = nil, configKeys: [String] = []) {
        self.passkeyDomain = passkeyDomain
        self.sessionPolicy = sessionPolicy
        self.configKeys = configKeys
    }
}

/// The wire form of a session policy (`SessionPolicy` in wallet.proto): the config file's names and
/// units, every field optional (nil: not set).
public struct SessionPolicyFields: Sendable, Equatable {
    /// `refreshBufferSeconds`.
    public var refreshBufferSeconds: Double?
    /// `autoRefresh`.
    public var autoRefresh: Bool?
    /// `transientRetries`.
    public var transientRetries: UInt32?
    /// `retryInitialDelayMilliseconds`.
    public var retryInitialDelayMilliseconds: UInt32?
    /// `retryMaxDelayMilliseconds`.
    public var retryMaxDelayMilliseconds: UInt32?
    /// `activeThresholdSeconds`.
    public var activeThresholdSeconds: Double?
    /// `restoreTimeoutSeconds`.
    public var restoreTimeoutSeconds: Double?

    /// Fields, each nil unless given.
    public init(
        refreshBufferSeconds: Double? = nil, autoRefresh: Bool? = nil, transientRetries: UInt32? = nil,
        retryInitialDelayMilliseconds: UInt32? = nil, retryMaxDelayMilliseconds: UInt32? = nil,
        activeThresholdSeconds: Double? = nil, restoreTimeoutSeconds: Double? = nil
    ) {
        self.refreshBufferSeconds = refreshBufferSeconds
        self.autoRefresh = autoRefresh
        self.transientRetries = transientRetries
        self.retryInitialDelayMilliseconds = retryInitialDelayMilliseconds
        self.retryMaxDelayMilliseconds = retryMaxDelayMilliseconds
        self.activeThresholdSeconds = activeThresholdSeconds
        self.restoreTimeoutSeconds = restoreTimeoutSeconds
    }

    /// Every field of `policy` (counts and milliseconds saturated to `UInt32`).
    public init(_ policy: RainWalletSessionPolicy) {
        func ms(_ d: Duration) -> UInt32 { UInt32(clamping: d.milliseconds) }
        self.init(
            refreshBufferSeconds: policy.refreshBuffer.timeInterval, autoRefresh: policy.isAutoRefreshEnabled,
            transientRetries: UInt32(clamping: policy.transientRetries),
            retryInitialDelayMilliseconds: ms(policy.retryInitialDelay), retryMaxDelayMilliseconds: ms(policy.retryMaxDelay),
            activeThresholdSeconds: policy.activeThreshold.timeInterval,
            restoreTimeoutSeconds: policy.restoreTimeout.timeInterval)
    }

    /// The set fields by their config-file key, as JSON numbers and booleans.
    public var configValues: [String: JSONValue] {
        var values: [String: JSONValue] = [:]
        if let v = refreshBufferSeconds { values["refreshBufferSeconds"] = .number(v) }
        if let v = autoRefresh { values["autoRefresh"] = .bool(v) }
        if let v = transientRetries { values["transientRetries"] = .number(Double(v)) }
        if let v = retryInitialDelayMilliseconds { values["retryInitialDelayMilliseconds"] = .number(Double(v)) }
        if let v = retryMaxDelayMilliseconds { values["retryMaxDelayMilliseconds"] = .number(Double(v)) }
        if let v = activeThresholdSeconds { values["activeThresholdSeconds"] = .number(v) }
        if let v = restoreTimeoutSeconds { values["restoreTimeoutSeconds"] = .number(v) }
        return values
    }
}

/// `Wallet/Get` request (empty).
public struct GetWalletRequest: WireMessage, Equatable {
    public init() {}
}

/// `Wallet/Get` response: the wallet's id, creation time and addresses.
public struct WalletResponse: WireMessage, Equatable {
    /// `wal_…`
    public var walletID: String
    public var createdAt: Date
    /// EIP-55 checksummed address of m/44'/60'/0'/0/0.
    public var ethereumAddress: String
    /// Base58 address of m/44'/501'/0'/0'.
    public var solanaAddress: String
    public init(walletID: String, createdAt: Date, ethereumAddress: String, solanaAddress: String) {
        self.walletID = walletID
        self.createdAt = createdAt
        self.ethereumAddress = ethereumAddress
        self.solanaAddress = solanaAddress
    }

    /// What Wallet/Get answers for an authority's `WalletInfo`.
    public init(_ info: WalletInfo) {
        self.init(
            walletID: info.walletID, createdAt: info.createdAt, ethereumAddress: info.ethereumAddress,
            solanaAddress: info.solanaAddress)
    }
}

/// `Wallet/ExportRecoveryPhrase` request (empty).
public struct ExportRecoveryPhraseRequest: WireMessage, Equatable {
    public init() {}
}

/// `Wallet/ExportRecoveryPhrase` response. Its description hides the words.
public struct ExportRecoveryPhraseResponse: WireMessage, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The 12 BIP-39 English words (a secret).
    public var words: [String]
    public init(words: [String]) { self.words = words }
    /// The response redacted.
    public var description: String { "ExportRecoveryPhraseResponse(words: <redacted \(words.count) words>)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
}

/// `Wallet/ExportPrivateKey` request.
public struct ExportPrivateKeyRequest: WireMessage, Equatable {
    /// nil when the message named no chain (refused with RAIN_102).
    public var chain: RainChain?
    public init(chain: RainChain?) { self.chain = chain }
}

/// `Wallet/ExportPrivateKey` response. Its description hides the key.
public struct ExportPrivateKeyResponse: WireMessage, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public var chain: RainChain?
    /// Ethereum: `0x` + 64 lowercase hex digits; Solana: base58 of the 64-byte keypair (a secret).
    public var privateKey: String
    public init(chain: RainChain?, privateKey: String) {
        self.chain = chain
        self.privateKey = privateKey
    }
    /// The response redacted.
    public var description: String {
        "ExportPrivateKeyResponse(chain: \(chain?.rawValue ?? "unspecified"), privateKey: <redacted>)"
    }
    /// Same as ``description``.
    public var debugDescription: String { description }
}
