import Dispatch
import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainTransport
import RainWire
import Synchronization

// One bounded call: its deadline by kind, a hung connection replaced, an error for each way it can
// fail without an answer.
extension RemoteAuthority {
    /// What one call has done so far, for its deadline: the connection it used, whether its request
    /// left, and how many answers the client had seen when it began.
    private struct CallProgress {
        var connection: ClientConnection?
        var isSent = false
        var answersAtStart: UInt64 = 0
    }

    /// One call of `kind`: encode, send on the (re)opened connection (with `isProven`, one on which
    /// the device proved its keys), await the answer, decode, and refuse an answer that lacks what
    /// its type needs (RAIN_501, `AuthorityAnswer`). The whole call (connecting and proving included) is bounded by the
    /// kind's deadline and by the operation's (`AuthorityDeadlines.operationDeadline`), on `clock`.
    /// Past it: a send whose request left is RAIN_501 `outcome_unknown`, anything else RAIN_301
    /// `deadline_exceeded`; a connection on which nothing answered during the call is hung and is
    /// closed (the next call opens a fresh one). The request carries what is left of the bound as
    /// its `timeout_ms`, so the authority can end its own waits (a code's delivery) in time to
    /// answer.
    func call<Response: WireMessage>(
        _ method: String, _ request: some WireMessage, as: Response.Type, kind: AuthorityCallKind,
        isProven: Bool = false
    ) async throws(RainError) -> Response {
        let payload = try request.encode()
        let bound = bound(of: kind)
        let start = clock.monotonic
        let progress = Mutex(CallProgress(answersAtStart: state.withLock { $0.answerCount }))
        let result: Result<Response, CallFailure>
        if bound <= .zero {
            result = .failure(.deadline)
        } else {
            result = await withDeadline(bound) { [self] () async throws(RainError) -> Response in
                let connection = isProven ? try await provenConnection() : try await openConnection()
                progress.withLock { $0.connection = connection }
                let left = bound - (clock.monotonic - start)
                return try await exchange(
                    method, payload, on: connection, as: Response.self,
                    timeoutMilliseconds: UInt32(clamping: max(1, left.milliseconds))
                ) {
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
            } else if Self.isRefusedConnection(error) {
                // No call can be made over a handshake that fails or a proof the authority refuses:
                // the link is down as surely as when nothing answers.
                linkFailed(error, couldNotConnect: true)
            }
            throw error
        }
    }

    /// The bound of a call of `kind` now: its own, cut to what is left of the operation's deadline.
    func bound(of kind: AuthorityCallKind) -> Duration {
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

    /// Whether `error` says the connection could not be used: its TLS handshake failed, or the
    /// authority refused the device's proof (never the device's own keys failing to sign one).
    static func isRefusedConnection(_ error: RainError) -> Bool {
        guard !DeviceBinding.isLocalKeyFailure(error), let reason = error.details.reason else { return false }
        return reason.hasPrefix("tls_") || reason == DeviceBinding.proofFailedReason
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
    /// before the request is handed to the connection. `timeoutMilliseconds` is the request's
    /// `timeout_ms` (0: none).
    func exchange<Response: WireMessage>(
        _ method: String, _ payload: [UInt8], on connection: ClientConnection, as: Response.Type,
        timeoutMilliseconds: UInt32 = 0, sent: () -> Void = {}
    ) async throws(RainError) -> Response {
        let bytes: [UInt8]
        do {
            sent()
            bytes = try await connection.call(
                method: method, payload: payload, timeoutMilliseconds: timeoutMilliseconds)
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
        // Only the answers with a rule for completeness conform: any other is complete once decoded.
        if let answer = response as? any AuthorityAnswer, !answer.isComplete { throw incompleteAnswer(method) }
        return response
    }

    /// Records an answer on `connection`: the link is connected.
    func answered(on connection: ClientConnection?) {
        let (changed, observers) = state.withLock { s in
            if let connection {
                s.answered = ObjectIdentifier(connection)
                s.answerCount += 1
            }
            let changed = s.link.answered(now: clock.now)
            if changed != nil, let timer = s.probe?.timer {
                timer.cancel()
                s.probe = nil
            }
            return (changed, s.linkObservers)
        }
        if let changed { announce(changed, to: observers) }
    }
}
