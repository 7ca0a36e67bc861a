import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire

/// Serves an `Authority` (normally the `EmbeddedAuthority`) over the framed protocol: the server
/// side of `rainwalletd authority --listen HOST:PORT`, answering `RemoteAuthority`.
///
/// Methods are `AuthorityMethod`, each declared once in `routes` with its messages and policy.
/// Payloads are decoded on the loop thread (an undecodable one is answered at once with RAIN_102
/// `undecodable_payload`); each call then runs in a `Task` and is answered when the authority
/// returns, so answers come in any order. The authority's `RainError`
/// goes on the wire as it is, code and details included. `GetInfo` is answered inline. Requests
/// carry no profile: metadata is ignored. `Request.timeout_ms` is ignored too (the client keeps its
/// own deadline). Cancelling a call answers it at once (RAIN_102 `cancelled`) but does not undo
/// the work. Nothing from a payload (codes, tokens) is ever logged.
///
/// Running it (the daemon's `authority` subcommand):
/// ```swift
/// let address = try TCPAddress(parsing: listen, field: "listen")       // loopback only
/// let fd = try TCPSocket.listen(address)
/// var options = ServerOptions()
/// options.isTCP = true
/// let service = AuthorityService(authority: embedded, isDevOutboxEnabled: devOutbox, logger: logger)
/// let server = try EventLoopServer(listeningSocket: fd, options: options, handler: service, logger: logger)
/// server.run()   // on its own thread; server.stop(drainTimeout:) from the SIGTERM handler
/// ```
public final class AuthorityService: ServerHandler {
    /// What a route gets besides its request: the authority, and where the call comes from.
    public struct Call: Sendable {
        /// The authority served.
        public let authority: any Authority
        /// The caller's source for the per-source send limit and wrong-guess budget: the
        /// connection's source address (TCP), or the peer's uid (a Unix socket). Never taken from
        /// the request.
        public let source: SendSource
        /// The device keys proven on the caller's connection (none before `ProveDevice`).
        public let proof: DeviceProof
        /// When the caller stops waiting: the request's `timeout_ms` from when it arrived; nil
        /// without one.
        public let deadline: ContinuousClock.Instant?
        /// Who calls, as the `Authority` protocol takes it: the connection's proof and source, and
        /// the request's deadline.
        public var caller: AuthorityCaller { AuthorityCaller(proof: proof, source: source, deadline: deadline) }
        /// The caller's connection.
        let connection: ConnectionID
        /// The connection's TLS channel binding; nil on plain TCP.
        let channelBinding: [UInt8]?
        /// Every connection's device proofs.
        let proofs: DeviceProofRegistry
        /// The open `WatchRevocations` streams; nil: the authority pushes nothing.
        let revocations: RevocationStreams?
    }

    /// Every method of `AuthorityMethod`, declared once; each call's context is a `Call`.
    public let routes: RouteTable<Call>
    private let authority: any Authority
    private let isDevOutboxEnabled: Bool
    /// Whether `WatchRevocations` streams get heartbeats (`AuthorityCapability.revocationHeartbeat`).
    private let sendsHeartbeats: Bool
    /// Whether devices get read leases (`AuthorityCapability.readLease`).
    private let grantsLeases: Bool
    /// Each connection's challenge and proven keys.
    let proofs = DeviceProofRegistry()
    /// The open `WatchRevocations` streams; nil without a hub.
    let revocationStreams: RevocationStreams?

    /// The `WatchRevocations` heartbeat interval by default (`rainwalletd authority --revocation-heartbeat`).
    public static let defaultRevocationHeartbeat: Duration = .seconds(15)

