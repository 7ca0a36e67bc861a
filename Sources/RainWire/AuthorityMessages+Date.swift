import FoundationEssentials
import RainCore

// The authority hop's wire counts Unix milliseconds; the authority and the device think in dates.
// The two meet here, as WalletMessages+Date.swift does for the device protocol.

extension AccountInfo {
    /// The info for an account created at `createdAt`; `needsBackupEmail` defaults to whether
    /// `contacts` holds no email.
    public init(
        accountID: String, walletID: String, createdAt: Date, contacts: [RainWalletContact],
        needsBackupEmail: Bool? = nil, passkeys: [PasskeyInfo] = []
    ) {
        self.init(
            accountID: accountID, walletID: walletID, createdAtMilliseconds: createdAt.unixMilliseconds, contacts: contacts,
            needsBackupEmail: needsBackupEmail ?? !Self.hasEmail(contacts), passkeys: passkeys)
    }

    /// Whether `contacts` holds an email address.
    public static func hasEmail(_ contacts: [RainWalletContact]) -> Bool {
        contacts.contains { if case .email = $0 { true } else { false } }
    }

    /// When the account was created.
    public var createdAt: Date {
        get { Date(unixMilliseconds: createdAtMilliseconds) }
        set { createdAtMilliseconds = newValue.unixMilliseconds }
    }
}

extension WalletInfo {
    /// The info for a wallet created (with its account) at `createdAt`.
    public init(walletID: String, createdAt: Date, ethereumAddress: String, solanaAddress: String) {
        self.init(
            walletID: walletID, createdAtMilliseconds: createdAt.unixMilliseconds, ethereumAddress: ethereumAddress,
            solanaAddress: solanaAddress)
    }

    /// When the wallet was created.
    public var createdAt: Date {
        get { Date(unixMilliseconds: createdAtMilliseconds) }
        set { createdAtMilliseconds = newValue.unixMilliseconds }
    }
}

extension PasskeyCeremony {
    /// A ceremony whose challenge stops being accepted at `expiresAt`.
    public init(ceremonyID: String, optionsJSON: String, expiresAt: Date) {
        self.init(ceremonyID: ceremonyID, optionsJSON: optionsJSON, expiresAtMilliseconds: expiresAt.unixMilliseconds)
    }

    /// When the challenge stops being accepted.
    public var expiresAt: Date {
        get { Date(unixMilliseconds: expiresAtMilliseconds) }
        set { expiresAtMilliseconds = newValue.unixMilliseconds }
    }
}

extension SendCodeResult {
    /// The pending challenge `challengeID`, whose code went to `contact` and expires at `expiresAt`.
    public init(challengeID: String, contact: RainWalletContact, expiresAt: Date, resendAfter: Date? = nil) {
        self.init(
            challengeID: challengeID, contact: contact, expiresAtMilliseconds: expiresAt.unixMilliseconds,
            resendAfterMilliseconds: resendAfter?.unixMilliseconds ?? 0)
    }

    /// The earliest another code to this contact can be sent; nil when the authority does not say.
    public var resendAfter: Date? { resendAfterMilliseconds > 0 ? Date(unixMilliseconds: resendAfterMilliseconds) : nil }

    /// When the code expires.
    public var expiresAt: Date {
        get { Date(unixMilliseconds: expiresAtMilliseconds) }
        set { expiresAtMilliseconds = newValue.unixMilliseconds }
    }
}
