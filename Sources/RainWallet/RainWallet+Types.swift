import FoundationEssentials
import RainCore
internal import RainWire

// The library's own values: what the provider returns is declared here, so that an app sees
// RainWallet's names only, never the wire format's (`RainWire`), which may change with the protocol.

/// The account an app's user is logged in to: its id, its contacts, its wallet and its passkeys.
/// Returned by `RainProvider.account()` and `RainProvider.confirmContactVerification(_:)`.
public struct Account: Sendable, Equatable {
    /// `acc_…`
    public var accountID: String
    /// The account's wallet, `wal_…`.
    public var walletID: String
    /// When the account was created (its first login).
    public var createdAt: Date
    /// Verified contacts: emails first, each kind in the order attached.
    public var contacts: [RainWalletContact]
    /// True when the account has no verified email (a passkey-only account, for example): ask the
    /// user for a backup email (`sendContactVerificationCode`) before funding the wallet.
    public var needsBackupEmail: Bool
    /// The account's passkeys, oldest first (every domain).
    public var passkeys: [PasskeyInfo]

    /// Creates an account value (tests, previews).
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

    init(_ wire: AccountResponse) {
        self.init(
            accountID: wire.accountID, walletID: wire.walletID, createdAt: wire.createdAt, contacts: wire.contacts,
            needsBackupEmail: wire.needsBackupEmail, passkeys: wire.passkeys)
    }
}

/// The wallet of the session's account: its id, creation time and addresses. Returned by
/// `RainProvider.getWallet()`.
public struct Wallet: Sendable, Equatable {
    /// `wal_…`
    public var walletID: String
    /// When the wallet was created (with the account).
    public var createdAt: Date
    /// The EIP-55 checksummed Ethereum address (m/44'/60'/0'/0/0).
    public var ethereumAddress: String
    /// The base58 Solana address (m/44'/501'/0'/0').
    public var solanaAddress: String

    /// Creates a wallet value (tests, previews).
    public init(walletID: String, createdAt: Date, ethereumAddress: String, solanaAddress: String) {
        self.walletID = walletID
        self.createdAt = createdAt
        self.ethereumAddress = ethereumAddress
        self.solanaAddress = solanaAddress
    }

    init(_ wire: WalletResponse) {
        self.init(
            walletID: wire.walletID, createdAt: wire.createdAt, ethereumAddress: wire.ethereumAddress,
            solanaAddress: wire.solanaAddress)
    }
}

/// What `RainProvider.logout()` did.
public struct LogoutResult: Sendable, Equatable {
    /// False when there was no session to end.
    public var hadSession: Bool
    /// False when the authority could not be reached to revoke the session (it is wiped locally
    /// either way).
    public var revokedAtAuthority: Bool

    /// Creates a result value.
    public init(hadSession: Bool, revokedAtAuthority: Bool) {
        self.hadSession = hadSession
        self.revokedAtAuthority = revokedAtAuthority
    }
}

/// A code the authority sent: where it went (normalized) and until when it is valid. Returned by
/// `RainProvider.sendContactVerificationCode(to:)`.
public struct CodeSent: Sendable, Equatable {
    /// The contact, as normalized.
    public var contact: RainWalletContact?
    /// When the code expires.
    public var expiresAt: Date
    /// The earliest a Resend to this contact is accepted (before it, RAIN_302 `contact_cooldown`):
    /// enable the app's Resend button then. Nil when the daemon does not say.
    public var resendAfter: Date?

    /// Creates a value.
    public init(contact: RainWalletContact?, expiresAt: Date, resendAfter: Date? = nil) {
        self.contact = contact
        self.expiresAt = expiresAt
        self.resendAfter = resendAfter
    }
}

