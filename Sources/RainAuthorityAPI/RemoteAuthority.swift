import Dispatch
import Foundation
import RainCore
import RainCrypto
import RainTransport
import RainWire
import Synchronization

/// An `Authority` in another process: `rainwalletd authority --listen HOST:PORT`, reached over one
/// framed TCP connection (`AuthorityService` on the other end): plain TCP to a loopback address, or
/// TLS 1.3 to any address when a client `TLSContext` is given.
///
/// The connection is opened on the first call and reopened lazily by the first call after it
/// dropped, so a restarted authority is picked up without restarting the device. Calls are
/// multiplexed on the one connection. Failures:
/// - the connection cannot be made, or is lost while a call is in flight: RAIN_301 (`the
///   authority at HOST:PORT could not be reached`, reason `authority_unreachable`); transient,
///   and nothing is retried here (the device decides what may be retried);
/// - no answer within the call's bound (`AuthorityDeadlines`, per kind of call; README "Bounded
///   waits"): RAIN_301 with reason `deadline_exceeded` for a read or a refresh, RAIN_501 with reason
///   `outcome_unknown` for a send whose request left (a send is never retried: whether it took
///   effect is not known). The connection, if nothing answered on it meanwhile, is hung: it is
///   closed and the next call opens a fresh one;
/// - a send whose connection is lost after its request left: RAIN_501 `outcome_unknown` too;
/// - an answer that does not decode: RAIN_501;
/// - the TLS handshake fails (the certificate is not signed by a trusted CA, does not name the
///   host, has expired; the authority does not speak TLS 1.3): RAIN_501 with the
///   `TLSSession.FailureReason` as reason and a message naming the cause and the fix. Not RAIN_301:
///   retrying cannot fix it, someone must fix a certificate or the device's `--authority-ca`. Not
///   RAIN_102 either: the device treats RAIN_102 from a refresh as definitive and would end its
///   sessions over an operator's expired certificate (or an attacker's forged one);
/// - anything the authority raised passes through with its code, message and details (RAIN_203
///   with `attemptsRemaining`, RAIN_201 with its reason, RAIN_302 with `retryAfterMilliseconds`, …).
///
/// Codes and tokens travel only in payloads; no message or log line here contains one.
///
/// Device binding (issue 14): with a `DeviceKeyHolder`, every new connection proves each of the
/// holder's keys (`Authority/BeginDeviceProof`, then `Authority/ProveDevice` per key, signed on
/// `connectQueue`, never on the concurrency pool: a TPM signs in tens of milliseconds) before its
/// first call that carries a token; calls on that connection then need no signature. A key added
/// later (a key move) is proven on the open connection before the next such call. The `proof`
/// arguments of the `Authority` methods are not sent: what counts is what the connection proved.
/// A proof the device cannot make (TPM, keyring) is RAIN_501 `device_proof_failed`, never an end
/// of the session.
///
/// Using it in the device daemon (`--authority HOST:PORT`):
/// ```swift
/// let authority = try RemoteAuthority(address: flag, clock: clock, logger: logger.child("authority"))
/// // DeviceContext(authority: authority, …); no connection is made until the first call.
/// ```
public final class RemoteAuthority: Authority {
    /// Where the authority listens.
    public let address: TCPAddress
    /// The client TLS context (trusted CAs), or nil for plain TCP to a loopback address.
    public let tls: TLSContext?
    /// How long a connection attempt may take.
    public let connectTimeout: Duration
    /// How long each kind of call may wait (README "Bounded waits"): a read 5 s with the device's
    /// retries, a send 10 s, a refresh attempt 5 s.
    public let deadlines: AuthorityDeadlines?

    /// The keys proven on one connection, and the proof in flight.
    private struct ConnectionProof {
        let connection: ClientConnection
        var proven: [DevicePublicKey] = []
        var inFlight: Task<Void, any Error>?
    }

    private struct State {
        var connection: ClientConnection?
        var isClosed = false
        var proof: ConnectionProof?
        /// The last connection an answer came back on: a plain connection lost before any answer
        /// is what a TLS authority does to a client that does not speak TLS.
        var answered: ObjectIdentifier?
        /// +1 per answer: a call whose deadline passed with no answer on its connection since it
        /// began found the connection hung, and replaces it.
        var answerCount: UInt64 = 0
        /// The link as calls found it (issue 20).
        var link: AuthorityLinkTracker
        /// Who hears of link changes.
        var linkObservers: [@Sendable (AuthorityLinkState) -> Void] = []
        /// The probe that brings the link back to `connected` once the authority answers again.
        var probe: (timer: (any RainTimer)?, interval: Duration)?
    }

    private let state: Mutex<State>
    /// The first wait of the probe that finds the authority back, doubled up to `maximumProbeInterval`.
    private let linkProbeInterval: Duration
    private let clock: any RainClock
    private let logger: Logger
    /// The device whose keys each connection proves; nil proves nothing (calls with a token are
    /// then refused by the authority with RAIN_501 `device_proof_required`).
    private let device: (any DeviceKeyHolder)?
    /// Connecting blocks (up to `connectTimeout`): it runs here, never on the concurrency pool, and
    /// one at a time, so callers racing after a drop share one new connection.
    private let connectQueue = DispatchQueue(label: "rainwallet.remote-authority.connect")

