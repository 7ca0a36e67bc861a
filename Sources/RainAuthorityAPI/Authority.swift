import FoundationEssentials
import RainCore
import RainCrypto
import RainWire

/// The authority API: accounts, contacts, login codes, wallets and session tokens.
///
/// One async protocol, the same whether the authority runs in-process (`EmbeddedAuthority`) or
/// remotely over framed protobuf. Its calls (`AuthorityCalls`) are generated from `service
/// Authority` in proto/authority.proto, each one request message in and one response message out
/// with its `AuthorityCaller`, documented there; what is declared here is the rest: whether a read
/// still stands, and the link to a remote authority. Every method throws `RainError` only.
public protocol Authority: AuthorityCalls {
    /// What tells whether an answer read from this authority is still its answer, so the device may
    /// give it again without asking (`ReadFreshness`); nil by default: every read asks.
    var readFreshness: (any ReadFreshness)? { get }

    // The link to a remote authority

    /// The link to the authority (a remote one); nil in-process, where it is always connected.
    var linkState: AuthorityLinkState? { get }

    /// Calls `observer` with each change of `linkState` (never, in-process).
    func observeLink(_ observer: @escaping @Sendable (AuthorityLinkState) -> Void)

    /// How long each kind of call may wait (a remote authority); nil in-process: no network hop.
    var deadlines: AuthorityDeadlines? { get }
}

/// Who makes a call of the `Authority` protocol: the device keys it proved, and where it comes from
/// when a server identified it. Never a field of a request: `AuthorityService` fills it from the
/// connection, and a device in-process from its own keys.
public struct AuthorityCaller: Sendable, Equatable {
    /// The device keys the caller proved; none for a caller that proved nothing (calls without a
    /// token need no proof).
    public var proof: DeviceProof
    /// Where the call comes from, for the per-source send limit and wrong-guess budget: set by the
    /// server that identified the caller (`AuthorityService`: the connection's source address).
    /// Nil in-process: the authority counts its own caller (the embedded authority: this daemon's
    /// uid); an authority that forwards the call (`RemoteAuthority`) sends nothing of the caller,
    /// since its server counts the connection it sees.
    public var source: SendSource?
    /// When the caller stops waiting for the answer, on this machine's monotonic clock: set by the
    /// server from the request's `timeout_ms` as it arrived. A call whose work waits on the network
    /// (a code's delivery) ends before it, so the caller gets the outcome rather than its own
    /// timeout. Nil: the caller set none (in-process, or `timeout_ms` 0); the work's own bounds
    /// apply. Real time, not the injected clock: what it bounds (a mail server's answer) runs on it.
    public var deadline: ContinuousClock.Instant?

    /// A caller.
    public init(proof: DeviceProof = .none(), source: SendSource? = nil, deadline: ContinuousClock.Instant? = nil) {
        self.proof = proof
        self.source = source
        self.deadline = deadline
    }

    /// A caller in-process that proves the keys `holder` holds.
    public init(holder: any DeviceKeyHolder) {
        self.init(proof: DeviceProof(holder: holder))
    }

    /// A caller in-process that proves nothing: for calls that carry no token.
    public static let anonymous = AuthorityCaller()
}

/// The device keys a caller has proven: on the authority hop, each key whose signature over the
/// connection's challenge (and TLS channel binding) the authority verified; in-process, the keys the
/// device's provider holds.
public struct DeviceProof: Sendable, Equatable {
    /// The device that proved them.
    public var deviceID: String
    /// The proven keys (at most two: the current key and, during a migration, the previous one).
    public var keys: [DevicePublicKey]

    /// A proof of `keys` by `deviceID`.
    public init(deviceID: String, keys: [DevicePublicKey]) {
        self.deviceID = deviceID
        self.keys = keys
    }

    /// The keys `holder` holds, as an in-process proof.
    public init(holder: any DeviceKeyHolder) {
        self.init(deviceID: holder.deviceID, keys: holder.signers.map(\.publicKey))
    }

    /// Whether `key` is among the proven keys.
    public func contains(_ key: DevicePublicKey) -> Bool { keys.contains(key) }

    /// Whether a key with these wire bytes (a session's `device_public_key`) is among the proven keys.
    public func contains(wireBytes: [UInt8]) -> Bool { keys.contains { $0.wireBytes == wireBytes } }

    /// No proof: what a connection that proved nothing carries.
    public static func none(deviceID: String = "") -> DeviceProof { DeviceProof(deviceID: deviceID, keys: []) }

    /// Whether nothing was proven.
    public var isEmpty: Bool { keys.isEmpty }
}

extension Authority {
    /// Not supported: only authorities that bind sessions to device keys implement it.
    public func rebindDevice(_ request: AuthorityRebindDeviceRequest, caller: AuthorityCaller) async throws(RainError)
        -> AuthorityRebindDeviceResponse
    {
        throw RainError(.provider, "this authority cannot move a device to a new key")
    }

    /// Not supported: only authorities that bind sessions to device keys implement it.
    public func confirmDeviceKey(_ request: AuthorityConfirmDeviceKeyRequest, caller: AuthorityCaller)
        async throws(RainError) -> AuthorityConfirmDeviceKeyResponse
    {
        throw RainError(.provider, "this authority cannot move a device to a new key")
    }
}

extension Authority {
    /// Nothing read is given again: every read asks the authority.
    public var readFreshness: (any ReadFreshness)? { nil }

    /// In-process: no link to follow.
    public var linkState: AuthorityLinkState? { nil }

    /// In-process: the link never changes.
    public func observeLink(_ observer: @escaping @Sendable (AuthorityLinkState) -> Void) {}

    /// In-process: no network hop to bound.
    public var deadlines: AuthorityDeadlines? { nil }
}

/// Whether what the authority answered before still stands: a stamp of every change the authority
/// has made, which moves before any change is reported done to its caller.
///
/// A read stamped before it asked (`stamp()`) may be given again while `stamp()` returns the same
/// value: nothing has changed since it was read. The device keeps Account/Get and Wallet/Get that
/// way, so the seed's rule holds of them: a change completed on the authority (a login elsewhere
/// that ends this session, a contact added) is never answered stale afterwards.
public protocol ReadFreshness: Sendable {
    /// The stamp now; nil when nothing read may be given again. Cheap and never blocks: it is
    /// taken on the event loop for every cached read.
    func stamp() -> UInt64?
}

// The value types the API takes and returns (`SendCodeRequest`, `LoginResult`, `AccountInfo`,
// `WalletInfo`, `WalletSecrets`, `PasskeyBeginRequest`, …) are RainWire's authority messages: what
// `Authority` returns is exactly what `AuthorityService` sends and `RemoteAuthority` decodes.

/// What proves a device to the authority: its id and the keys it holds. `RemoteAuthority` proves
/// possession of each key once per connection; the embedded authority takes them in-process.
public protocol DeviceKeyHolder: Sendable {
    /// The device id sessions are bound to.
    var deviceID: String { get }
    /// The current key first, then the previous one while a key migration is under way.
    var signers: [any DeviceSigner] { get }
}