    /// Creates the service.
    /// - Parameters:
    ///   - authority: the authority to serve.
    ///   - isDevOutboxEnabled: serve `ListOutbox` (`--dev-outbox`); otherwise it is RAIN_202. The
    ///     authority itself must also allow it (`AuthoritySettings.isDevOutboxEnabled`).
    ///   - version: the daemon version `GetInfo` reports.
    ///   - maximumFrameBytes: the frame limit `GetInfo` reports (the server's
    ///     `ServerOptions.maximumFrameLength`).
    ///   - logger: method names and error codes only, never payloads.
    ///   - revocations: where the authority announces revoked sessions (`EmbeddedAuthority.revocations`),
    ///     pushed to the devices' `WatchRevocations` streams; nil refuses the stream (RAIN_202).
    ///   - revocationHeartbeat: how often each stream gets a heartbeat (and one when it opens), so a
    ///     device can tell a dead link from a quiet one; nil sends none (what an older authority does).
    ///   - clock: times the heartbeats.
    ///   - callMetrics: counts and times every call by method and outcome; nil counts nothing.
    ///   - readLease: the read lease granted to the devices on their streams (at most 1 s; zero
    ///     grants none). Granted only with `revocations` and an authority that tells every change
    ///     it makes (`Authority.readFreshness`: a store this process alone writes).
    public init(
        authority: any Authority, isDevOutboxEnabled: Bool = false, version: String = "unknown",
        maximumFrameBytes: Int = Frame.defaultMaximumLength, logger: Logger, revocations: RevocationHub? = nil,
        revocationHeartbeat: Duration? = AuthorityService.defaultRevocationHeartbeat, clock: any RainClock = SystemClock(),
        callMetrics: CallMetrics? = nil, readLease: Duration = ReadLease.longest
    ) {
        self.authority = authority
        let leases = ReadLeases(
            duration: authority.readFreshness == nil ? .zero : readLease, logger: logger.child("leases"))
        self.revocationStreams = revocations.map {
            RevocationStreams(hub: $0, heartbeat: revocationHeartbeat, clock: clock, leases: leases)
        }
        self.isDevOutboxEnabled = isDevOutboxEnabled
        self.sendsHeartbeats = revocations != nil && revocationHeartbeat != nil
        self.grantsLeases = revocations != nil && leases.isGranting
        let info = GetInfoResponse(
            daemonVersion: version, protocolVersion: protocolVersion,
            capabilities: Self.capabilities(
                isDevOutboxEnabled: isDevOutboxEnabled, sendsHeartbeats: sendsHeartbeats, grantsLeases: grantsLeases),
            maxFrameBytes: UInt32(clamping: maximumFrameBytes))
        self.callMetrics = callMetrics
        self.routes = Self.routes(
            info: info, isDevOutboxEnabled: isDevOutboxEnabled, logger: logger, callMetrics: callMetrics)
    }

    /// Counts and times the calls; nil when not counted.
    public let callMetrics: CallMetrics?

    /// The service's metric families: its calls (when counted) and its revocation streams.
    public var metricFamilies: [any MetricFamily] {
        (callMetrics?.families ?? []) + (revocationStreams?.metricFamilies ?? [])
    }

    /// The capabilities `GetInfo` reports.
    public var capabilities: [String] {
        Self.capabilities(isDevOutboxEnabled: isDevOutboxEnabled, sendsHeartbeats: sendsHeartbeats, grantsLeases: grantsLeases)
    }

    private static func capabilities(isDevOutboxEnabled: Bool, sendsHeartbeats: Bool, grantsLeases: Bool) -> [String] {
        ["login-code", "refresh", "account-info", "revoke", "wallet", "export", "passkeys", "contacts", "device-proof"]
            + (isDevOutboxEnabled ? ["dev-outbox"] : [])
            + (sendsHeartbeats ? [AuthorityCapability.revocationHeartbeat] : [])
            + (grantsLeases ? [AuthorityCapability.readLease] : [])
    }

    /// Dispatches one request (loop thread; never blocks). Requests carry no profile, and the
    /// client keeps its own deadline: the table arms none.
    public func handle(_ request: WireRequest, context: RequestContext) -> HandlerDecision {
        routes.handle(
            request, context: context,
            call: Call(
                authority: authority, source: Self.source(of: context.peer),
                proof: proofs.proof(for: context.connection),
                deadline: request.timeoutMilliseconds > 0
                    ? .now + .milliseconds(Int64(request.timeoutMilliseconds)) : nil,
                connection: context.connection,
                channelBinding: context.channelBinding, proofs: proofs, revocations: revocationStreams))
    }

    /// The send source of a peer: its TCP source address, else its uid (a Unix peer), else the
    /// source shared by every TCP peer whose address could not be read.
    static func source(of peer: PeerCredentials) -> SendSource {
        if let address = peer.address { return .address(address) }
        if peer.uid == PeerCredentials.tcpPeer.uid { return .unknownAddress }
        return .uid(peer.uid)
    }

    /// Ends a cancelled `WatchRevocations` stream; any other cancelled call was already answered,
    /// and its work is not undone.
    public func cancel(connection: ConnectionID, requestID: UInt64) {
        revocationStreams?.cancel(connection: connection, requestID: requestID)
    }

