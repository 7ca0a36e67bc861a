import Dispatch
import FoundationEssentials
import Glibc
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
/// Device binding: with a `DeviceKeyHolder`, every new connection proves each of the
/// holder's keys (`Authority/BeginDeviceProof`, then `Authority/ProveDevice` per key, signed on
/// `connectQueue`, never on the concurrency pool: a TPM signature blocks) before its
/// first call that carries a token; calls on that connection then need no signature. A key added
/// later (a key move) is proven on the open connection before the next such call. The
/// `AuthorityCaller` of a call is not sent: what counts is what the connection proved.
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
    /// The device's read lease, kept by the `RevocationFeed` given it (the daemon's): until a feed
    /// keeps it on a link to an authority that grants leases, nothing read is given again.
    public let readLease = ReadLease()

    /// Reads are given again while the read lease holds (`ReadLease`).
    public var readFreshness: (any ReadFreshness)? { readLease }

    /// The keys proven on one connection, and the proof in flight.
    struct ConnectionProof {
        let connection: ClientConnection
        var proven: [DevicePublicKey] = []
        var inFlight: Task<Void, any Error>?
    }

    struct State {
        var connection: ClientConnection?
        var isClosed = false
        var proof: ConnectionProof?
        /// The last connection an answer came back on: a plain connection lost before any answer
        /// is what a TLS authority does to a client that does not speak TLS.
        var answered: ObjectIdentifier?
        /// +1 per answer: a call whose deadline passed with no answer on its connection since it
        /// began found the connection hung, and replaces it.
        var answerCount: UInt64 = 0
        /// The link as calls found it.
        var link: AuthorityLinkTracker
        /// Who hears of link changes.
        var linkObservers: [@Sendable (AuthorityLinkState) -> Void] = []
        /// Who hears whether the device's keys could sign a proof (nil: they did; else their error).
        var keyObservers: [@Sendable (RainError?) -> Void] = []
        /// The probe that brings the link back to `connected` once the authority answers again.
        var probe: (timer: (any RainTimer)?, interval: Duration)?
    }

    let state: Mutex<State>
    /// The first wait of the probe that finds the authority back, doubled up to `maximumProbeInterval`.
    let linkProbeInterval: Duration
    let clock: any RainClock
    let logger: Logger
    /// The device whose keys each connection proves; nil proves nothing (calls with a token are
    /// then refused by the authority with RAIN_501 `device_proof_required`).
    let device: (any DeviceKeyHolder)?
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

    // MARK: - Connection and device proof

    /// The open connection (or a new one) once every key of the holder is proven on it. Concurrent
    /// callers share one proof in flight; a failed proof is tried again by the next call.
    /// - Throws: RAIN_501 `device_proof_failed` when a key cannot sign or the authority refuses a
    ///   signature; the connection's errors.
    func provenConnection() async throws(RainError) -> ClientConnection {
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
        let signatures: [[UInt8]]
        do throws(RainError) {
            signatures = try await connectQueue.runBlocking { () throws(RainError) -> [[UInt8]] in
                var out: [[UInt8]] = []
                for signer in signers {
                    do throws(RainError) {
                        out.append(try signer.sign(message))
                    } catch {
                        // A TPM or keyring that cannot sign now: RAIN_501, never an end of the
                        // session, and the device's failure, never the authority's.
                        throw DeviceBinding.localKeyFailure(error)
                    }
                }
                return out
            }
        } catch {
            tellKeyObservers(error)
            throw error
        }
        tellKeyObservers(nil)
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
            ["address": address.description, "keys": String(signers.count), "proofMs": CFormat.string("%.2f", milliseconds)])
    }

    /// The open connection, or a new one.
    func openConnection() async throws(RainError) -> ClientConnection {
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
                    "connectMs": CFormat.string("%.2f", connectMilliseconds),
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
    private func tlsFailure(_ error: RainError) -> RainError { Self.tlsFailure(error, address: address) }

    /// RAIN_501 for a failed TLS handshake with the authority at `address`: the cause, and what to
    /// do about it (the revocation stream's connection says the same as the calls').
    static func tlsFailure(_ error: RainError, address: TCPAddress) -> RainError {
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

    func unreachable(_ cause: String) -> RainError {
        RainError(
            .network, "the authority at \(address) could not be reached: \(cause)",
            details: .init(reason: RemoteAuthorityFailure.unreachable.rawValue))
    }

    private func closedError() -> RainError {
        RainError(
            .network, "the authority at \(address) could not be reached: its client was closed",
            details: .init(reason: RemoteAuthorityFailure.unreachable.rawValue))
    }

    func incompleteAnswer(_ method: String) -> RainError {
        RainError(.provider, "the authority at \(address) sent an incomplete answer to \(Self.name(method))")
    }

    /// `SendLoginCode` for `/rain.wallet.v1.Authority/SendLoginCode`, for messages.
    static func name(_ method: String) -> String {
        method.split(separator: "/").last.map(String.init) ?? method
    }
}