    /// A client for the authority at `address` (`HOST:PORT`). Does not connect yet.
    /// - Parameters:
    ///   - address: `127.0.0.1:7000`, `[::1]:7000` or `localhost:7000`; with `tls`, also any
    ///     address or host name (`authority.example.com:7420`), which the certificate must name.
    ///   - tls: a client `TLSContext` (`TLSContext.client(trustedCertificatesFile:)`) to speak TLS
    ///     1.3; nil for plain TCP.
    ///   - connectTimeout: how long a connection attempt, TLS handshake included, may take (5 s by
    ///     default).
    ///   - deadlines: how long each kind of call may wait (`AuthorityDeadlines.standard` by default),
    ///     on `clock`.
    ///   - linkProbeInterval: while the link is not connected, the first wait before asking the
    ///     authority again (`GetInfo`), doubled up to 30 s.
    ///   - clock: times call deadlines.
    ///   - logger: connection changes only.
    /// - Throws: RAIN_102 (field `authority`) for a malformed address, port 0, or, without `tls`, a
    ///   non-loopback address (reason `non_loopback`: it needs TLS).
    ///   - device: the device whose keys every connection proves before its first call with a token.
    public convenience init(
        address: String, tls: TLSContext? = nil, device: (any DeviceKeyHolder)? = nil,
        connectTimeout: Duration = .seconds(5), deadlines: AuthorityDeadlines = .standard,
        linkProbeInterval: Duration = .seconds(1), clock: any RainClock = SystemClock(), logger: Logger
    ) throws(RainError) {
        try self.init(
            address: TCPAddress(parsing: address, field: "authority", allowsNonLoopback: tls != nil), tls: tls,
            device: device, connectTimeout: connectTimeout, deadlines: deadlines, linkProbeInterval: linkProbeInterval,
            clock: clock, logger: logger)
    }

    /// A client for the authority at `address`. Does not connect yet.
    /// - Throws: RAIN_102 (field `authority`) for port 0, or for a non-loopback address without
    ///   `tls` (reason `non_loopback`).
    public init(
        address: TCPAddress, tls: TLSContext? = nil, device: (any DeviceKeyHolder)? = nil,
        connectTimeout: Duration = .seconds(5), deadlines: AuthorityDeadlines = .standard,
        linkProbeInterval: Duration = .seconds(1), clock: any RainClock = SystemClock(), logger: Logger
    ) throws(RainError) {
        guard address.port != 0 else {
            throw RainError.invalid(
                "the authority address \(address) has port 0; give the port it listens on", field: "authority")
        }
        guard address.isLoopback || tls != nil else {
            throw RainError.invalid(
                "the authority address \(address) is not a loopback address: connecting to it needs TLS; "
                    + "give the device --authority-ca with the CA that issued the authority's certificate",
                field: "authority", reason: TCPAddress.nonLoopbackReason)
        }
        guard tls == nil || tls?.role == .client else {
            throw RainError.invalid("the authority's TLS context must be a client context", field: "authority")
        }
        self.address = address
        self.tls = tls
        self.device = device
        self.connectTimeout = connectTimeout
        self.deadlines = deadlines
        self.linkProbeInterval = linkProbeInterval
        self.state = Mutex(State(link: AuthorityLinkTracker(now: clock.now)))
        self.clock = clock
        self.logger = logger
    }

    deinit {
        // The connection's reader thread holds it until the socket shuts down.
        let (connection, probe) = state.withLock { ($0.connection, $0.probe?.timer) }
        probe?.cancel()
        connection?.close()
    }

    /// Closes the connection for good: calls in flight and later calls fail with RAIN_301.
    public func close() {
        let (connection, probe) = state.withLock { s -> (ClientConnection?, (any RainTimer)?) in
            s.isClosed = true
            defer {
                s.connection = nil
                s.probe = nil
            }
            return (s.connection, s.probe?.timer)
        }
        probe?.cancel()
        connection?.close()
    }

    /// What the authority is: its version, protocol version, capabilities and frame limit.
    /// - Throws: RAIN_301 when it cannot be reached.
    public func getInfo() async throws(RainError) -> GetInfoResponse {
        try await call(AuthorityMethod.getInfo, GetInfoRequest(), as: GetInfoResponse.self, kind: .read)
    }

    // MARK: - Authority

    // Each call sends the authority's own value type and decodes the answer into one (RainWire's
    // authority messages); an answer missing what the type needs is refused as incomplete.

