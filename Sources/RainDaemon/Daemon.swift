import Dispatch
import FoundationEssentials
import Glibc
import RainAuthority
import RainAuthorityAPI
import RainConfig
import RainDevice
import RainKeyStore
import RainCommandLine
import RainCore
import RainCrypto
import RainSystem
import RainTransport
import Synchronization

/// Options of `rainwalletd` (device role).
public struct DaemonOptions: Sendable {
    /// `--authority HOST:PORT`: use a remote authority instead of the embedded one.
    public var authority: String?
    /// `--authority-ca PEM`: speak TLS 1.3 to the remote authority and trust only these CAs.
    public var authorityCA: String?
    public var socket: String?
    public var stateDirectory: String?
    public var config: String?
    /// `--policy FILE`: the machine's security policy (root-owned), instead of
    /// `/etc/rainwallet/policy.json`.
    public var policy: String?
    public var isTestMethodsEnabled = false
    /// `--test-confirm-instantly` (the tests' daemon only): every confirmation is given at once,
    /// without a prompt, so a benchmark measures the signing path and nothing of a person.
    public var confirmsInstantly = false
    public var logLevel = LogLevel.info
    public var drainTimeout: Duration = .seconds(10)
    /// `--authority-read-deadline`, `--authority-send-deadline`, `--authority-refresh-deadline`
    /// (milliseconds): how long each kind of call to a remote authority may wait.
    public var authorityDeadlines = AuthorityDeadlines.standard
    /// `--metrics`: serve `/metrics` and `/healthz` on `metrics.sock` beside the socket.
    public var isMetricsEnabled = false
    /// `RAINWALLET_TEST_SECURITY_KEYS=DIR` (the tests' daemon only): the security keys are the
    /// Unix sockets in `DIR`, served by the tests' software keys, instead of the machine's hidraw keys.
    public var testSecurityKeys: String?
    public init() {}
}

/// The `rainwalletd` process: parses flags, opens state, serves the socket until SIGTERM.
public enum Daemon {
    /// `rainwalletd`'s declaration: the device role's flags, and `authority` as a subcommand.
    public static let declaration = Command(
        name: "rainwalletd",
        abstract: """
            Runs the RainWallet device daemon, with its embedded authority unless --authority names a
            remote one (see `rainwalletd authority --help`).
            """,
        discussion: """
            Logs go to stderr, one event a line. SIGTERM drains calls in flight and removes the socket.

            Under systemd (scripts/systemd/): a listening socket passed by socket activation (LISTEN_FDS)
            is served instead of --socket and is never removed; readiness goes to NOTIFY_SOCKET.
            """,
        options: [
            Command.Option(
                "--socket", value: "PATH", help: "Unix socket to serve", kind: .file,
                default: .computed(RainPaths.defaultSocketDescription)),
            Command.Option(
                "--state-dir", value: "DIR", help: "sessions, keys and the authority database", kind: .directory,
                default: .computed("$XDG_STATE_HOME/rainwallet or ~/.local/state/rainwallet")),
            Command.Option(
                "--config", value: "FILE", help: "JSON config", kind: .file,
                default: .computed(
                    "$XDG_CONFIG_HOME/rainwallet/config.json, else ~/.config/rainwallet/config.json; optional there")),
            Command.Option(
                "--authority", value: "HOST:PORT",
                help: """
                    use the authority served by `rainwalletd authority` there (loopback only
                    without --authority-ca); the config's "authority" section is then unused.
                    A security setting: a start naming another authority or CA than the
                    confirmed one (config.json's remoteAuthority, confirmed with `rainwallet
                    settings confirm`) is refused (exit 78)
                    """),
            Command.Option(
                "--authority-ca", value: "PEM",
                help: """
                    connect to --authority with TLS 1.3, trusting only the CA certificates in
                    PEM; the authority's certificate must name HOST (any address then works)
                    """, kind: .file, requires: ["--authority"]),
            Command.Option(
                "--authority-read-deadline", value: "MS",
                help: "how long a read (account, wallet) of --authority may take, its retries included",
                kind: .integer(1...600_000), default: .computed("\(AuthorityDeadlines.standard.read.milliseconds)"),
                requires: ["--authority"]),
            Command.Option(
                "--authority-send-deadline", value: "MS",
                help: "how long a send (codes, confirms, logout, passkey finish) to --authority may take; never retried",
                kind: .integer(1...600_000), default: .computed("\(AuthorityDeadlines.standard.send.milliseconds)"),
                requires: ["--authority"]),
            Command.Option(
                "--authority-refresh-deadline", value: "MS",
                help: "how long one refresh attempt to --authority may take (the session policy spaces the retries)",
                kind: .integer(1...600_000), default: .computed("\(AuthorityDeadlines.standard.refresh.milliseconds)"),
                requires: ["--authority"]),
            Command.Option(
                "--policy", value: "FILE",
                help: """
                    the machine's security policy: owned by root, not writable by others; the
                    security settings it names need no confirmation and the config cannot change them.
                    Another file only when rainwalletd runs as root
                    """, kind: .file, default: .value(SecurityPolicy.defaultPath)),
            logLevelOption,
            .flag(
                "--metrics",
                help: """
                    serve GET /metrics (Prometheus text) and GET /healthz over HTTP on the Unix
                    socket metrics.sock beside --socket, mode 0600 (this user's only)
                    """),
            .flag("--enable-test-methods", help: "serve /rain.wallet.v1.Test/* (the tests' rainwalletd-test only)"),
            .flag(
                "--test-confirm-instantly",
                help: "confirm every prompt at once, showing nothing (the benchmarks' rainwalletd-test only)"),
        ],
        subcommands: [AuthorityDaemon.declaration, StorageCommand.declaration, DaemonDocumentation.declaration],
        isRunnableWithoutSubcommand: true,
        exitStatuses: [
            .init(0, "stopped by SIGTERM or SIGINT"), .init(1, "failed"), .init(64, "a usage mistake"),
            .init(78, "an invalid configuration (RAIN_102)"),
        ])