    /// Drops the connection's device proof and its `WatchRevocations` streams.
    public func connectionClosed(_ connection: ConnectionID) {
        proofs.drop(connection)
        revocationStreams?.connectionClosed(connection)
    }

    /// The authority hop's RPCs, one declaration per method of `AuthorityMethod`, generated from
    /// `service Authority` with each rpc's policy (`declaredRoutes`): every call but those the
    /// service answers itself runs on the authority in a task, with its `Call.caller`. Reads are
    /// retried by the device, sends never; `needsSession` marks the calls that present a session's
    /// token; sensitive calls export a secret or add a credential or contact to an account (to be
    /// confirmed and audited). The two proof calls run on the loop, so a proof is in place before
    /// the next request on the connection is dispatched.
    static func routes(
        info: GetInfoResponse, isDevOutboxEnabled: Bool, logger: Logger, callMetrics: CallMetrics? = nil
    ) -> RouteTable<Call> {
        RouteTable(
            deadlineClock: nil, outcomeLog: .failures(logger),
            unknownMethod: UnknownMethodAnswer(infoMethod: AuthorityMethod.getInfo, serviceName: "authority"),
            callMetrics: callMetrics, routes: declaredRoutes(ownHandlers(info: info, isDevOutboxEnabled: isDevOutboxEnabled)))
    }

    /// The handlers of the rpcs the service answers from the connection or its own state.
    private static func ownHandlers(info: GetInfoResponse, isDevOutboxEnabled: Bool) -> OwnHandlers {
        OwnHandlers(
            getInfo: .loop { (_, _) throws(RainError) in info },
            listOutbox: isDevOutboxEnabled
                ? .actor { (r, call) throws(RainError) in try await call.authority.listOutbox(r, caller: call.caller) }
                : .loop { (_, _) throws(RainError) in
                    throw RainError(
                        .unauthorized, "the development outbox is disabled; start the authority with --dev-outbox to enable it")
                },
            beginDeviceProof: .loop { (_, call) throws(RainError) in
                AuthorityBeginDeviceProofResponse(challenge: try call.proofs.challenge(for: call.connection))
            },
            proveDevice: .loop { (r, call) throws(RainError) in
                // One signature check (tens of microseconds) on the loop: the next request on the
                // connection then sees the proven key.
                try call.proofs.prove(r, on: call.connection, channelBinding: call.channelBinding)
                return AuthorityProveDeviceResponse()
            },
            // Pushed revocations, only to a connection that proved its device key.
            watchRevocations: .stream { (_, call, server) throws(RainError) in
                guard let streams = call.revocations else {
                    throw RainError(
                        .unauthorized, "this authority pushes no revocations; the device learns of them at its next call",
                        details: .init(reason: "revocations_unavailable"))
                }
                try streams.watch(proof: call.proofs.proof(for: call.connection), server: server)
            },
            // A renewal and an acknowledgement, on the loop: ordered with the stream's notices.
            renewLease: .loop { (r, call) throws(RainError) in
                guard let leases = call.revocations?.leases else {
                    throw RainError(
                        .unauthorized, "this authority grants no read leases",
                        details: .init(reason: "lease_needs_stream"))
                }
                return try leases.renew(call.connection, acked: r.ackedSequence)
            })
    }
}

extension AuthorityService.Call {
    /// Runs one call of the authority as read leases need it (`ReadLeases`): the accounts it
    /// read or changed are collected (`TouchedAccounts`), the proven device is counted among their
    /// readers, and a change (any call but a read, and a read during which the store changed) is
    /// answered only once no leased reader of those accounts can still answer from before it.
    /// Without leases, just the call.
    func leased<Response>(isRead: Bool, _ body: () async throws(RainError) -> Response) async throws(RainError)
        -> Response
    {
        guard let leases = revocations?.leases, leases.isGranting, let freshness = authority.readFreshness else {
            return try await body()
        }
        let before = freshness.stamp()
        let (result, accounts) = await TouchedAccounts.collect(body)
        if !proof.isEmpty { leases.noteReaders(proof.deviceID, of: accounts) }
        // A read that ran across a write is held too: it may have read an account before a change
        // whose fence did not count this device among the readers yet.
        if !isRead || before == nil || freshness.stamp() != before { await leases.fence(accounts) }
        return try result.get()
    }
}
