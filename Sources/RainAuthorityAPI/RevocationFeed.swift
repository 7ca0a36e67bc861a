import Dispatch
import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainTransport
import RainWire
import Synchronization

/// The device's end of `Authority/WatchRevocations`: a connection of its own to the
/// remote authority (apart from `RemoteAuthority`'s, so a stream never waits behind a call or a
/// call behind a stream), on which the device proves its keys and keeps the stream open.
///
/// - Each push is handed to `onEvent` as `.revoked`; the device then asks the authority whether
///   its sessions for that app are still live (a push alone never ends a session).
/// - Each time the stream is (re)established, `onEvent` gets `.connected` once: the device asks
///   then whether its sessions are still live, so a revocation pushed while it was cut off (the
///   authority down, a partition) is caught at the reconnect.
/// - A silent stream is a dead one: the authority sends a heartbeat when the stream opens and then
///   every interval H it announces in it (15 s by default); once a heartbeat announced H, a stream
///   that brings no message for 2.5·H (`idleBound(heartbeatInterval:)`; H counted as at least
///   50 ms) is dropped like a lost connection, so a link that died silently (a partition, a hung
///   authority, a NAT that dropped its state) is reopened and checked instead of waited on
///   forever. Before the first heartbeat, an authority whose `GetInfo` lists
///   `AuthorityCapability.revocationHeartbeat` is given `connectTimeout` for it. An authority that
///   sends no heartbeat (older: it does not list the capability) is never timed out.
/// - A recheck (`AuthorityRevocation.isRecheck`: the authority may have missed revocations) is
///   handed to `onEvent` as `.recheck`: the device checks every session, as at a reconnect.
/// - A lost connection is opened again after a backoff: `initialDelay` doubling up to `maxDelay`,
///   each wait drawn between half and all of it (jitter, so devices cut off together do not come
///   back together), reset once a stream is up. Nothing spins while the authority is down: one
///   attempt per wait. Each connection is closed before the next one opens (its reader thread
///   ends, its descriptor is closed), so nothing accumulates across reconnects.
/// - `onEvent` runs on the feed's task: it must not block (the device starts a task per event).
/// - With a `ReadLease` and an authority that lists `AuthorityCapability.readLease`, the feed keeps
///   the lease on the stream's connection (`Authority/RenewLease`, asked for by reads), acts on
///   the stream's change notices (the lease drops what the device kept, then the feed
///   acknowledges at once: the authority holds the change until then), and ends the lease when
///   the link goes down. Change notices are not handed to `onEvent`.
///
/// ```swift
/// let feed = RevocationFeed(address: address, tls: tls, device: identity, logger: logger) { event in … }
/// feed.start()
/// // …
/// feed.stop()
/// ```
public final class RevocationFeed: Sendable {
    /// What the feed tells the device.
    public enum Event: Sendable, Equatable {
        /// The stream is (again) open: check every session once.
        case connected
        /// The authority pushed a revocation of this device's sessions for an app.
        case revoked(AuthorityRevocation)
        /// The authority may have missed revocations: check every session once.
        case recheck
        /// The stream closed, or could not be opened, at `stage` (`connect`, `open` or `stream`):
        /// until `connected`, revocations reach this device only at its next call.
        case lost(RainError, stage: String)
    }

    /// How long a stream may stay silent once the authority announced heartbeats every
    /// `heartbeatInterval`: 2.5 intervals (one lost heartbeat and scheduling noise are not a dead
    /// link), the interval counted as at least 50 ms so an authority cannot make the device spin.
    public static func idleBound(heartbeatInterval: Duration) -> Duration {
        max(heartbeatInterval, .milliseconds(50)) * 5 / 2
    }

    /// The reconnect backoff.
    public struct Backoff: Sendable, Equatable {
        /// The first wait after a failure.
        public var initialDelay: Duration
        /// The longest wait.
        public var maxDelay: Duration

        /// A backoff (200 ms doubling up to 10 s by default).
        public init(initialDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(10)) {
            self.initialDelay = initialDelay
            self.maxDelay = maxDelay
        }

        /// The wait before attempt `failures + 1`, without jitter: `initialDelay · 2^(failures−1)`,
        /// capped at `maxDelay`.
        public func delay(afterFailures failures: Int) -> Duration {
            var delay = initialDelay
            for _ in 1..<max(1, failures) {
                delay = min(delay * 2, maxDelay)
                if delay == maxDelay { break }
            }
            return min(delay, maxDelay)
        }

        /// `delay(afterFailures:)` with jitter: a uniform draw between half and all of it.
        public func jitteredDelay(afterFailures failures: Int) -> Duration {
            let full = delay(afterFailures: failures)
            let milliseconds = max(1, full.milliseconds)
            return .milliseconds(Int64.random(in: (milliseconds / 2)...milliseconds))
        }
    }