    /// The device daemon's metrics socket, in its socket's directory (`--metrics`).
    static let metricsSocketName = "metrics.sock"

    /// `--log-level LEVEL`, shared by both roles.
    static let logLevelOption = Command.Option(
        "--log-level", value: "LEVEL", help: "debug, info, warning or error",
        kind: .choice(["debug", "info", "warning", "error"]), default: .value("info"))

    /// The parsed command line, a usage mistake turned into RAIN_102 naming the word at fault.
    static func parseCommandLine(_ args: [String], root: Command = declaration) throws(RainError) -> ParsedCommand {
        do {
            return try CommandParser(root, environment: ProcessInfo.processInfo.environment).parse(args)
        } catch {
            throw RainError.invalid(error.message, field: error.word)
        }
    }

    /// The log level of `--log-level` (checked while parsing).
    static func logLevel(_ parsed: ParsedCommand) -> LogLevel {
        ["debug": LogLevel.debug, "info": .info, "warning": .warning, "error": .error][parsed.value("--log-level") ?? ""] ?? .info
    }

    /// Parses arguments (without the program name); nil when help was asked for.
    /// - Throws: RAIN_102 with a message naming the bad flag.
    public static func parse(_ args: [String]) throws(RainError) -> DaemonOptions? {
        let parsed = try parseCommandLine(args)
        guard parsed.path.count == 1 else {
            throw RainError.invalid("the authority role and storage have their own options", field: parsed.path[1].name)
        }
        return parsed.isHelpRequested ? nil : options(parsed)
    }

