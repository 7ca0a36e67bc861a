internal import CProtobufC
internal import CRainProto
import Foundation
import RainCore

// Swift ⇄ protobuf-c for the session, login and development messages of proto/wallet.proto, and
// the pieces every message shares (the account, profile and wallet messages are in
// AccountMessages+ProtobufC.swift). Generated `Rain__Wallet__V1__…` names stay here.

// MARK: shared pieces

func cContact(_ contact: RainWalletContact?, _ arena: CArena) throws(RainError) -> UnsafeMutablePointer<
    Rain__Wallet__V1__Contact
>? {
    guard let contact else { return nil }
    var c = cMessage(rain__wallet__v1__contact__init)
    switch contact {
    case .email: c.kind = RAIN__WALLET__V1__CONTACT_KIND__CONTACT_KIND_EMAIL
    case .phone: c.kind = RAIN__WALLET__V1__CONTACT_KIND__CONTACT_KIND_PHONE
    }
    c.value = try arena.string(contact.value, field: "contact")
    return arena.box(c)
}

func readContact(_ p: UnsafeMutablePointer<Rain__Wallet__V1__Contact>?) throws(RainError) -> RainWalletContact? {
    guard let c = p?.pointee else { return nil }
    let value = try readString(c.value, field: "contact")
    switch c.kind {
    case RAIN__WALLET__V1__CONTACT_KIND__CONTACT_KIND_EMAIL: return .email(value)
    case RAIN__WALLET__V1__CONTACT_KIND__CONTACT_KIND_PHONE: return .phone(value)
    default: return nil
    }
}

func cPasskeyInfo(_ passkey: PasskeyInfo, _ arena: CArena) throws(RainError) -> UnsafeMutablePointer<
    Rain__Wallet__V1__PasskeyInfo
> {
    var c = cMessage(rain__wallet__v1__passkey_info__init)
    c.credential_id = try arena.string(passkey.credentialID, field: "credential_id")
    c.rp_id = try arena.string(passkey.rpID, field: "rp_id")
    c.created_at_ms = passkey.createdAt.unixMilliseconds
    c.last_used_at_ms = passkey.lastUsedAt?.unixMilliseconds ?? 0
    return arena.box(c)
}

func readPasskeyInfo(_ p: UnsafeMutablePointer<Rain__Wallet__V1__PasskeyInfo>?) throws(RainError) -> PasskeyInfo? {
    guard let c = p?.pointee else { return nil }
    return PasskeyInfo(
        credentialID: try readString(c.credential_id, field: "credential_id"),
        rpID: try readString(c.rp_id, field: "rp_id"), createdAt: Date(unixMilliseconds: c.created_at_ms),
        lastUsedAt: c.last_used_at_ms == 0 ? nil : Date(unixMilliseconds: c.last_used_at_ms))
}

func cSessionState(_ s: SessionSnapshot, _ arena: CArena) throws(RainError) -> UnsafeMutablePointer<
    Rain__Wallet__V1__SessionState
> {
    var c = cMessage(rain__wallet__v1__session_state__init)
    switch s.authState {
    case .loading: c.auth_state = RAIN__WALLET__V1__AUTH_STATE__AUTH_STATE_LOADING
    case .authenticated: c.auth_state = RAIN__WALLET__V1__AUTH_STATE__AUTH_STATE_AUTHENTICATED
    case .unauthenticated: c.auth_state = RAIN__WALLET__V1__AUTH_STATE__AUTH_STATE_UNAUTHENTICATED
    }
    switch s.sessionState {
    case .loading, .none: c.session_status = RAIN__WALLET__V1__SESSION_STATUS__SESSION_STATUS_NONE
    case .active(let at):
        c.session_status = RAIN__WALLET__V1__SESSION_STATUS__SESSION_STATUS_ACTIVE
        c.expires_at_ms = at.unixMilliseconds
    case .expired: c.session_status = RAIN__WALLET__V1__SESSION_STATUS__SESSION_STATUS_EXPIRED
    }
    c.account_id = try arena.string(s.accountID ?? "", field: "account id")
    c.wallet_id = try arena.string(s.walletID ?? "", field: "wallet id")
    c.has_active_session = s.hasActiveSession ? 1 : 0
    c.contact = try cContact(s.contact, arena)
    c.storage_warning = try arena.string(s.storageWarning ?? "", field: "storage warning")
    if let link = s.authorityLink {
        var l = cMessage(rain__wallet__v1__authority_link__init)
        l.state = try arena.string(link.phase.rawValue, field: "authority link")
        l.last_error = try arena.string(link.lastError ?? "", field: "authority link error")
        l.since_ms = link.since.unixMilliseconds
        c.authority_link = arena.box(l)
    }
    return arena.box(c)
}