    private enum Phase {
        case idle
        case running(Task<Void, Never>)
        case stopped
    }

    private struct State {
        var phase = Phase.idle
        var connection: ClientConnection?
        /// The wait in progress, resumed early by `stop`.
        var wait: CheckedContinuation<Void, Never>?
        var connects = 0
        var attempts = 0
        var failures = 0
        var heartbeats = 0
        var idleDrops = 0
    }

    private let address: TCPAddress
    private let tls: TLSContext?
    private let device: any DeviceKeyHolder
    private let connectTimeout: Duration
    private let backoff: Backoff
    private let clock: any RainClock
    private let logger: Logger
    private let onEvent: @Sendable (Event) -> Void
    private let lease: ReadLease?
    private let state = Mutex(State())
    /// Connecting and signing block: never on the concurrency pool.
    private let queue = DispatchQueue(label: "rainwallet.revocation-feed")

    /// A feed for the authority at `address`; nothing happens before `start`.
    /// - Parameters:
    ///   - address: the authority (the device's `--authority`).
    ///   - tls: the client TLS context, or nil for plain TCP to a loopback address.
    ///   - device: whose keys the connection proves (the stream is this device's).
    ///   - connectTimeout: how long a connection, its proof and the stream's opening may take.
    ///   - backoff: the reconnect backoff.
    ///   - clock: times the backoff.
    ///   - logger: connection changes only.
    ///   - lease: the device's read lease, kept on the stream's connection; nil keeps none.
    ///   - onEvent: called for every event; must not block.
    public init(
        address: TCPAddress, tls: TLSContext?, device: any DeviceKeyHolder, connectTimeout: Duration = .seconds(5),
        backoff: Backoff = Backoff(), clock: any RainClock = SystemClock(), logger: Logger, lease: ReadLease? = nil,
        onEvent: @escaping @Sendable (Event) -> Void
    ) {
        self.lease = lease
        self.address = address
        self.tls = tls
        self.device = device
        self.connectTimeout = connectTimeout
        self.backoff = backoff
        self.clock = clock
        self.logger = logger
        self.onEvent = onEvent
    }

    /// Starts keeping the stream open (once; a stopped feed stays stopped).
    public func start() {
        state.withLock { s in
            guard case .idle = s.phase else { return }
            s.phase = .running(Task.detached { [self] in await run() })
        }
    }

    /// Stops: closes the connection, ends the wait, and ends the task.
    public func stop() {
        let (task, connection, wait) = state.withLock {
            s -> (Task<Void, Never>?, ClientConnection?, CheckedContinuation<Void, Never>?) in
            var task: Task<Void, Never>?
            if case .running(let t) = s.phase { task = t }
            s.phase = .stopped
            defer {
                s.connection = nil
                s.wait = nil
            }
            return (task, s.connection, s.wait)
        }
        lease?.unlinked()
        task?.cancel()
        connection?.close()
        wait?.resume()
    }

    /// How many times the stream was established (tests).
    public var connectCount: Int { state.withLock { $0.connects } }

    /// How many connections were attempted (tests: one per backoff wait while the authority is down).
    public var attemptCount: Int { state.withLock { $0.attempts } }

    /// How many heartbeats arrived (tests).
    public var heartbeatCount: Int { state.withLock { $0.heartbeats } }

    /// How many streams were dropped for their silence (tests).
    public var idleDropCount: Int { state.withLock { $0.idleDrops } }

    private var isStopped: Bool {
        state.withLock { s in
            if case .stopped = s.phase { return true }
            return false
        }
    }

    // MARK: the loop