    static func options(_ parsed: ParsedCommand) -> DaemonOptions {
        var o = DaemonOptions()
        o.socket = parsed.value("--socket")
        o.stateDirectory = parsed.value("--state-dir")
        o.config = parsed.value("--config")
        o.policy = parsed.value("--policy")
        o.authority = parsed.value("--authority")
        o.authorityCA = parsed.value("--authority-ca")
        func milliseconds(_ flag: String) -> Duration? { parsed.value(flag).flatMap(Int.init).map { .milliseconds($0) } }
        if let read = milliseconds("--authority-read-deadline") { o.authorityDeadlines.read = read }
        if let send = milliseconds("--authority-send-deadline") { o.authorityDeadlines.send = send }
        if let refresh = milliseconds("--authority-refresh-deadline") { o.authorityDeadlines.refresh = refresh }
        o.isTestMethodsEnabled = parsed.flag("--enable-test-methods")
        o.confirmsInstantly = parsed.flag("--test-confirm-instantly")
        o.isMetricsEnabled = parsed.flag("--metrics")
        o.testSecurityKeys = ProcessInfo.processInfo.environment[TestSecurityKeysEnvironment.variable].flatMap {
            $0.isEmpty ? nil : $0
        }
        o.logLevel = logLevel(parsed)
        return o
    }

    /// Entry point for both roles (the device, and `authority`): returns the process exit status.
    /// - Parameters:
    ///   - args: the arguments, without the program name.
    ///   - version, commit, date, swiftVersion: what `--version` prints, from the file the
    ///     BuildInfoPlugin generates into the `rainwalletd` target (see `BuildInfo`).
    ///   - hooks: what the command line may do beyond what users run (`DaemonHooks`).
    public static func main(
        _ args: [String], version: String = daemonVersion, commit: String = "unknown", date: String = "unknown",
        swiftVersion: String = "unknown", hooks: DaemonHooks = .production
    ) -> Int32 {
        ProcessHardening.limitMallocArenas()
        var root = declaration
        root.build = BuildInfo(version: version, commit: commit, date: date, swiftVersion: swiftVersion)
        let parsed: ParsedCommand
        do {
            parsed = try parseCommandLine(args, root: root)
        } catch {
            let role = args.first == "authority" ? "rainwalletd authority" : "rainwalletd"
            writeStderr("\(role): error: \(error.code): \(error.message)\nSee `\(role) --help`.\n")
            return 64
        }
        if parsed.isHelpRequested {
            print(HelpFormatter(root: root).help(for: parsed.path))
            return 0
        }
        if parsed.isVersionRequested, let build = root.build {
            print(build.text(program: root.name))
            return 0
        }
        do {
            try hooks.check(
                isPolicyGiven: parsed.source(of: "--policy").map { $0 != .defaultValue } ?? false,
                isTestMethodsEnabled: parsed.flag("--enable-test-methods"),
                isTestClockGiven: ProcessInfo.processInfo.environment[TestClockEnvironment.variable].map { !$0.isEmpty } ?? false,
                isInstantConfirmGiven: parsed.flag("--test-confirm-instantly"),
                isTestSecurityKeysGiven: ProcessInfo.processInfo.environment[TestSecurityKeysEnvironment.variable].map {
                    !$0.isEmpty
                } ?? false, uid: getuid())
        } catch {
            writeStderr("\(root.name): error: \(error.code): \(error.message)\nSee `\(root.name) --help`.\n")
            return 64
        }
        if parsed.path.count > 1, parsed.path[1].name == StorageCommand.declaration.name {
            return StorageCommand.run(parsed)
        }
        if parsed.path.count > 1, parsed.path[1].name == DaemonDocumentation.declaration.name {
            return DaemonDocumentation.run(parsed, root: root)
        }
        let role: any DaemonRole
        if parsed.path.count > 1 {
            do {
                role = AuthorityRole(options: try AuthorityDaemon.options(parsed))
            } catch {
                // The command line parsed: a value that cannot be used (an empty --apps entry, a
                // --store that is not sqlite or postgres://) is a configuration error, like one in a file.
                writeStderr("rainwalletd authority: error: \(error.code): \(error.message)\n")
                return 78
            }
        } else {
            role = DeviceRole(options: options(parsed))
        }
        return run(role)
    }

