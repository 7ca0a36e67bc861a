import Dispatch
import FoundationEssentials
import RainCore
import RainCrypto
import RainTransport
import RainWire
import Synchronization

// The link state as calls find it, its observers, and the probe that finds the authority back.
extension RemoteAuthority {
    /// The link as the last calls found it (see `AuthorityLinkState`).
    public var linkState: AuthorityLinkState? { state.withLock { $0.link.state } }

    /// Calls `observer` with each change of the link state, on the thread that saw it; it must not
    /// block.
    public func observeLink(_ observer: @escaping @Sendable (AuthorityLinkState) -> Void) {
        state.withLock { $0.linkObservers.append(observer) }
    }

    /// Calls `observer` each time the device's keys signed a proof (nil) or failed to (their
    /// error), on the thread that saw it; it must not block. A failure here is the device's own.
    public func observeDeviceKeys(_ observer: @escaping @Sendable (RainError?) -> Void) {
        state.withLock { $0.keyObservers.append(observer) }
    }

    func tellKeyObservers(_ error: RainError?) {
        for observer in state.withLock({ $0.keyObservers }) { observer(error) }
    }

    /// Records that another connection of the device's to this authority (the revocation stream's)
    /// could not be made, or its proof was refused: the link is unreachable, with that error, until
    /// a call or the probe gets an answer.
    public func noteConnectionFailed(_ error: RainError) {
        linkFailed(error, couldNotConnect: true)
    }

    /// Records that another connection of the device's to this authority (the revocation stream's)
    /// was made and proven: the authority answers, and the link is connected without waiting for
    /// the probe's next, possibly distant, try.
    public func noteConnectionAnswered() {
        answered(on: nil)
    }

    /// The longest wait between two probes.
    static let maximumProbeInterval: Duration = .seconds(30)

    /// Records a call without an answer, and starts the probe that will see the authority back.
    func linkFailed(_ error: RainError, couldNotConnect: Bool) {
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

    func announce(_ link: AuthorityLinkState, to observers: [@Sendable (AuthorityLinkState) -> Void]) {
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
    func withDeadline<Value: Sendable>(
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
}
