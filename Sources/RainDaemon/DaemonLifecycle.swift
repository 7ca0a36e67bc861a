import Dispatch
import Foundation
import RainCore
import RainTransport

/// Runs one role of `rainwalletd` from start to stop: prepare, serve until SIGTERM or SIGINT,
/// drain, clean up. An actor with an explicit state, re-checked after every `await`
/// (hummingbird's `Server`): a stop that arrives while starting is not lost (the daemon never
/// serves), and the event loop's end is cleaned up whether it was running or draining.
actor DaemonLifecycle {
    /// Where the daemon is in its life.
    enum State {
        /// Not run yet.
        case initial
        /// Opening state and the socket.
        case starting
        /// Serving.
        case running(PreparedServer)
        /// Stopped listening; calls in flight are finishing.
        case draining(PreparedServer)
        /// Done (or stopped before it served).
        case stopped
    }

    private(set) var state = State.initial
    private let logger: Logger
    /// False in tests: SIGTERM and SIGINT are the process's, not one lifecycle's.
    private let isHandlingSignals: Bool
    /// The queue the event loop runs on: it blocks its thread, never one of the Swift pool's.
    private let loopQueue = DispatchQueue(label: "rainwalletd.loop")

    init(logger: Logger, isHandlingSignals: Bool = true) {
        self.logger = logger
        self.isHandlingSignals = isHandlingSignals
    }

    /// Runs `role` until it is stopped.
    /// - Throws: what the role's preparation throws.
    func run(_ role: some DaemonRole, environment: RoleEnvironment) async throws(RainError) {
        guard case .initial = state else { throw RainError(.internalError, "the daemon runs once") }
        state = .starting
        let prepared: PreparedServer
        do {
            prepared = try await role.prepare(environment, logger: logger)
        } catch {
            state = .stopped
            throw error
        }
        guard case .starting = state else {
            // Stopped while starting: never serve.
            prepared.finish()
            state = .stopped
            return
        }
        state = .running(prepared)
        let sources = isHandlingSignals ? stopOnSignals() : []
        // Logs readiness and tells the service manager: the socket listens and the loop is about to
        // wait on it, so connections from now on are served.
        prepared.ready()
        let server = prepared.server
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loopQueue.async {
                server.run()
                done.resume()
            }
        }
        switch state {
        case .running(let p), .draining(let p): p.finish()
        case .initial, .starting, .stopped: prepared.finish()
        }
        for source in sources { source.cancel() }
        state = .stopped
        logger.info("\(role.event).stopped")
    }

    /// Stops serving after calls in flight finish (SIGTERM, SIGINT).
    func stop(signal: String) {
        switch state {
        case .initial, .starting:
            state = .stopped
        case .running(let prepared), .draining(let prepared):
            // A second signal while draining is logged and passed on as before; the loop ignores it.
            logger.info("daemon.stopping", ["signal": signal])
            prepared.notifier?.stopping(status: "draining calls in flight")
            prepared.server.stop(drainTimeout: prepared.drainTimeout)
            state = .draining(prepared)
        case .stopped:
            break
        }
    }

    /// SIGTERM and SIGINT stop the daemon after draining calls in flight.
    private func stopOnSignals() -> [any DispatchSourceSignal] {
        let queue = DispatchQueue(label: "rainwalletd.signals")
        var sources: [any DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            let name = sig == SIGTERM ? "TERM" : "INT"
            source.setEventHandler { [weak self] in
                guard let self else { return }
                Task { await self.stop(signal: name) }
            }
            source.resume()
            sources.append(source)
        }
        return sources
    }
}
