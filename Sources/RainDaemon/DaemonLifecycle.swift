import Dispatch
import FoundationEssentials
import Glibc
import RainCore
import RainTransport
import Synchronization

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
    /// Runs the event loop on a thread it blocks, never one of the Swift pool's.
    private let loop: LoopRunner

    /// - Parameters:
    ///   - loop: where the event loop runs; by default a private serial queue (the daemon's `main`
    ///     lends its own thread, see `CallingThread`).
    init(logger: Logger, isHandlingSignals: Bool = true, loop: LoopRunner = .queue(label: "rainwalletd.loop")) {
        self.logger = logger
        self.isHandlingSignals = isHandlingSignals
        self.loop = loop
    }

    /// Runs `role` until it is stopped.
    /// - Throws: what the role's preparation throws.
    func run(_ role: some DaemonRole, environment: RoleEnvironment) async throws(RainError) {
        guard case .initial = state else { throw RainError(.internalError, "the daemon runs once") }
        state = .starting
        // Listening for SIGTERM and SIGINT before preparing: a stop sent while the daemon starts
        // is handled below (it never serves), and one sent right after `daemon.ready` is not lost.
        let sources = isHandlingSignals ? stopOnSignals() : []
        defer { for source in sources { source.cancel() } }
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
        // Logs readiness and tells the service manager: the socket listens and the loop is about to
        // wait on it, so connections from now on are served.
        prepared.ready()
        let server = prepared.server
        await loop.run { server.run() }
        switch state {
        case .running(let p), .draining(let p): p.finish()
        case .initial, .starting, .stopped: prepared.finish()
        }
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
            prepared.stopping()
            prepared.server.stop(drainTimeout: prepared.drainTimeout)
            state = .draining(prepared)
        case .stopped:
            break
        }
    }

    /// SIGTERM and SIGINT stop the daemon after draining calls in flight. They arrive through a
    /// signalfd (what a dispatch signal source is on Linux), so they must be blocked in every
    /// thread from the start (`StopSignals.block()`, first thing in `Daemon.run`): a signal that
    /// is merely ignored (`SIG_IGN`) is discarded by the kernel, and libdispatch installs its own
    /// handler only when its manager thread gets to the registration, later. A SIGTERM in that
    /// gap, right after `daemon.ready` on a busy machine, was lost and the daemon kept running.
    private func stopOnSignals() -> [any DispatchSourceSignal] {
        let queue = DispatchQueue(label: "rainwalletd.signals")
        var sources: [any DispatchSourceSignal] = []
        for sig in StopSignals.all {
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

/// Runs a job that blocks its thread (the event loop) and resumes the caller when it returns.
struct LoopRunner: Sendable {
    /// Runs `job` on the runner's thread; returns when `job` has returned.
    let run: @Sendable (_ job: @escaping @Sendable () -> Void) async -> Void

    /// Runs the job on a serial dispatch queue of its own.
    static func queue(label: String) -> LoopRunner {
        let queue = DispatchQueue(label: label)
        return LoopRunner { job in
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                queue.async {
                    job()
                    done.resume()
                }
            }
        }
    }
}

/// A thread that waits for a task to finish, lending itself meanwhile to the jobs it is handed:
/// `main` serves the daemon's event loop this way while the lifecycle actor runs on the pool.
final class CallingThread: Sendable {
    private struct Mailbox {
        var jobs: [@Sendable () -> Void] = []
        var isFinished = false
    }
    private let mailbox = Mutex(Mailbox())
    private let wake = DispatchSemaphore(value: 0)

    init() {}

    /// A runner whose jobs run on the thread blocked in `serve()`.
    var loopRunner: LoopRunner {
        LoopRunner { job in
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                self.post {
                    job()
                    done.resume()
                }
            }
        }
    }

    private func post(_ job: @escaping @Sendable () -> Void) {
        mailbox.withLock { $0.jobs.append(job) }
        wake.signal()
    }

    /// Ends `serve()` once the jobs handed over so far have run.
    func finish() {
        mailbox.withLock { $0.isFinished = true }
        wake.signal()
    }

    /// Runs the jobs handed over, on the calling thread, until `finish()`.
    func serve() {
        while true {
            wake.wait()
            let (jobs, isFinished) = mailbox.withLock { box in
                defer { box.jobs.removeAll() }
                return (box.jobs, box.isFinished)
            }
            for job in jobs { job() }
            if isFinished { return }
        }
    }
}

/// The signals that stop the daemon, blocked in every thread so that only the lifecycle's signal
/// sources (signalfd) receive them. Children are spawned with an empty mask (`rain_spawn`,
/// Foundation's `Process`), so they do not inherit the block.
enum StopSignals {
    static let all = [SIGTERM, SIGINT]

    /// Blocks SIGTERM and SIGINT in the calling thread, and so in every thread it starts later.
    /// Call it before any other thread exists: a thread started earlier keeps its own mask, and
    /// a signal it receives is acted on by the default handler (the process ends unstopped).
    static func block() {
        var set = sigset_t()
        sigemptyset(&set)
        for sig in all { sigaddset(&set, sig) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }
}