/// The authority link of a `SessionState`; nil when absent or its state is not one this build knows.
func readAuthorityLink(_ p: UnsafeMutablePointer<Rain__Wallet__V1__AuthorityLink>?) throws(RainError)
    -> AuthorityLinkState?
{
    guard let l = p?.pointee else { return nil }
    guard let phase = AuthorityLinkState.Phase(rawValue: try readString(l.state, field: "authority link")) else {
        return nil
    }
    let error = try readString(l.last_error, field: "authority link error")
    return AuthorityLinkState(
        phase: phase, lastError: error.isEmpty ? nil : error, since: Date(unixMilliseconds: l.since_ms))
}

func readSessionState(_ p: UnsafeMutablePointer<Rain__Wallet__V1__SessionState>?) throws(RainError)
    -> SessionSnapshot
{
    guard let c = p?.pointee else { return .unauthenticated }
    let auth: AuthState
    switch c.auth_state {
    case RAIN__WALLET__V1__AUTH_STATE__AUTH_STATE_LOADING: auth = .loading
    case RAIN__WALLET__V1__AUTH_STATE__AUTH_STATE_AUTHENTICATED: auth = .authenticated
    default: auth = .unauthenticated
    }
    let session: SessionState
    switch c.session_status {
    case RAIN__WALLET__V1__SESSION_STATUS__SESSION_STATUS_ACTIVE:
        session = .active(expiresAt: Date(unixMilliseconds: c.expires_at_ms))
    case RAIN__WALLET__V1__SESSION_STATUS__SESSION_STATUS_EXPIRED: session = .expired
    default: session = auth == .loading ? .loading : .none
    }
    let account = try readString(c.account_id, field: "account id")
    let wallet = try readString(c.wallet_id, field: "wallet id")
    let warning = try readString(c.storage_warning, field: "storage warning")
    return SessionSnapshot(
        authState: auth, sessionState: session, accountID: account.isEmpty ? nil : account,
        walletID: wallet.isEmpty ? nil : wallet, contact: try readContact(c.contact),
        hasActiveSession: c.has_active_session != 0, storageWarning: warning.isEmpty ? nil : warning,
        authorityLink: try readAuthorityLink(c.authority_link))
}

// MARK: messages

extension GetInfoRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> GetInfoRequest {
        try unpackMessage(bytes, name: "GetInfoRequest", rain__wallet__v1__get_info_request__init) { _ throws(RainError) in
            GetInfoRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension GetInfoResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> GetInfoResponse {
        try unpackMessage(bytes, name: "GetInfoResponse", rain__wallet__v1__get_info_response__init) { (p) throws(RainError) in
            let m = p.pointee
            let caps = try readStrings(m.capabilities, count: m.n_capabilities, field: "capability")
            return GetInfoResponse(
                daemonVersion: try readString(m.daemon_version, field: "daemon version"),
                protocolVersion: m.protocol_version, capabilities: caps, maxFrameBytes: m.max_frame_bytes,
                storageProvider: try readString(m.storage_provider, field: "storage provider"))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__get_info_response__init)
        m.daemon_version = try arena.string(daemonVersion, field: "daemon version")
        m.protocol_version = protocolVersion
        m.max_frame_bytes = maxFrameBytes
        m.storage_provider = try arena.string(storageProvider, field: "storage provider")
        (m.n_capabilities, m.capabilities) = try arena.strings(capabilities, field: "capability")
        return packMessage(&m)
    }
}

extension SendLoginCodeRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> SendLoginCodeRequest {
        try unpackMessage(bytes, name: "SendLoginCodeRequest", rain__wallet__v1__send_login_code_request__init) {
            (p) throws(RainError) in SendLoginCodeRequest(contact: try readContact(p.pointee.contact))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__send_login_code_request__init)
        m.contact = try cContact(contact, arena)
        return packMessage(&m)
    }
}