    /// Sends a login code (see `Authority.sendLoginCode`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func sendLoginCode(_ request: SendCodeRequest) async throws(RainError) -> SendCodeResult {
        try await call(AuthorityMethod.sendLoginCode, request, as: SendCodeResult.self, kind: .send)
    }

    /// Confirms a code (see `Authority.confirmLoginCode`).
    /// - Throws: the authority's errors (RAIN_203 with its details, …); RAIN_301 when it cannot be
    ///   reached.
    public func confirmLoginCode(_ request: ConfirmCodeRequest) async throws(RainError) -> LoginResult {
        try await call(AuthorityMethod.confirmLoginCode, request, as: LoginResult.self, kind: .send)
    }

    /// Rotates a session's tokens (see `Authority.refreshSession`).
    /// - Throws: the authority's errors (RAIN_201 with its reason, …); RAIN_301 when it cannot be
    ///   reached or does not answer in time (safe to retry within the refresh grace window).
    public func refreshSession(_ request: RefreshRequest, proof: DeviceProof) async throws(RainError) -> SessionTokens {
        try await call(
            AuthorityMethod.refreshSession, request, as: AuthorityRefreshSessionResponse.self, kind: .refresh, isProven: true
        ).tokens
    }

    /// The account behind an access token (see `Authority.accountInfo`).
    /// - Throws: the authority's errors (RAIN_201 with its reason, …); RAIN_301 when it cannot be
    ///   reached.
    public func accountInfo(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError)
        -> AccountInfo
    {
        try await call(
            AuthorityMethod.accountInfo, AuthorityAccountInfoRequest(appID: appID, accessToken: accessToken),
            as: AccountInfo.self, kind: .read, isProven: true)
    }

    /// Sends a contact verification code (see `Authority.sendContactVerificationCode`). Never
    /// retried here.
    /// - Throws: the authority's errors (RAIN_201, RAIN_302 `contact_owned_by_another_account`, …);
    ///   RAIN_301 when it cannot be reached.
    public func sendContactVerificationCode(
        appID: String, deviceID: String, accessToken: String, contact: RainWalletContact, proof: DeviceProof
    ) async throws(RainError) -> SendCodeResult {
        try await call(
            AuthorityMethod.sendContactVerificationCode,
            AuthoritySendContactVerificationRequest(
                appID: appID, deviceID: deviceID, accessToken: accessToken, contact: contact),
            as: SendCodeResult.self, kind: .send, isProven: true)
    }

    /// Confirms a contact verification (see `Authority.confirmContactVerification`).
    /// - Throws: the authority's errors (RAIN_203 with its details, RAIN_302, …); RAIN_301 when it
    ///   cannot be reached.
    public func confirmContactVerification(
        appID: String, deviceID: String, accessToken: String, challengeID: String, code: String, proof: DeviceProof,
        idempotencyKey: [UInt8] = []
    ) async throws(RainError) -> AccountInfo {
        try await call(
            AuthorityMethod.confirmContactVerification,
            AuthorityConfirmContactVerificationRequest(
                appID: appID, deviceID: deviceID, accessToken: accessToken, challengeID: challengeID, code: code,
                idempotencyKey: idempotencyKey),
            as: AccountInfo.self, kind: .send, isProven: true)
    }

    /// The wallet behind an access token (see `Authority.wallet`).
    /// - Throws: the authority's errors (RAIN_201 with its reason, RAIN_404 without a wallet, …);
    ///   RAIN_301 when it cannot be reached.
    public func wallet(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError) -> WalletInfo {
        try await call(
            AuthorityMethod.getWallet, AuthorityWalletRequest(appID: appID, accessToken: accessToken),
            as: WalletInfo.self, kind: .read, isProven: true)
    }

    /// The wallet's secrets (see `Authority.exportWallet`). Never logged.
    /// - Throws: the authority's errors (RAIN_201 with its reason, RAIN_404 without a wallet, …);
    ///   RAIN_301 when it cannot be reached.
    public func exportWallet(appID: String, accessToken: String, proof: DeviceProof) async throws(RainError)
        -> WalletSecrets
    {
        try await call(
            AuthorityMethod.exportWallet, AuthorityWalletRequest(appID: appID, accessToken: accessToken),
            as: WalletSecrets.self, kind: .read, isProven: true)
    }

    /// Revokes a session (see `Authority.revokeSession`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func revokeSession(appID: String, refreshToken: String, proof: DeviceProof) async throws(RainError) {
        _ = try await call(
            AuthorityMethod.revokeSession, AuthorityRevokeSessionRequest(appID: appID, refreshToken: refreshToken),
            as: AuthorityRevokeSessionResponse.self, kind: .send, isProven: true)
    }

    /// Step 1 of a device key move (see `Authority.rebindDevice`): the connection proves the
    /// holder's keys (the current one and `newKey`) first.
    /// - Throws: the authority's errors (RAIN_501 `device_proof_required` when the holder lacks a
    ///   key); RAIN_301 when it cannot be reached.
    public func rebindDevice(deviceID: String, newKey: DevicePublicKey, proof: DeviceProof) async throws(RainError) {
        _ = try await call(
            AuthorityMethod.rebindDevice, AuthorityRebindDeviceRequest(deviceID: deviceID, newPublicKey: newKey.wireBytes),
            as: AuthorityRebindDeviceResponse.self, kind: .send, isProven: true)
    }

    /// Step 2 (see `Authority.confirmDeviceKey`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func confirmDeviceKey(deviceID: String, key: DevicePublicKey, proof: DeviceProof) async throws(RainError) {
        _ = try await call(
            AuthorityMethod.confirmDeviceKey,
            AuthorityConfirmDeviceKeyRequest(deviceID: deviceID, devicePublicKey: key.wireBytes),
            as: AuthorityConfirmDeviceKeyResponse.self, kind: .send, isProven: true)
    }

    /// The development outbox (see `Authority.listOutbox`).
    /// - Throws: RAIN_202 unless the authority runs with `--dev-outbox`; RAIN_301 when it cannot be
    ///   reached.
    public func listOutbox() async throws(RainError) -> [OutboxDelivery] {
        try await call(AuthorityMethod.listOutbox, ListOutboxRequest(), as: ListOutboxResponse.self, kind: .read).deliveries
    }

    // MARK: - Passkeys

    /// Starts a registration (see `Authority.beginPasskeyRegistration`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func beginPasskeyRegistration(_ request: PasskeyBeginRequest, proof: DeviceProof) async throws(RainError)
        -> PasskeyCeremony
    {
        try await call(
            AuthorityMethod.beginPasskeyRegistration, request, as: PasskeyCeremony.self, kind: .send,
            isProven: request.accessToken != nil)
    }

    /// Finishes a registration (see `Authority.finishPasskeyRegistration`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func finishPasskeyRegistration(_ request: PasskeyFinishRequest) async throws(RainError) -> LoginResult? {
        try await call(AuthorityMethod.finishPasskeyRegistration, request, as: PasskeyFinishResult.self, kind: .send).login
    }

    /// Starts a login (see `Authority.beginPasskeyAuthentication`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func beginPasskeyAuthentication(_ request: PasskeyBeginRequest) async throws(RainError) -> PasskeyCeremony {
        try await call(AuthorityMethod.beginPasskeyAuthentication, request, as: PasskeyCeremony.self, kind: .send)
    }

    /// Finishes a login (see `Authority.finishPasskeyAuthentication`).
    /// - Throws: the authority's errors; RAIN_301 when it cannot be reached.
    public func finishPasskeyAuthentication(_ request: PasskeyFinishRequest) async throws(RainError) -> LoginResult {
        let method = AuthorityMethod.finishPasskeyAuthentication
        guard let login = try await call(method, request, as: PasskeyFinishResult.self, kind: .send).login else {
            throw incompleteAnswer(method)
        }
        return login
    }

    /// Cancels a ceremony (see `Authority.cancelPasskeyCeremony`).
    /// - Throws: RAIN_301 when the authority cannot be reached.
    public func cancelPasskeyCeremony(appID: String, deviceID: String, ceremonyID: String) async throws(RainError) {
        _ = try await call(
            AuthorityMethod.cancelPasskeyCeremony,
            AuthorityPasskeyCancelRequest(appID: appID, deviceID: deviceID, ceremonyID: ceremonyID),
            as: AuthorityPasskeyCancelResponse.self, kind: .send)
    }

    // MARK: - Calls

    /// What one call has done so far, for its deadline: the connection it used, whether its request
    /// left, and how many answers the client had seen when it began.
    private struct CallProgress {
        var connection: ClientConnection?
        var isSent = false
        var answersAtStart: UInt64 = 0
    }

    /// One call of `kind`: encode, send on the (re)opened connection (with `isProven`, one on which
    /// the device proved its keys), await the answer, decode, and refuse an answer that lacks what
    /// its type needs (RAIN_501). The whole call (connecting and proving included) is bounded by the
    /// kind's deadline and by the operation's (`AuthorityDeadlines.operationDeadline`), on `clock`.
    /// Past it: a send whose request left is RAIN_501 `outcome_unknown`, anything else RAIN_301
    /// `deadline_exceeded`; a connection on which nothing answered during the call is hung and is
    /// closed (the next call opens a fresh one).
    private func call<Response: AuthorityAnswer>(
        _ method: String, _ request: some WireMessage, as: Response.Type, kind: AuthorityCallKind,
        isProven: Bool = false
    ) async throws(RainError) -> Response {
        let payload = try request.encode()
        let bound = bound(of: kind)
        let progress = Mutex(CallProgress(answersAtStart: state.withLock { $0.answerCount }))
        let result: Result<Response, CallFailure>
        if bound <= .zero {
            result = .failure(.deadline)
        } else {
            result = await withDeadline(bound) { [self] () async throws(RainError) -> Response in
                let connection = isProven ? try await provenConnection() : try await openConnection()
                progress.withLock { $0.connection = connection }
                return try await exchange(method, payload, on: connection, as: Response.self) {
                    progress.withLock { $0.isSent = true }
                }
            }
        }
        switch result {
        case .success(let response):
            return response
        case .failure(let failure):
            let progress = progress.withLock { $0 }
            let error: RainError
            switch failure {
            case .deadline:
                replaceIfHung(progress, method: method)
                error = deadlineError(method, kind: kind, isSent: progress.isSent, bound: bound)
            case .error(let e) where kind == .send && progress.isSent && Self.isUnanswered(e):
                error = outcomeUnknown(method, cause: e.message)
            case .error(let e):
                error = e
            }
            if Self.isUnanswered(error) {
                linkFailed(error, couldNotConnect: progress.connection == nil && failure.isError)
            }
            throw error
        }
    }

    /// The bound of a call of `kind` now: its own, cut to what is left of the operation's deadline.
    private func bound(of kind: AuthorityCallKind) -> Duration {
        let own = deadlines?.bound(kind) ?? AuthorityDeadlines.standard.bound(kind)
        guard let end = AuthorityDeadlines.operationDeadline else { return own }
        let left = Duration.milliseconds(end.unixMilliseconds - clock.now.unixMilliseconds)
        return min(own, left)
    }

    /// Whether `error` says no answer came (the authority unreachable, a deadline, an unknown
    /// outcome), as opposed to an answer that refused.
    private static func isUnanswered(_ error: RainError) -> Bool {
        switch error.details.reason {
        case RemoteAuthorityFailure.unreachable.rawValue, RemoteAuthorityFailure.deadlineExceeded.rawValue,
            AuthorityOutcome.unknownReason:
            return true
        default:
            return false
        }
    }

    /// Closes the call's connection when nothing answered on it since the call began: the
    /// authority accepts but does not answer (stopped, hung), and a fresh connection is the only
    /// way to find out when it is back.
    private func replaceIfHung(_ progress: CallProgress, method: String) {
        guard let connection = progress.connection else { return }
        let isHung = state.withLock { s in
            let isHung = s.answered != ObjectIdentifier(connection) || s.answerCount == progress.answersAtStart
            // Forgotten at once: the reader may take a moment to see the shutdown, and the next
            // call must not pick this connection meanwhile.
            if isHung, s.connection === connection { s.connection = nil }
            return isHung
        }
        guard isHung, !connection.isClosed else { return }
        connection.close()
        logger.warning(
            "authority.connection_replaced", ["address": address.description, "method": Self.name(method)])
    }

    /// Past the deadline: RAIN_501 `outcome_unknown` for a send that left, else RAIN_301.
    private func deadlineError(_ method: String, kind: AuthorityCallKind, isSent: Bool, bound: Duration) -> RainError {
        let limit = max(0, bound.milliseconds)
        if kind == .send && isSent {
            return outcomeUnknown(method, cause: "no answer within \(limit) ms")
        }
        return RainError(
            .network,
            "the authority at \(address) did not answer \(Self.name(method)) within \(limit) ms; try again",
            details: .init(reason: RemoteAuthorityFailure.deadlineExceeded.rawValue))
    }

    /// RAIN_501 `outcome_unknown`: the request left and no answer came, so whether it took effect
    /// is not known. Never a guess either way.
    private func outcomeUnknown(_ method: String, cause: String) -> RainError {
        RainError(
            .provider,
            "the authority at \(address) received \(Self.name(method)) but sent no answer (\(cause)): whether it "
                + "took effect is unknown; check the outcome (rainwallet status) before repeating it",
            details: .init(reason: AuthorityOutcome.unknownReason))
    }

    /// Sends one request on `connection` and decodes its answer (see `call`); `sent` runs just
    /// before the request is handed to the connection.
    private func exchange<Response: AuthorityAnswer>(
        _ method: String, _ payload: [UInt8], on connection: ClientConnection, as: Response.Type,
        sent: () -> Void = {}
    ) async throws(RainError) -> Response {
        let bytes: [UInt8]
        do {
            sent()
            bytes = try await connection.call(method: method, payload: payload)
        } catch {
            guard error.isConnectionFailure else {
                // The authority answered (with a refusal): the link is up. Not so for the answer
                // to the cancel a deadline sent: that call got no answer in time.
                if !Task.isCancelled { answered(on: connection) }
                throw error
            }
            // Shut it down completely (the reader may not have seen the end yet); the next call
            // opens a new one.
            connection.close()
            logger.warning("authority.connection_lost", ["address": address.description, "method": Self.name(method)])
            let neverAnswered = state.withLock { $0.answered != ObjectIdentifier(connection) }
            // A TLS authority closes a plain connection without a word (no alert, no answer).
            let hint =
                tls == nil && neverAnswered
                ? "; if that authority uses TLS, start this device with its CA: rainwalletd --authority-ca FILE"
                : ""
            throw unreachable("the connection was lost during \(Self.name(method))\(hint)")
        }
        if !Task.isCancelled { answered(on: connection) }
        let response: Response
        do {
            response = try Response.decode(bytes)
        } catch {
            throw RainError(
                .provider, "the authority at \(address) sent an answer to \(Self.name(method)) that does not decode",
                underlying: SendableErrorDescription(error))
        }
        guard response.isComplete else { throw incompleteAnswer(method) }
        return response
    }

    /// Records an answer on `connection`: the link is connected.
    private func answered(on connection: ClientConnection) {
        let (changed, observers) = state.withLock { s in
            s.answered = ObjectIdentifier(connection)
            s.answerCount += 1
            let changed = s.link.answered(now: clock.now)
            if changed != nil, let timer = s.probe?.timer {
                timer.cancel()
                s.probe = nil
            }
            return (changed, s.linkObservers)
        }
        if let changed { announce(changed, to: observers) }
    }

    // MARK: - Link state

    /// The link as the last calls found it (see `AuthorityLinkState`).
    public var linkState: AuthorityLinkState? { state.withLock { $0.link.state } }

    /// Calls `observer` with each change of the link state, on the thread that saw it; it must not
    /// block.
    public func observeLink(_ observer: @escaping @Sendable (AuthorityLinkState) -> Void) {
        state.withLock { $0.linkObservers.append(observer) }
    }

    /// The longest wait between two probes.
    static let maximumProbeInterval: Duration = .seconds(30)

    /// Records a call without an answer, and starts the probe that will see the authority back.
    private func linkFailed(_ error: RainError, couldNotConnect: Bool) {
        let (changed, observers) = state.withLock { s in
            (s.link.failed(error.message, couldNotConnect: couldNotConnect, now: clock.now), s.linkObservers)
        }
        if let changed {
            logger.warning(
                "authority.link", ["address": address.description, "state": changed.phase.rawValue])
            announce(changed, to: observers)
        }
        scheduleProbe()
    }

    private func announce(_ link: AuthorityLinkState, to observers: [@Sendable (AuthorityLinkState) -> Void]) {
        if link.phase == .connected {
            logger.info("authority.link", ["address": address.description, "state": link.phase.rawValue])
        }
        for observer in observers { observer(link) }
    }

    /// While the link is not connected, asks the authority what it is (`GetInfo`, a read) after a
    /// growing wait, so the link comes back to `connected` without waiting for a user's call.
    private func scheduleProbe() {
        let interval = state.withLock { s -> Duration? in
            guard !s.isClosed, s.probe?.timer == nil, s.link.state.phase != .connected else { return nil }
            let interval = s.probe.map { min($0.interval * 2, Self.maximumProbeInterval) } ?? linkProbeInterval
            s.probe = (nil, interval)
            return interval
        }
        guard let interval else { return }
        let timer = clock.schedule(after: interval, on: .global()) { [weak self] in
            guard let self else { return }
            Task {
                self.state.withLock { s in s.probe?.timer = nil }
                _ = try? await self.getInfo()
            }
        }
        let isStale = state.withLock { s -> Bool in
            guard s.probe != nil, !s.isClosed else { return true }
            s.probe?.timer = timer
            return false
        }
        if isStale { timer.cancel() }
    }

    /// Runs `body`, but finishes with `.deadline` if it has not finished within `bound` on `clock`
    /// (the body is then cancelled: the server is told, the work there is not undone). Cancelling
    /// the caller cancels the body.
    private func withDeadline<Value: Sendable>(
        _ bound: Duration, _ body: @escaping @Sendable () async throws(RainError) -> Value
    ) async -> Result<Value, CallFailure> {
        let gate = CallGate<Value>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Value, CallFailure>, Never>) in
                gate.begin(continuation)
                let timer = clock.schedule(after: bound, on: .global()) { gate.finish(.failure(.deadline)) }
                let work = Task {
                    do throws(RainError) {
                        gate.finish(.success(try await body()))
                    } catch {
                        gate.finish(.failure(.error(error)))
                    }
                }
                gate.attach(work: work, timer: timer)
            }
        } onCancel: {
            gate.cancelWork()
        }
    }

    // MARK: - Device proof

    /// The open connection (or a new one) once every key of the holder is proven on it. Concurrent
    /// callers share one proof in flight; a failed proof is tried again by the next call.
    /// - Throws: RAIN_501 `device_proof_failed` when a key cannot sign or the authority refuses a
    ///   signature; the connection's errors.
    private func provenConnection() async throws(RainError) -> ClientConnection {
        guard let device else { return try await openConnection() }
        for _ in 0..<2 {
            let connection = try await openConnection()
            let wanted = device.signers
            enum Step {
                case ready
                case wait(Task<Void, any Error>)
                case reconnect
            }
            let step = state.withLock { s -> Step in
                if s.proof?.connection !== connection { s.proof = ConnectionProof(connection: connection) }
                guard var proof = s.proof else { return .reconnect }
                if let inFlight = proof.inFlight { return .wait(inFlight) }
                let missing = wanted.filter { signer in !proof.proven.contains(signer.publicKey) }
                if missing.isEmpty { return .ready }
                if proof.proven.count + missing.count > DeviceBinding.maximumKeysPerConnection { return .reconnect }
                let task = Task { [self] in
                    try await self.prove(missing, deviceID: device.deviceID, on: connection)
                }
                proof.inFlight = task
                s.proof = proof
                return .wait(task)
            }
            switch step {
            case .ready:
                return connection
            case .reconnect:
                // This connection cannot prove more keys: a fresh one proves the current set.
                connection.close()
                continue
            case .wait(let task):
                let result = await task.result
                state.withLock { s in
                    guard s.proof?.connection === connection, s.proof?.inFlight == task else { return }
                    s.proof?.inFlight = nil
                    if case .success = result {
                        for signer in wanted where s.proof?.proven.contains(signer.publicKey) == false {
                            s.proof?.proven.append(signer.publicKey)
                        }
                    }
                }
                if case .failure(let error) = result {
                    throw (error as? RainError) ?? DeviceBinding.proofFailed("\(error)")
                }
                // Loop once more: the holder's keys may have changed while this proof ran.
                if state.withLock({ s in wanted.allSatisfy { s.proof?.proven.contains($0.publicKey) == true } }),
                    device.signers.map(\.publicKey) == wanted.map(\.publicKey)
                {
                    return connection
                }
            }
        }
        throw DeviceBinding.proofFailed("the device's keys changed while it proved them; try again")
    }

    /// Proves `signers` on `connection`: asks for its challenge, signs (on `connectQueue`: a TPM
    /// blocks) and sends one `ProveDevice` per key.
    private func prove(_ signers: [any DeviceSigner], deviceID: String, on connection: ClientConnection)
        async throws(RainError)
    {
        let started = ContinuousClock.now
        let challenge = try await exchange(
            AuthorityMethod.beginDeviceProof, try AuthorityBeginDeviceProofRequest().encode(), on: connection,
            as: AuthorityBeginDeviceProofResponse.self
        ).challenge
        let message = DeviceBinding.signedMessage(
            deviceID: deviceID, challenge: challenge, channelBinding: connection.channelBinding ?? [])
        let signatures = try await connectQueue.runBlocking { () throws(RainError) -> [[UInt8]] in
            var out: [[UInt8]] = []
            for signer in signers {
                do throws(RainError) {
                    out.append(try signer.sign(message))
                } catch {
                    // A TPM or keyring that cannot sign now: RAIN_501, never an end of the session.
                    throw RainError(
                        .provider, "the device key could not sign its proof: \(error.message)",
                        details: .init(reason: error.details.reason ?? DeviceBinding.proofFailedReason),
                        underlying: error.underlying)
                }
            }
            return out
        }
        for (signer, signature) in zip(signers, signatures) {
            _ = try await exchange(
                AuthorityMethod.proveDevice,
                try AuthorityProveDeviceRequest(
                    deviceID: deviceID, devicePublicKey: signer.publicKey.wireBytes, signature: signature
                ).encode(), on: connection, as: AuthorityProveDeviceResponse.self)
        }
        let milliseconds = Double((ContinuousClock.now - started) / .microseconds(1)) / 1000
        logger.info(
            "authority.device_proven",
            ["address": address.description, "keys": String(signers.count), "proofMs": String(format: "%.2f", milliseconds)])
    }

    /// The open connection, or a new one.
    private func openConnection() async throws(RainError) -> ClientConnection {
        if let current = try currentConnection() { return current }
        return try await connectQueue.runBlocking { [self] () throws(RainError) -> ClientConnection in
            // Another caller may have reconnected while this one waited for the queue.
            if let current = try currentConnection() { return current }
            let fresh: ClientConnection
            let started = ContinuousClock.now
            do throws(RainError) {
                fresh = try ClientConnection(tcp: address, tls: tls, connectTimeout: connectTimeout)
            } catch {
                if let reason = error.details.reason, reason.hasPrefix("tls_") {
                    logger.warning("authority.tls_failed", ["address": address.description, "reason": reason])
                    throw tlsFailure(error)
                }
                logger.warning("authority.unreachable", ["address": address.description, "error": error.message])
                throw unreachable(error.message)
            }
            let connectMilliseconds = Double((ContinuousClock.now - started) / .microseconds(1)) / 1000
            let (old, closed) = state.withLock { s -> (ClientConnection?, Bool) in
                if s.isClosed { return (nil, true) }
                defer { s.connection = fresh }
                return (s.connection, false)
            }
            if closed {
                fresh.close()
                throw closedError()
            }
            old?.close()
            logger.info(
                "authority.connected",
                [
                    "address": address.description, "reconnect": String(old != nil), "tls": String(tls != nil),
                    "connectMs": String(format: "%.2f", connectMilliseconds),
                ])
            return fresh
        }
    }

    /// The connection when it is open; nil when there is none or it dropped.
    private func currentConnection() throws(RainError) -> ClientConnection? {
        let (connection, closed) = state.withLock { ($0.connection, $0.isClosed) }
        if closed { throw closedError() }
        guard let connection, !connection.isClosed else { return nil }
        return connection
    }

    /// RAIN_501 for a failed TLS handshake: the cause, and what to do about it.
    private func tlsFailure(_ error: RainError) -> RainError {
        let fix: String
        switch error.details.reason {
        case TLSSession.FailureReason.unknownCA:
            fix = "give the device --authority-ca with the CA certificate that issued the authority's certificate"
        case TLSSession.FailureReason.hostMismatch:
            fix =
                "the certificate does not name \(address.host): connect by a name or IP address listed in its "
                + "subjectAltName, or issue the authority a certificate for \(address.host)"
        case TLSSession.FailureReason.certificateExpired:
            fix = "renew the authority's certificate (--tls-cert) and restart it"
        case TLSSession.FailureReason.certificateNotYetValid:
            fix = "check the clocks of this machine and of the CA that issued the certificate"
        case TLSSession.FailureReason.protocolVersion:
            fix = "the authority must speak TLS 1.3; upgrade it"
        case TLSSession.FailureReason.notTLS:
            fix = "the authority does not speak TLS at this address: start it with --tls-cert and --tls-key"
        default:
            fix = "check the authority's certificate and the device's --authority-ca"
        }
        return RainError(
            .provider, "\(error.message); \(fix)",
            details: error.details, underlying: error.underlying)
    }

    private func unreachable(_ cause: String) -> RainError {
        RainError(
            .network, "the authority at \(address) could not be reached: \(cause)",
            details: .init(reason: RemoteAuthorityFailure.unreachable.rawValue))
    }

    private func closedError() -> RainError {
        RainError(
            .network, "the authority at \(address) could not be reached: its client was closed",
            details: .init(reason: RemoteAuthorityFailure.unreachable.rawValue))
    }

    private func incompleteAnswer(_ method: String) -> RainError {
        RainError(.provider, "the authority at \(address) sent an incomplete answer to \(Self.name(method))")
    }

    /// `SendLoginCode` for `/rain.wallet.v1.Authority/SendLoginCode`, for messages.
    private static func name(_ method: String) -> String {
        method.split(separator: "/").last.map(String.init) ?? method
    }
}