    private func run() async {
        while !isStopped {
            let connection: ClientConnection
            do throws(RainError) {
                connection = try await open()
            } catch {
                await fail(error, stage: "connect")
                continue
            }
            let stream: AsyncThrowingStream<[UInt8], any Error>
            var announcesHeartbeats = false
            var grantsLeases = false
            do throws(RainError) {
                try await prove(on: connection)
                stream = try connection.openStream(
                    method: AuthorityMethod.watchRevocations, payload: try AuthorityWatchRevocationsRequest().encode()
                ).messages
                // Answered after the stream's request was dispatched (one loop, in order): the
                // subscription is in place before the device checks its sessions.
                let info = try await withTimeout(on: connection) { () async throws(RainError) in
                    try await connection.call(method: AuthorityMethod.getInfo, payload: try GetInfoRequest().encode())
                }
                let capabilities = (try? GetInfoResponse.decode(info))?.capabilities ?? []
                announcesHeartbeats = capabilities.contains(AuthorityCapability.revocationHeartbeat)
                grantsLeases = capabilities.contains(AuthorityCapability.readLease)
            } catch {
                connection.close()
                await fail(error, stage: "open")
                continue
            }
            let count = state.withLock { s -> Int in
                s.failures = 0
                s.connects += 1
                return s.connects
            }
            logger.info("revocations.connected", ["address": address.description, "reconnect": String(count > 1)])
            onEvent(.connected)
            let link = grantsLeases ? lease?.linked { [weak self] link in self?.renewLease(on: connection, link: link) } : nil
            var failure: RainError?
            // Armed once a heartbeat announced the interval, re-armed by every message. An
            // authority that says it sends heartbeats sent the first as the stream opened, before
            // it answered GetInfo: until it arrives the wait is bounded by `connectTimeout` (the
            // stream's opening), so an authority that hangs before its first heartbeat is dropped
            // too. One that does not say so (older) is never timed out.
            let idleTimer = TimerBox()
            var idleBound: Duration?
            if announcesHeartbeats {
                idleTimer.set(dropIfSilent(connection, for: connectTimeout, hint: "no first heartbeat: reconnecting"))
            }
            do {
                for try await bytes in stream {
                    guard let message = try? AuthorityRevocation.decode(bytes) else { continue }
                    if message.isHeartbeat {
                        let bound = Self.idleBound(
                            heartbeatInterval: .milliseconds(Int64(message.heartbeatIntervalMilliseconds)))
                        // Once per stream (and when the interval changes): from here a silent
                        // authority is noticed.
                        if bound != idleBound {
                            logger.info(
                                "revocations.armed",
                                ["address": address.description, "boundMs": String(bound.milliseconds)])
                        }
                        idleBound = bound
                    }
                    if let idleBound { idleTimer.set(dropIfSilent(connection, for: idleBound)) }
                    if message.isHeartbeat {
                        state.withLock { $0.heartbeats += 1 }
                        continue
                    }
                    if message.changeSequence > 0 {
                        // Dropped before the acknowledgement leaves: the authority answers the
                        // change once it has it.
                        if let link {
                            lease?.changed(sequence: message.changeSequence)
                            renewLease(on: connection, link: link)
                        }
                        continue
                    }
                    lease?.dropKept()
                    onEvent(message.isRecheck ? .recheck : .revoked(message))
                }
            } catch {
                failure = (error as? RainError) ?? RainError(.network, "\(error)")
            }
            idleTimer.cancel()
            if link != nil { lease?.unlinked() }
            connection.close()
            state.withLock { s in if s.connection === connection { s.connection = nil } }
            guard !isStopped else { return }
            await fail(
                failure ?? RainError(.network, "the authority ended the stream"), stage: "stream",
                isLoss: failure?.isConnectionFailure ?? true)
        }
    }

    /// A timer that closes `connection` (which ends its stream, and the loop reconnects) once
    /// `bound` passes with no message.
    private func dropIfSilent(
        _ connection: ClientConnection, for bound: Duration, hint: String = "no heartbeat: reconnecting"
    ) -> any RainTimer {
        clock.schedule(after: bound, on: queue) { [self] in
            let isCurrent = state.withLock { s -> Bool in
                guard s.connection === connection else { return false }
                s.idleDrops += 1
                return true
            }
            guard isCurrent else { return }
            logger.warning(
                "revocations.idle",
                ["address": address.description, "boundMs": String(bound.milliseconds), "hint": hint])
            connection.close()
        }
    }

    /// Sends one `RenewLease` on `connection` (off the caller's thread), carrying the last change
    /// notice acted on, and hands the grant to the lease; an answer that names a notice not acted
    /// on yet is acknowledged at once. A renewal unanswered within `connectTimeout` closes the
    /// connection, like a silent stream.
    private func renewLease(on connection: ClientConnection, link: UInt64) {
        guard let lease else { return }
        Task.detached { [self] in
            guard let (sentAt, acked) = lease.renewalStarting(link: link) else { return }
            do throws(RainError) {
                let bytes = try await withTimeout(on: connection) { () async throws(RainError) in
                    try await connection.call(
                        method: AuthorityMethod.renewLease, payload: try AuthorityRenewLeaseRequest(ackedSequence: acked).encode()
                    )
                }
                let grant = try AuthorityRenewLeaseResponse.decode(bytes)
                let acknowledge = lease.renewed(
                    link: link, sentAt: sentAt, leaseMilliseconds: grant.leaseMilliseconds, changeSequence: grant.changeSequence)
                if acknowledge { renewLease(on: connection, link: link) }
            } catch {
                lease.renewalFailed(link: link)
            }
        }
    }

