internal import CProtobufC
internal import CRainProto
import FoundationEssentials
import RainCore

// Swift ⇄ protobuf-c for session.proto, whose Swift side stays hand-written: SessionSnapshot is
// the session's state everywhere (RainCore), and the per-call path encodes it directly
// (SessionStateCodec.swift). Generated messages that embed a SessionState call `cSessionState` and
// `readSessionState` (the generator's HAND_WRITTEN table names them).

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
    c.authority_link = try cAuthorityLink(s.authorityLink, arena)
    c.storage = try cStorageHealth(s.storage, arena)
    return arena.box(c)
}

/// An `AuthorityLink` message; nil for no link.
func cAuthorityLink(_ link: AuthorityLinkState?, _ arena: CArena) throws(RainError) -> UnsafeMutablePointer<
    Rain__Wallet__V1__AuthorityLink
>? {
    guard let link else { return nil }
    var l = cMessage(rain__wallet__v1__authority_link__init)
    l.state = try arena.string(link.phase.rawValue, field: "authority link")
    l.last_error = try arena.string(link.lastError ?? "", field: "authority link error")
    l.since_ms = link.since.unixMilliseconds
    if let stream = link.revocationStream {
        l.revocation_stream = try arena.string(stream.word, field: "revocation stream")
        l.revocation_error = try arena.string(stream.lastError ?? "", field: "revocation stream error")
        l.revocation_since_ms = stream.since.unixMilliseconds
    }
    return arena.box(l)
}

/// A `StorageHealth` message; nil for none.
func cStorageHealth(_ health: StorageHealthState?, _ arena: CArena) throws(RainError) -> UnsafeMutablePointer<
    Rain__Wallet__V1__StorageHealth
>? {
    guard let health else { return nil }
    var h = cMessage(rain__wallet__v1__storage_health__init)
    h.state = try arena.string(health.word, field: "storage health")
    h.last_error = try arena.string(health.lastError ?? "", field: "storage health error")
    h.since_ms = health.since.unixMilliseconds
    return arena.box(h)
}

/// The storage health of a `SessionState` or `GetInfoResponse`; nil when absent or its state is
/// not one this build knows.
func readStorageHealth(_ p: UnsafeMutablePointer<Rain__Wallet__V1__StorageHealth>?) throws(RainError)
    -> StorageHealthState?
{
    guard let h = p?.pointee else { return nil }
    let isAvailable: Bool
    switch try readString(h.state, field: "storage health") {
    case "available": isAvailable = true
    case "unavailable": isAvailable = false
    default: return nil
    }
    let error = try readString(h.last_error, field: "storage health error")
    return StorageHealthState(
        isAvailable: isAvailable, lastError: error.isEmpty ? nil : error, since: Date(unixMilliseconds: h.since_ms))
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
    let streamError = try readString(l.revocation_error, field: "revocation stream error")
    let stream: RevocationStreamState? =
        switch try readString(l.revocation_stream, field: "revocation stream") {
        case "up": RevocationStreamState(isUp: true, since: Date(unixMilliseconds: l.revocation_since_ms))
        case "down":
            RevocationStreamState(
                isUp: false, lastError: streamError.isEmpty ? nil : streamError,
                since: Date(unixMilliseconds: l.revocation_since_ms))
        default: nil
        }
    return AuthorityLinkState(
        phase: phase, lastError: error.isEmpty ? nil : error, since: Date(unixMilliseconds: l.since_ms),
        revocationStream: stream)
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
        authorityLink: try readAuthorityLink(c.authority_link), storage: try readStorageHealth(c.storage))
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
