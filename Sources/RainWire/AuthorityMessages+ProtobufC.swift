internal import CProtobufC
internal import CRainProto
import Foundation
import RainCore

// Swift ⇄ protobuf-c for the authority hop's messages whose Swift shape differs from the wire's
// (proto/authority.proto; the others are generated). Generated `Rain__Wallet__V1__…` names stay here.

// MARK: shared pieces

// Contacts convert with `cContact` / `readContact` (Contact+ProtobufC.swift).

func cTokens(_ tokens: SessionTokens, _ arena: CArena) throws(RainError)
    -> UnsafeMutablePointer<Rain__Wallet__V1__AuthoritySessionTokens>
{
    var c = cMessage(rain__wallet__v1__authority_session_tokens__init)
    c.access_token = try arena.string(tokens.accessToken, field: "access_token")
    c.refresh_token = try arena.string(tokens.refreshToken, field: "refresh_token")
    c.access_lifetime_ms = tokens.accessLifetime.milliseconds
    return arena.box(c)
}

/// Absent tokens read as empty ones (the receiver refuses them where they matter).
func readTokens(_ p: UnsafeMutablePointer<Rain__Wallet__V1__AuthoritySessionTokens>?) throws(RainError)
    -> SessionTokens
{
    guard let c = p?.pointee else { return .empty }
    return SessionTokens(
        accessToken: try readString(c.access_token, field: "access_token"),
        refreshToken: try readString(c.refresh_token, field: "refresh_token"),
        accessLifetime: .milliseconds(c.access_lifetime_ms))
}

// MARK: messages

extension SendCodeRequest {
    /// Decodes an `AuthoritySendLoginCodeRequest`.
    /// - Throws: RAIN_102 (field `contact`) when it names no contact.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> SendCodeRequest {
        try unpackMessage(bytes, name: "AuthoritySendLoginCodeRequest", rain__wallet__v1__authority_send_login_code_request__init)
        { (p) throws(RainError) in
            let m = p.pointee
            guard let contact = try readContact(m.contact) else {
                throw RainError.invalid("the request names no contact", field: "contact")
            }
            return SendCodeRequest(
                appID: try readString(m.app_id, field: "app_id"), deviceID: try readString(m.device_id, field: "device_id"),
                contact: contact)
        }
    }
    /// Encodes as an `AuthoritySendLoginCodeRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_send_login_code_request__init)
        m.app_id = try arena.string(appID, field: "app_id")
        m.device_id = try arena.string(deviceID, field: "device_id")
        m.contact = try cContact(contact, arena)
        return packMessage(&m)
    }
}

extension SendCodeResult {
    /// Decodes an `AuthoritySendLoginCodeResponse`.
    /// - Throws: RAIN_102 (field `contact`) when it names no contact.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> SendCodeResult {
        try unpackMessage(
            bytes, name: "AuthoritySendLoginCodeResponse", rain__wallet__v1__authority_send_login_code_response__init
        ) { (p) throws(RainError) in
            let m = p.pointee
            guard let contact = try readContact(m.contact) else {
                throw RainError.invalid("the answer names no contact", field: "contact")
            }
            return SendCodeResult(
                challengeID: try readString(m.challenge_id, field: "challenge_id"), contact: contact,
                expiresAt: Date(unixMilliseconds: m.expires_at_ms))
        }
    }
    /// Encodes as an `AuthoritySendLoginCodeResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_send_login_code_response__init)
        m.challenge_id = try arena.string(challengeID, field: "challenge_id")
        m.contact = try cContact(contact, arena)
        m.expires_at_ms = expiresAt.unixMilliseconds
        return packMessage(&m)
    }
}

extension AccountInfo {
    /// Decodes an `AuthorityAccountInfoResponse`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AccountInfo {
        try unpackMessage(bytes, name: "AuthorityAccountInfoResponse", rain__wallet__v1__authority_account_info_response__init) {
            (p) throws(RainError) in try p.pointee.account()
        }
    }
    /// Encodes as an `AuthorityAccountInfoResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_account_info_response__init)
        try m.set(self, arena)
        return packMessage(&m)
    }
}

extension WalletInfo {
    /// Decodes an `AuthorityWalletResponse`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> WalletInfo {
        try unpackMessage(bytes, name: "AuthorityWalletResponse", rain__wallet__v1__authority_wallet_response__init) {
            (p) throws(RainError) in try p.pointee.wallet()
        }
    }
    /// Encodes as an `AuthorityWalletResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_wallet_response__init)
        try m.set(self, arena)
        return packMessage(&m)
    }
}