/// What the daemon is and supports. Returned by `RainProvider.daemonInfo()`.
public struct DaemonInfo: Sendable, Equatable {
    /// The daemon's version.
    public var daemonVersion: String
    /// The protocol version it speaks.
    public var protocolVersion: UInt32
    /// What it supports beyond the base protocol (for example `passkeys`).
    public var capabilities: [String]
    /// The largest frame it accepts, in bytes.
    public var maxFrameBytes: UInt32
    /// The key provider in use (`tpm2`, `secret-service`, `file`); empty when the daemon does not say.
    public var storageProvider: String
    /// Whether programs of the daemon's user may read each other's memory, as the kernel said when
    /// the daemon started: `none` (no Yama LSM: they may), or `kernel.yama.ptrace_scope` `0` (they
    /// may), `1` (only their own descendants), `2`, `3`; empty when the daemon does not say. Where
    /// they may, any of them can read a prompt's code and take over a live connection.
    public var ptraceScope: String
    /// The audit log against its anchor at a remote authority, told only to the daemon's own uid:
    /// `matched` (the log held the anchored head when the daemon started), `mismatch` (it did not,
    /// or the authority refused its head: `rainwallet audit --verify` says what was found),
    /// `unchecked` (the authority has not answered since); empty with the embedded authority.
    public var auditAnchor: String
    /// The link to the authority, its revocation stream included; nil while the daemon's keys do
    /// not open, or from a daemon that does not say.
    public var authorityLink: AuthorityLinkState?
    /// Whether the daemon's keys can be used now; nil from a daemon that does not say.
    public var storage: StorageHealthState?

    init(_ wire: GetInfoResponse) {
        authorityLink = wire.authorityLink
        storage = wire.storage
        daemonVersion = wire.daemonVersion
        protocolVersion = wire.protocolVersion
        capabilities = wire.capabilities
        maxFrameBytes = wire.maxFrameBytes
        storageProvider = wire.storageProvider
        ptraceScope = wire.ptraceScope
        auditAnchor = wire.auditAnchor
    }
}

/// One code delivery of the embedded authority's development outbox. Returned by
/// `RainProvider.devOutbox()`.
public struct DevOutboxEntry: Sendable, Equatable {
    /// Where the code went.
    public var contact: RainWalletContact?
    /// The code (development only: a real sender never shows it).
    public var code: String
    /// When it was sent.
    public var sentAt: Date
    /// The app (profile's app id) that asked for it.
    public var appID: String

    init(_ wire: OutboxEntry) {
        contact = wire.contact
        code = wire.code
        sentAt = wire.sentAt
        appID = wire.appID
    }
}

/// One event of `RainProvider.events()`: what changed and the state after it.
public struct SessionEvent: Sendable, Equatable {
    /// What changed.
    public enum Kind: String, Sendable, Equatable {
        /// `authState` changed (also the first event of a stream: the current state).
        case authState
        /// `sessionState` changed.
        case sessionState
        /// The session ended without logout (see `expiryReason`).
        case sessionExpired
        /// The daemon's link to its authority changed: `state.authorityLink` says how
        /// it stands (`connected`, `degraded` with the last error, `unreachable` since when, and
        /// whether its revocation stream is up), so an app can show "offline" instead of spinning.
        case authorityLink
        /// The daemon's keys became usable or unusable (the TPM went away, the keyring locked):
        /// `state.storage` says how they stand. A failure of the device's own, not the authority's.
        case storage
    }

    /// 1 for a stream's first event, then +1 per event.
    public var sequence: UInt64
    /// What changed.
    public var kind: Kind
    /// The state after the change.
    public var state: SessionSnapshot
    /// Why the session ended, for `sessionExpired`.
    public var expiryReason: ExpiryReason?

    init(_ wire: WatchEvent) {
        sequence = wire.sequence
        switch wire.kind {
        case .authState: kind = .authState
        case .sessionState: kind = .sessionState
        case .sessionExpired: kind = .sessionExpired
        case .authorityLink: kind = .authorityLink
        case .storage: kind = .storage
        }
        state = wire.state
        expiryReason = wire.expiryReason
    }
}