/// How a bounded call failed: its own error, or its deadline.
private enum CallFailure: Error {
    case error(RainError)
    case deadline

    var isError: Bool {
        if case .error = self { return true }
        return false
    }
}

/// Resumes one call's continuation exactly once, with the first of: the answer, the deadline.
/// Whichever comes first stops the other (cancels the timer or the work).
private final class CallGate<Value: Sendable>: Sendable {
    typealias Continuation = CheckedContinuation<Result<Value, CallFailure>, Never>

    private struct State {
        var continuation: Continuation?
        var work: Task<Void, Never>?
        var timer: (any RainTimer)?
        var isFinished = false
        var isCancelled = false
    }

    private let state = Mutex(State())

    func begin(_ continuation: Continuation) {
        state.withLock { $0.continuation = continuation }
    }

    /// Keeps the work and the timer so the loser can be stopped; stops them at once if the race is
    /// already over or the caller was cancelled.
    func attach(work: Task<Void, Never>, timer: any RainTimer) {
        let (finished, cancelled) = state.withLock { s -> (Bool, Bool) in
            s.work = work
            s.timer = timer
            return (s.isFinished, s.isCancelled)
        }
        if finished {
            timer.cancel()
            work.cancel()
        } else if cancelled {
            work.cancel()
        }
    }