// MARK: the account and the wallet, which both hops carry

/// An account as shown: `AccountInfo` (authority hop) and `AccountResponse` (device protocol).
protocol AccountFields {
    var accountID: String { get }
    var walletID: String { get }
    var createdAt: Date { get }
    var contacts: [RainWalletContact] { get }
    var needsBackupEmail: Bool { get }
    var passkeys: [PasskeyInfo] { get }
}
extension AccountInfo: AccountFields {}
extension AccountResponse: AccountFields {}

/// The C fields `AuthorityAccountInfoResponse` and `AccountResponse` share, same names and numbers:
/// one reader and one writer serve both messages.
protocol CAccountMessage {
    var account_id: UnsafeMutablePointer<CChar>! { get set }
    var wallet_id: UnsafeMutablePointer<CChar>! { get set }
    var created_at_ms: Int64 { get set }
    var n_contacts: Int { get set }
    var contacts: UnsafeMutablePointer<UnsafeMutablePointer<Rain__Wallet__V1__Contact>?>! { get set }
    var needs_backup_email: protobuf_c_boolean { get set }
    var n_passkeys: Int { get set }
    var passkeys: UnsafeMutablePointer<UnsafeMutablePointer<Rain__Wallet__V1__PasskeyInfo>?>! { get set }
}
extension Rain__Wallet__V1__AuthorityAccountInfoResponse: CAccountMessage {}
extension Rain__Wallet__V1__AccountResponse: CAccountMessage {}

extension CAccountMessage {
    /// The account the message carries.
    func account() throws(RainError) -> AccountInfo {
        AccountInfo(
            accountID: try readString(account_id, field: "account_id"), walletID: try readString(wallet_id, field: "wallet_id"),
            createdAt: Date(unixMilliseconds: created_at_ms), contacts: try readList(contacts, count: n_contacts, readContact),
            needsBackupEmail: needs_backup_email != 0, passkeys: try readList(passkeys, count: n_passkeys, readPasskeyInfo))
    }
    /// Sets the fields from `account`, allocating in `arena`.
    mutating func set(_ account: some AccountFields, _ arena: CArena) throws(RainError) {
        account_id = try arena.string(account.accountID, field: "account_id")
        wallet_id = try arena.string(account.walletID, field: "wallet_id")
        created_at_ms = account.createdAt.unixMilliseconds
        (n_contacts, contacts) = try arena.list(account.contacts) { (v) throws(RainError) in try cContact(v, arena) }
        needs_backup_email = account.needsBackupEmail ? 1 : 0
        (n_passkeys, passkeys) = try arena.list(account.passkeys) { (v) throws(RainError) in try cPasskeyInfo(v, arena) }
    }
}

/// What may be shown of a wallet: `WalletInfo` (authority hop) and `WalletResponse` (device protocol).
protocol WalletFields {
    var walletID: String { get }
    var createdAt: Date { get }
    var ethereumAddress: String { get }
    var solanaAddress: String { get }
}
extension WalletInfo: WalletFields {}
extension WalletResponse: WalletFields {}

/// The C fields `AuthorityWalletResponse` and `WalletResponse` share, same names and numbers.
protocol CWalletMessage {
    var wallet_id: UnsafeMutablePointer<CChar>! { get set }
    var created_at_ms: Int64 { get set }
    var ethereum_address: UnsafeMutablePointer<CChar>! { get set }
    var solana_address: UnsafeMutablePointer<CChar>! { get set }
}
extension Rain__Wallet__V1__AuthorityWalletResponse: CWalletMessage {}
extension Rain__Wallet__V1__WalletResponse: CWalletMessage {}

extension CWalletMessage {
    /// The wallet the message carries.
    func wallet() throws(RainError) -> WalletInfo {
        WalletInfo(
            walletID: try readString(wallet_id, field: "wallet_id"), createdAt: Date(unixMilliseconds: created_at_ms),
            ethereumAddress: try readString(ethereum_address, field: "ethereum_address"),
            solanaAddress: try readString(solana_address, field: "solana_address"))
    }
    /// Sets the fields from `wallet`, allocating in `arena`.
    mutating func set(_ wallet: some WalletFields, _ arena: CArena) throws(RainError) {
        wallet_id = try arena.string(wallet.walletID, field: "wallet_id")
        created_at_ms = wallet.createdAt.unixMilliseconds
        ethereum_address = try arena.string(wallet.ethereumAddress, field: "ethereum_address")
        solana_address = try arena.string(wallet.solanaAddress, field: "solana_address")
    }
}