extension SendLoginCodeResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> SendLoginCodeResponse {
        try unpackMessage(bytes, name: "SendLoginCodeResponse", rain__wallet__v1__send_login_code_response__init) {
            (p) throws(RainError) in
            SendLoginCodeResponse(
                contact: try readContact(p.pointee.contact), expiresAt: Date(unixMilliseconds: p.pointee.expires_at_ms))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__send_login_code_response__init)
        m.contact = try cContact(contact, arena)
        m.expires_at_ms = expiresAt.unixMilliseconds
        return packMessage(&m)
    }
}

extension ConfirmLoginCodeRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ConfirmLoginCodeRequest {
        try unpackMessage(bytes, name: "ConfirmLoginCodeRequest", rain__wallet__v1__confirm_login_code_request__init) {
            (p) throws(RainError) in ConfirmLoginCodeRequest(code: try readString(p.pointee.code, field: "code"))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__confirm_login_code_request__init)
        m.code = try arena.string(code, field: "code")
        return packMessage(&m)
    }
}

extension ConfirmLoginCodeResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ConfirmLoginCodeResponse {
        try unpackMessage(bytes, name: "ConfirmLoginCodeResponse", rain__wallet__v1__confirm_login_code_response__init) {
            (p) throws(RainError) in
            ConfirmLoginCodeResponse(
                session: try readSessionState(p.pointee.session), accountCreated: p.pointee.account_created != 0)
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__confirm_login_code_response__init)
        m.session = try cSessionState(session, arena)
        m.account_created = accountCreated ? 1 : 0
        return packMessage(&m)
    }
}