    func finish(_ result: Result<Value, CallFailure>) {
        let taken = state.withLock { s -> (Continuation, Task<Void, Never>?, (any RainTimer)?)? in
            guard !s.isFinished, let c = s.continuation else { return nil }
            s.isFinished = true
            s.continuation = nil
            return (c, s.work, s.timer)
        }
        guard let (continuation, work, timer) = taken else { return }
        timer?.cancel()
        // When the deadline won, stop the call (the server is sent a cancel); when the answer won,
        // the task is finishing anyway.
        work?.cancel()
        continuation.resume(returning: result)
    }

    func cancelWork() {
        let work = state.withLock { s -> Task<Void, Never>? in
            s.isCancelled = true
            return s.work
        }
        work?.cancel()
    }
}

/// An answer `RemoteAuthority` accepts: it decodes, and `isComplete` says whether it carries what
/// the caller needs (an id, tokens, …); an incomplete one is refused with RAIN_501.
protocol AuthorityAnswer: WireMessage {
    /// Whether the answer carries every field the caller relies on.
    var isComplete: Bool { get }
}

extension AuthorityAnswer {
    /// Complete unless the type says otherwise.
    var isComplete: Bool { true }
}

extension GetInfoResponse: AuthorityAnswer {}
extension AuthorityBeginDeviceProofResponse: AuthorityAnswer {
    var isComplete: Bool { challenge.count == DeviceBinding.challengeByteCount }
}
extension AuthorityProveDeviceResponse: AuthorityAnswer {}
extension AuthorityRebindDeviceResponse: AuthorityAnswer {}
extension AuthorityConfirmDeviceKeyResponse: AuthorityAnswer {}
extension AuthorityRevokeSessionResponse: AuthorityAnswer {}
extension AuthorityPasskeyCancelResponse: AuthorityAnswer {}
extension ListOutboxResponse: AuthorityAnswer {}

extension SendCodeResult: AuthorityAnswer {
    var isComplete: Bool { !challengeID.isEmpty }
}

extension LoginResult: AuthorityAnswer {
    var isComplete: Bool { !accountID.isEmpty && !walletID.isEmpty && tokens.isComplete }
}

extension AuthorityRefreshSessionResponse: AuthorityAnswer {
    var isComplete: Bool { tokens.isComplete }
}

extension AccountInfo: AuthorityAnswer {
    var isComplete: Bool { !accountID.isEmpty }
}

extension WalletInfo: AuthorityAnswer {
    var isComplete: Bool { !walletID.isEmpty && !ethereumAddress.isEmpty && !solanaAddress.isEmpty }
}

extension WalletSecrets: AuthorityAnswer {
    var isComplete: Bool { !mnemonic.isEmpty && !ethereumPrivateKeyHex.isEmpty && !solanaKeypairBase58.isEmpty }
}

extension PasskeyCeremony: AuthorityAnswer {
    var isComplete: Bool { !ceremonyID.isEmpty && !optionsJSON.isEmpty }
}

extension PasskeyFinishResult: AuthorityAnswer {
    /// No login (a passkey added) is complete; a login must be.
    var isComplete: Bool { login?.isComplete ?? true }
}