    /// Runs `role` until SIGTERM or SIGINT; returns the exit status: 0, 78 for an invalid
    /// configuration (RAIN_102), 1 for any other failure.
    static func run(_ role: some DaemonRole) -> Int32 {
        // Before any thread exists (see `DaemonLifecycle.stopOnSignals`).
        StopSignals.block()
        let logger = Logger(label: role.label, minimumLevel: role.logLevel)
        do {
            let environment = try role.takeEnvironment(logger: logger)
            // The event loop runs on this (the main) thread, which `blockingAwait` lends to the
            // lifecycle: the loop's allocations then come from glibc's main arena, cheaper to free
            // than a secondary thread's, and the loop frees on every call (docs/performance.md).
            let thread = CallingThread()
            let lifecycle = DaemonLifecycle(logger: logger, loop: thread.loopRunner)
            try blockingAwait(lending: thread) { () async throws(RainError) in
                try await lifecycle.run(role, environment: environment)
            }
            return 0
        } catch {
            logger.error("\(role.event).failed", ["code": error.code.description, "error": error.message])
            writeStderr("\(role.displayName): error: \(error.code): \(error.message)\n")
            return error.code == .invalidArgument ? 78 : 1
        }
    }

    static func writeStderr(_ s: String) { StandardErrorSink().write(String(s.dropLast(s.hasSuffix("\n") ? 1 : 0))) }

    /// The name a socket unit gives the daemon's socket (`FileDescriptorName=`), which picks it
    /// when the service manager passes several.
    public static let activationSocketName = "rainwalletd"

    /// Runs `body`, naming `flag` as the field of a RAIN_102 it throws.
    static func renamingField<T>(of body: @autoclosure () throws(RainError) -> T, to flag: String) throws(RainError) -> T {
        do {
            return try body()
        } catch {
            var error = error
            if error.code == .invalidArgument { error.details.field = flag }
            throw error
        }
    }

    /// Creates the state directory 0700, or checks the one there (a real directory of this uid
    /// that group and others cannot write: whoever can write it can plant keys, a config or an
    /// outbox), then takes its lock: one daemon per state directory.
    /// - Returns: the lock, to keep for the daemon's life.
    /// - Throws: RAIN_102 naming the directory and the fix, or the pid of the daemon holding it.
    static func openStateDirectory(_ directory: String, role: String) throws(RainError) -> DirectoryLock {
        try OwnedPath.makeOrCheckDirectory(directory, mode: 0o700, name: "state directory", field: "state-dir")
        return try DirectoryLock(directory: directory, role: role)
    }

    /// Runs async setup from synchronous `main` before the loop starts, and then the lifecycle:
    /// `body` runs as a task while the calling thread waits, serving the jobs `thread` is handed
    /// (the event loop) until the task ends.
    static func blockingAwait<T: Sendable>(
        lending thread: CallingThread = CallingThread(), _ body: @escaping @Sendable () async throws(RainError) -> T
    ) throws(RainError) -> T {
        let box = ResultBox<T>()
        Task {
            do throws(RainError) {
                box.set(.success(try await body()))
            } catch {
                box.set(.failure(error))
            }
            thread.finish()
        }
        thread.serve()
        guard let result = box.value else { throw RainError(.internalError, "setup did not finish") }
        return try result.get()
    }
}

/// A result handed from a task to a waiting thread.
final class ResultBox<T: Sendable>: @unchecked Sendable {
    // @unchecked: written once before the semaphore is signalled, read after waiting on it.
    private(set) var value: Result<T, RainError>?
    func set(_ v: Result<T, RainError>) { value = v }
}

/// The device role: the per-user daemon serving its Unix socket, with its embedded authority or a
/// remote one.
struct DeviceRole: DaemonRole {
    var options: DaemonOptions
    var displayName: String { "rainwalletd" }
    var label: String { "rainwalletd" }
    var event: String { "daemon" }
    var logLevel: LogLevel { options.logLevel }