extension LogoutRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> LogoutRequest {
        try unpackMessage(bytes, name: "LogoutRequest", rain__wallet__v1__logout_request__init) { _ throws(RainError) in
            LogoutRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension LogoutResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> LogoutResponse {
        try unpackMessage(bytes, name: "LogoutResponse", rain__wallet__v1__logout_response__init) { (p) throws(RainError) in
            LogoutResponse(hadSession: p.pointee.had_session != 0, revokedAtAuthority: p.pointee.revoked_at_authority != 0)
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        var m = cMessage(rain__wallet__v1__logout_response__init)
        m.had_session = hadSession ? 1 : 0
        m.revoked_at_authority = revokedAtAuthority ? 1 : 0
        return packMessage(&m)
    }
}

extension GetSessionStateRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> GetSessionStateRequest {
        try unpackMessage(bytes, name: "GetSessionStateRequest", rain__wallet__v1__get_session_state_request__init) {
            _ throws(RainError) in GetSessionStateRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension SessionSnapshot: WireMessage {
    /// Decodes a `SessionState` message: its canonical form directly (SessionStateCodec.swift),
    /// anything else through protobuf-c.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> SessionSnapshot {
        if let snapshot = decodeCanonical(bytes) { return snapshot }
        return try decodeReference(bytes)
    }
    /// Encodes as a `SessionState` message (directly: SessionStateCodec.swift).
    public func encode() throws(RainError) -> [UInt8] { try canonicalBytes() }

    /// Decodes through protobuf-c: the reference `decode` is checked against.
    package static func decodeReference(_ bytes: [UInt8]) throws(RainError) -> SessionSnapshot {
        try unpackMessage(bytes, name: "SessionState", rain__wallet__v1__session_state__init) { (p) throws(RainError) in
            try readSessionState(p)
        }
    }
    /// The bytes protobuf-c packs: the reference `encode` is checked against.
    package func encodeReference() throws(RainError) -> [UInt8] {
        let arena = CArena()
        let p = try cSessionState(self, arena)
        return packMessage(&p.pointee)
    }
}

extension AwaitRestoreRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AwaitRestoreRequest {
        try unpackMessage(bytes, name: "AwaitRestoreRequest", rain__wallet__v1__await_restore_request__init) {
            (p) throws(RainError) in AwaitRestoreRequest(timeoutMilliseconds: p.pointee.timeout_ms)
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        var m = cMessage(rain__wallet__v1__await_restore_request__init)
        m.timeout_ms = timeoutMilliseconds
        return packMessage(&m)
    }
}

extension WatchRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> WatchRequest {
        try unpackMessage(bytes, name: "WatchRequest", rain__wallet__v1__watch_request__init) { _ throws(RainError) in
            WatchRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension WatchEvent {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> WatchEvent {
        try unpackMessage(bytes, name: "Event", rain__wallet__v1__event__init) { (p) throws(RainError) in
            let m = p.pointee
            let kind: Kind
            switch m.type {
            case RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_SESSION_STATE: kind = .sessionState
            case RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_SESSION_EXPIRED: kind = .sessionExpired
            case RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_AUTHORITY_LINK: kind = .authorityLink
            default: kind = .authState
            }
            let reason: ExpiryReason?
            switch m.expiry_reason {
            case RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_EXPIRED: reason = .expired
            case RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_REVOKED_ELSEWHERE: reason = .revokedElsewhere
            case RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_REFRESH_FAILED: reason = .refreshFailed
            default: reason = nil
            }
            return WatchEvent(
                sequence: m.sequence, kind: kind, state: try readSessionState(m.state), expiryReason: reason)
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__event__init)
        m.sequence = sequence
        switch kind {
        case .authState: m.type = RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_AUTH_STATE
        case .sessionState: m.type = RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_SESSION_STATE
        case .sessionExpired: m.type = RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_SESSION_EXPIRED
        case .authorityLink: m.type = RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_AUTHORITY_LINK
        }
        switch expiryReason {
        case .expired: m.expiry_reason = RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_EXPIRED
        case .revokedElsewhere: m.expiry_reason = RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_REVOKED_ELSEWHERE
        case .refreshFailed: m.expiry_reason = RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_REFRESH_FAILED
        case nil: m.expiry_reason = RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_UNSPECIFIED
        }
        m.state = try cSessionState(state, arena)
        return packMessage(&m)
    }
}

extension ListOutboxRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ListOutboxRequest {
        try unpackMessage(bytes, name: "ListOutboxRequest", rain__wallet__v1__list_outbox_request__init) { _ throws(RainError) in
            ListOutboxRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension ListOutboxResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> ListOutboxResponse {
        try unpackMessage(bytes, name: "ListOutboxResponse", rain__wallet__v1__list_outbox_response__init) {
            (p) throws(RainError) in
            let m = p.pointee
            let entries = try readList(m.entries, count: m.n_entries) { (p) throws(RainError) in
                try p.map { (e) throws(RainError) in
                    OutboxEntry(
                        contact: try readContact(e.pointee.contact), code: try readString(e.pointee.code, field: "code"),
                        sentAt: Date(unixMilliseconds: e.pointee.sent_at_ms),
                        appID: try readString(e.pointee.app_id, field: "app id"))
                }
            }
            return ListOutboxResponse(entries: entries)
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__list_outbox_response__init)
        (m.n_entries, m.entries) = try arena.list(entries) { (e) throws(RainError) in
            var c = cMessage(rain__wallet__v1__outbox_entry__init)
            c.contact = try cContact(e.contact, arena)
            c.code = try arena.string(e.code, field: "code")
            c.sent_at_ms = e.sentAt.unixMilliseconds
            c.app_id = try arena.string(e.appID, field: "app id")
            return arena.box(c)
        }
        return packMessage(&m)
    }
}

extension SlowEchoRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> SlowEchoRequest {
        try unpackMessage(bytes, name: "SlowEchoRequest", rain__wallet__v1__slow_echo_request__init) { (p) throws(RainError) in
            SlowEchoRequest(delayMilliseconds: p.pointee.delay_ms, data: readBytes(p.pointee.data))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__slow_echo_request__init)
        m.delay_ms = delayMilliseconds
        m.data = arena.bytes(data)
        return packMessage(&m)
    }
}

extension SlowEchoResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> SlowEchoResponse {
        try unpackMessage(bytes, name: "SlowEchoResponse", rain__wallet__v1__slow_echo_response__init) { (p) throws(RainError) in
            SlowEchoResponse(data: readBytes(p.pointee.data))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__slow_echo_response__init)
        m.data = arena.bytes(data)
        return packMessage(&m)
    }
}