    /// Logs a failure and waits the backoff.
    private func fail(_ error: RainError, stage: String, isLoss: Bool = false) async {
        guard !isStopped else { return }
        let failures = state.withLock { s -> Int in
            s.failures += 1
            return s.failures
        }
        onEvent(.lost(error, stage: stage))
        let delay = backoff.jitteredDelay(afterFailures: failures)
        let fields: KeyValuePairs<String, String> = [
            "address": address.description, "stage": stage, "code": error.code.description,
            "reason": error.details.reason ?? "", "retryMs": String(delay.milliseconds),
        ]
        // The first failure of a series is worth a warning; the retries while the authority stays
        // down are not.
        if failures == 1 || isLoss {
            logger.warning("revocations.lost", fields)
        } else {
            logger.debug("revocations.retry", fields)
        }
        await wait(delay)
    }

    /// Whether the stream's connection is open now (for the device's metrics).
    public var isConnected: Bool { state.withLock { $0.connection != nil } }

    /// Applies `change` to the state unless the feed was stopped; false when it was (and nothing
    /// changed), so what `change` would have handed over is the caller's to end.
    private func whileRunning(_ change: (inout State) -> Void) -> Bool {
        state.withLock { s in
            if case .stopped = s.phase { return false }
            change(&s)
            return true
        }
    }

    /// Waits `delay` on the clock, or until `stop`.
    private func wait(_ delay: Duration) async {
        let timer = TimerBox()
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            guard whileRunning({ $0.wait = c }) else {
                c.resume()
                return
            }
            timer.set(
                clock.schedule(after: delay, on: queue) { [self] in
                    state.withLock { s in
                        let w = s.wait
                        s.wait = nil
                        return w
                    }?.resume()
                })
        }
        timer.cancel()
    }

    /// A new connection (blocking connect and TLS handshake, on `queue`).
    private func open() async throws(RainError) -> ClientConnection {
        let (address, tls, timeout) = (address, tls, connectTimeout)
        state.withLock { $0.attempts += 1 }
        let connection = try await queue.runBlocking { () throws(RainError) -> ClientConnection in
            do throws(RainError) {
                return try ClientConnection(tcp: address, tls: tls, connectTimeout: timeout)
            } catch {
                guard let reason = error.details.reason, reason.hasPrefix("tls_") else { throw error }
                throw RemoteAuthority.tlsFailure(error, address: address)
            }
        }
        guard whileRunning({ $0.connection = connection }) else {
            connection.close()
            throw RainError(.network, "the revocation feed was stopped")
        }
        return connection
    }

    /// Proves the device's keys on `connection` (as `RemoteAuthority` does on its own).
    private func prove(on connection: ClientConnection) async throws(RainError) {
        let (device, signers) = (device, device.signers)
        let challenge = try await withTimeout(on: connection) { () async throws(RainError) in
            try await connection.call(
                method: AuthorityMethod.beginDeviceProof, payload: try AuthorityBeginDeviceProofRequest().encode())
        }
        let message = DeviceBinding.signedMessage(
            deviceID: device.deviceID, challenge: try AuthorityBeginDeviceProofResponse.decode(challenge).challenge,
            channelBinding: connection.channelBinding ?? [])
        let signatures = try await queue.runBlocking { () throws(RainError) -> [[UInt8]] in
            try signers.map { (signer) throws(RainError) in
                do throws(RainError) {
                    return try signer.sign(message)
                } catch {
                    throw DeviceBinding.localKeyFailure(error)
                }
            }
        }
        for (signer, signature) in zip(signers, signatures) {
            let request = AuthorityProveDeviceRequest(
                deviceID: device.deviceID, devicePublicKey: signer.publicKey.wireBytes, signature: signature)
            _ = try await withTimeout(on: connection) { () async throws(RainError) in
                try await connection.call(method: AuthorityMethod.proveDevice, payload: try request.encode())
            }
        }
    }

    /// Runs `body`, closing `connection` (which fails the call) if it takes longer than
    /// `connectTimeout`: an authority that accepts but never answers costs one timeout, not a hang.
    private func withTimeout(
        on connection: ClientConnection, _ body: () async throws(RainError) -> [UInt8]
    ) async throws(RainError) -> [UInt8] {
        let timer = clock.schedule(after: connectTimeout, on: queue) { connection.close() }
        defer { timer.cancel() }
        return try await body()
    }
}

/// Holds the timer of one wait, so the wait can cancel it once resumed.
private final class TimerBox: Sendable {
    private let timer = Mutex<(any RainTimer)?>(nil)
    /// Keeps `t`, cancelling the timer it replaces.
    func set(_ t: any RainTimer) {
        let old = timer.withLock { current -> (any RainTimer)? in
            defer { current = t }
            return current
        }
        old?.cancel()
    }
    func cancel() { timer.withLock { $0 }?.cancel() }
}