    func takeEnvironment(logger: Logger) throws(RainError) -> RoleEnvironment {
        // Read (and unset) the service manager's variables before any other thread reads the
        // environment, and before any child could inherit them.
        let notifier = ServiceNotifier.fromEnvironment(logger: logger.child("notify"))
        let activated = try SocketActivation.takeListeningSocket(name: Daemon.activationSocketName)
        return RoleEnvironment(notifier: notifier, activated: activated)
    }

    func prepare(_ environment: RoleEnvironment, logger: Logger) async throws(RainError) -> PreparedServer {
        // Files, sockets and the embedded authority's opening block: never on the Swift pool.
        let options = options
        return try await DispatchQueue(label: "rainwalletd.setup").runBlocking { () throws(RainError) in
            try Self.prepareBlocking(options, environment, logger: logger)
        }
    }

    static func prepareBlocking(
        _ options: DaemonOptions, _ environment: RoleEnvironment, logger: Logger
    ) throws(RainError) -> PreparedServer {
        let (notifier, activated) = (environment.notifier, environment.activated)
        try ProcessHardening.disableCoreDumps()
        let fileLimit = ProcessHardening.raiseOpenFileLimit()
        signal(SIGPIPE, SIG_IGN)

        let paths = DaemonPaths.resolve(socket: options.socket, stateDirectory: options.stateDirectory, config: options.config)
        // The machine's policy (root's) fixes the security settings it names; the config asks for
        // the others, which take effect once the user confirms them (`SettingsGuard`).
        let policyPath = options.policy ?? SecurityPolicy.defaultPath
        let policy = try SecurityPolicy.load(path: policyPath)
        let fileConfig = try DeviceSetup.requested(
            DaemonConfig.load(path: paths.config, isRequired: paths.isConfigExplicit), options: options)
        let config = try fileConfig.applying(fileConfig.guarded.overridden(by: policy), source: policyPath)
        try DeviceSetup.refuseAuthorityOtherThanPolicy(requested: fileConfig, policy: config, policyPath: policyPath)
        let stateLock = try Daemon.openStateDirectory(paths.stateDirectory, role: "rainwalletd")

        let clock: any RainClock = TestClockEnvironment.clock(logger: logger) ?? SystemClock()
        let provider = try DaemonKeys.selectProvider(
            stateDirectory: paths.stateDirectory, storage: config.storage, logger: logger.child("storage"), isStart: true)
        let deviceMetrics = options.isMetricsEnabled ? DeviceMetrics() : nil
        let setup = DeviceSetup(
            options: options, config: config, policy: policy, configFile: (paths.config, paths.isConfigExplicit),
            stateDirectory: paths.stateDirectory, clock: clock, logger: logger, metrics: deviceMetrics)
        // A provider that cannot be used now (a locked keyring, no D-Bus, the TPM unreachable) is a
        // state, not a failure: the daemon serves, calls answer RAIN_501 with the reason, and it
        // retries until the keys open (`StorageGate`).
        // It also answers the storage methods, and stands in for the service during a live migration.
        let gate = StorageGate(setup: setup, provider: provider)
        let opened: DeviceSetup.Opened?
        do {
            opened = try gate.open()
        } catch  where StorageGate.isWaitable(error) {
            opened = nil
            gate.wait(error)
            logger.warning(
                "storage.unavailable",
                [
                    "provider": provider.kind.rawValue, "code": error.code.description, "reason": error.details.reason ?? "",
                    "error": error.message,
                ])
        }
        if let opened { gate.serve(opened) }
        let service: any ServerHandler = gate

        // Socket: directory 0700 (0711 and socket 0666 when other uids are allowed; SO_PEERCRED decides).
        let extraUIDs = config.allAllowedUIDs.subtracting([getuid()])
        let fd: Int32
        let socketAddress: String
        if let activated {
            // The socket unit owns the file and its modes (SocketMode=, DirectoryMode=).
            fd = activated.descriptor
            socketAddress = activated.address
            if !extraUIDs.isEmpty {
                logger.warning(
                    "socket.activated_modes",
                    ["hint": "other uids reach the socket only with SocketMode=0666 and DirectoryMode=0711"])
            }
        } else {
            try UnixSocket.prepareDirectory(
                OwnedPath.parent(of: paths.socket), mode: extraUIDs.isEmpty ? 0o700 : 0o711, isDaemonsOwn: paths.isSocketDefault)
            fd = try UnixSocket.listen(path: paths.socket, mode: extraUIDs.isEmpty ? 0o600 : 0o666)
            socketAddress = paths.socket
        }
        // Beside the socket, mode 0600 whatever the socket's: the metrics are this user's alone. A
        // handed socket with an abstract address has no directory: the default socket's is used.
        let metricsBeside = socketAddress.hasPrefix("/") ? socketAddress : paths.socket
        let serving = ServingFlag()
        let metrics = try deviceMetrics.map { (deviceMetrics) throws(RainError) in
            let registry = MetricsRegistry()
            registry.register(deviceMetrics.families)
            return try MetricsEndpoint.listen(
                unixPath: "\(OwnedPath.parent(of: metricsBeside))/\(Daemon.metricsSocketName)", registry: registry,
                health: { AuthorityHealth.Report(serving: serving.isServing) }, logger: logger.child("metrics"))
        }
        var serverOptions = ServerOptions()
        serverOptions.allowedUIDs = extraUIDs
        serverOptions.maximumBufferedInput = 64 << 20  // a device daemon holds at most 64 MiB of partial frames
        let server = try EventLoopServer(
            listeningSocket: fd, options: serverOptions, handler: service, logger: logger.child("loop"))

        let drainTimeout = options.drainTimeout
        let authorityName = config.remoteAuthority?.address ?? "embedded"
        let isAuthorityTLS = config.remoteAuthority?.ca != nil
        let stateDirectory = paths.stateDirectory
        let socketPath = paths.socket
        let (providerKind, providerLocation) = (provider.kind.rawValue, provider.location)
        return PreparedServer(
            server: server, drainTimeout: drainTimeout, notifier: notifier,
            stopping: { serving.set(false) },
            ready: {
                if let opened {
                    Task { await opened.service.restoreStoredProfiles() }
                    opened.pruning?.start()
                    opened.revocations?.start()
                    opened.auditAnchoring?.start()
                } else {
                    gate.retry(clock: clock, logger: logger)
                }
                logger.info(
                    "daemon.ready",
                    [
                        "version": daemonVersion, "socket": socketAddress, "state": stateDirectory, "pid": "\(getpid())",
                        "uid": "\(getuid())", "device": opened?.keys.device.id ?? "", "nofile": "\(fileLimit)",
                        "authority": authorityName, "activation": activated == nil ? "none" : "systemd",
                        "authorityTLS": isAuthorityTLS ? "true" : "false", "keyProvider": providerKind,
                        "keyLocation": providerLocation, "metrics": metrics?.address ?? "none",
                    ])
                serving.set(true)
                metrics?.server.start()
                // Said once: what the kernel lets programs of this user do to each other, which
                // no setting of the daemon changes.
                let ptrace = PtraceScope.read()
                if ptrace.isOpenToSameUser {
                    logger.warning("kernel.memory_open", ["setting": ptrace.setting, "hint": ptrace.explanation])
                } else {
                    logger.info("kernel.memory", ["setting": ptrace.setting])
                }
                // The socket listens and the loop is about to wait on it: connections from now on are served.
                notifier?.ready(status: "serving \(socketAddress)")
            },
            finish: {
                // The state directory stays locked until the process ends (or this closure goes).
                withExtendedLifetime(stateLock) {}
                gate.stop()
                if let metrics {
                    metrics.server.stop()
                    _ = try? Syscall.removeFile(metrics.address)
                }
                // Never a socket the service manager handed over. A socket file left behind is stale
                // and the next start removes it, so a failure here changes nothing.
                if activated == nil { _ = try? Syscall.removeFile(socketPath) }
            })
    }
}
