import RainCore
import RainTransport

/// One role of `rainwalletd`: the device daemon, or the authority alone (`rainwalletd authority`).
/// A role says how it is named and what it opens before serving; ``DaemonLifecycle`` runs both
/// the same way.
protocol DaemonRole: Sendable {
    /// The program name in error lines (`rainwalletd`, `rainwalletd authority`).
    var displayName: String { get }
    /// The logger's label (`rainwalletd`, `rainwalletd-authority`).
    var label: String { get }
    /// The first word of the role's `.ready`, `.stopped` and `.failed` log events (`daemon`, `authority`).
    var event: String { get }
    /// The minimum log level (`--log-level`).
    var logLevel: LogLevel { get }

    /// Reads what the role takes from the process environment; called first, on the main thread,
    /// before any other thread could read the environment or a child inherit it.
    func takeEnvironment(logger: Logger) throws(RainError) -> RoleEnvironment

    /// Opens state and the listening socket, and builds the server (not yet running).
    /// - Throws: RAIN_102 for an invalid configuration (exit 78), anything else exits 1.
    func prepare(_ environment: RoleEnvironment, logger: Logger) async throws(RainError) -> PreparedServer
}

/// What a role took from the environment before starting: the service manager's notify socket and
/// a socket passed by socket activation.
struct RoleEnvironment: Sendable {
    var notifier: ServiceNotifier?
    var activated: ActivatedSocket?
    /// `WATCHDOG_USEC` when the service manager expects `WATCHDOG=1` from this process.
    var watchdogInterval: Duration?
}

/// A role's server, ready to run, with what to do around the run.
struct PreparedServer: Sendable {
    /// The event loop server, listening.
    var server: EventLoopServer
    /// How long calls in flight may finish after SIGTERM.
    var drainTimeout: Duration
    /// Told when the daemon is ready and when it stops.
    var notifier: ServiceNotifier?
    /// Called when a stop signal starts the drain (before the loop stops listening).
    var stopping: @Sendable () -> Void = {}
    /// Starts background work, logs readiness and tells the service manager; called once the
    /// state is running, just before the loop runs.
    var ready: @Sendable () -> Void
    /// Stops background work and removes what the role owns (its socket) once the loop returned.
    var finish: @Sendable () -> Void
}
