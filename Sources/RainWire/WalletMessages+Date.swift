import FoundationEssentials
import RainCore

// The wire counts Unix milliseconds; callers think in dates. The two meet here.

extension SendLoginCodeResponse {
    /// The response for a code sent to `contact` that expires at `expiresAt`, resent no sooner than
    /// `resendAfter`.
    public init(contact: RainWalletContact?, expiresAt: Date, resendAfter: Date? = nil) {
        self.init(
            contact: contact, expiresAtMilliseconds: expiresAt.unixMilliseconds,
            resendAfterMilliseconds: resendAfter?.unixMilliseconds ?? 0)
    }

    /// The earliest a Resend to this contact is accepted; nil when the authority does not say.
    public var resendAfter: Date? { resendAfterMilliseconds > 0 ? Date(unixMilliseconds: resendAfterMilliseconds) : nil }

    /// When the code expires.
    public var expiresAt: Date {
        get { Date(unixMilliseconds: expiresAtMilliseconds) }
        set { expiresAtMilliseconds = newValue.unixMilliseconds }
    }
}

extension OutboxEntry {
    /// An entry for `code`, sent to `contact` at `sentAt` for the app `appID`.
    public init(contact: RainWalletContact?, code: String, sentAt: Date, appID: String) {
        self.init(contact: contact, code: code, sentAtMilliseconds: sentAt.unixMilliseconds, appID: appID)
    }

    /// When the code was sent.
    public var sentAt: Date {
        get { Date(unixMilliseconds: sentAtMilliseconds) }
        set { sentAtMilliseconds = newValue.unixMilliseconds }
    }
}

extension AccountResponse {
    /// The response for an account created at `createdAt`.
    public init(
        accountID: String, walletID: String, createdAt: Date, contacts: [RainWalletContact],
        needsBackupEmail: Bool = false, passkeys: [PasskeyInfo] = []
    ) {
        self.init(
            accountID: accountID, walletID: walletID, createdAtMilliseconds: createdAt.unixMilliseconds, contacts: contacts,
            needsBackupEmail: needsBackupEmail, passkeys: passkeys)
    }

    /// What Account/Get answers for an authority's `AccountInfo`.
    public init(_ info: AccountInfo) {
        self.init(
            accountID: info.accountID, walletID: info.walletID, createdAt: info.createdAt, contacts: info.contacts,
            needsBackupEmail: info.needsBackupEmail, passkeys: info.passkeys)
    }

    /// When the account was created.
    public var createdAt: Date {
        get { Date(unixMilliseconds: createdAtMilliseconds) }
        set { createdAtMilliseconds = newValue.unixMilliseconds }
    }
}

extension WalletResponse {
    /// The response for a wallet created at `createdAt`.
    public init(walletID: String, createdAt: Date, ethereumAddress: String, solanaAddress: String) {
        self.init(
            walletID: walletID, createdAtMilliseconds: createdAt.unixMilliseconds, ethereumAddress: ethereumAddress,
            solanaAddress: solanaAddress)
    }

    /// What Wallet/Get answers for an authority's `WalletInfo`.
    public init(_ info: WalletInfo) {
        self.init(
            walletID: info.walletID, createdAt: info.createdAt, ethereumAddress: info.ethereumAddress,
            solanaAddress: info.solanaAddress)
    }

    /// When the wallet was created.
    public var createdAt: Date {
        get { Date(unixMilliseconds: createdAtMilliseconds) }
        set { createdAtMilliseconds = newValue.unixMilliseconds }
    }
}

extension BeginPasskeyResponse {
    /// The response for a ceremony that Finish refuses after `expiresAt`.
    public init(ceremonyID: String, optionsJSON: String, origin: String, expiresAt: Date) {
        self.init(
            ceremonyID: ceremonyID, optionsJSON: optionsJSON, origin: origin, expiresAtMilliseconds: expiresAt.unixMilliseconds)
    }

    /// When Finish starts refusing the ceremony.
    public var expiresAt: Date {
        get { Date(unixMilliseconds: expiresAtMilliseconds) }
        set { expiresAtMilliseconds = newValue.unixMilliseconds }
    }
}
