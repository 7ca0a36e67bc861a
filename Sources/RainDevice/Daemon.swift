import Dispatch
import Foundation
import RainAuthority
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTransport

/// Options of `rainwalletd` (device role).
public struct DaemonOptions: Sendable {
    /// `--authority HOST:PORT`: use a remote authority instead of the embedded one.
    public var authority: String?
    /// `--authority-ca PEM`: speak TLS 1.3 to the remote authority and trust only these CAs.
    public var authorityCA: String?
    public var socket: String?
    public var stateDirectory: String?
    public var config: String?
    public var isTestMethodsEnabled = false
    public var logLevel = LogLevel.info
    public var drainTimeout: Duration = .seconds(10)
    public init() {}
}

/// The `rainwalletd` process: parses flags, opens state, serves the socket until SIGTERM.
public enum Daemon {
    static let usage = """
        usage: rainwalletd [--socket PATH] [--state-dir DIR] [--config FILE] [--authority HOST:PORT]
                           [--authority-ca PEM] [--log-level LEVEL] [--enable-test-methods]
               rainwalletd authority --listen HOST:PORT --state-dir DIR [--dev-outbox] [...]

        Runs the RainWallet device daemon, with its embedded authority unless --authority names a
        remote one (see `rainwalletd authority --help`).

          --socket PATH          Unix socket to serve (default $XDG_RUNTIME_DIR/rainwallet/rainwalletd.sock,
                                 or /tmp/rainwallet-$UID/rainwalletd.sock)
          --state-dir DIR        sessions, keys and the authority database
                                 (default $XDG_STATE_HOME/rainwallet or ~/.local/state/rainwallet)
          --config FILE          JSON config (default $XDG_CONFIG_HOME/rainwallet/config.json; optional there)
          --authority HOST:PORT  use the authority served by `rainwalletd authority` there (loopback only
                                 without --authority-ca); the config's "authority" section is then unused
          --authority-ca PEM     connect to --authority with TLS 1.3, trusting only the CA certificates in
                                 PEM; the authority's certificate must name HOST (any address then works)
          --log-level LEVEL      debug, info, warning or error (default info)
          --enable-test-methods  serve /rain.wallet.v1.Test/* (integration tests only)
          -h, --help             show this help

        Logs go to stderr, one event a line. SIGTERM drains calls in flight and removes the socket.

        Under systemd (scripts/systemd/): a listening socket passed by socket activation (LISTEN_FDS)
        is served instead of --socket and is never removed; readiness goes to NOTIFY_SOCKET.
        """

    /// Parses arguments (without the program name).
    /// - Throws: RAIN_102 with a message naming the bad flag.
    public static func parse(_ args: [String]) throws(RainError) -> DaemonOptions? {
        var o = DaemonOptions()
        var flags = FlagReader(args)
        while let a = flags.next() {
            switch a {
            case "-h", "--help": return nil
            case "--socket": o.socket = try flags.value(of: a)
            case "--state-dir": o.stateDirectory = try flags.value(of: a)
            case "--config": o.config = try flags.value(of: a)
            case "--authority": o.authority = try flags.value(of: a)
            case "--authority-ca": o.authorityCA = try flags.value(of: a)
            case "--enable-test-methods": o.isTestMethodsEnabled = true
            case "--log-level": o.logLevel = try flags.logLevel(of: a)
            default:
                throw RainError.invalid("unknown argument \(a); see rainwalletd --help", field: a)
            }
        }
        if o.authorityCA != nil && o.authority == nil {
            throw RainError.invalid("--authority-ca needs --authority HOST:PORT", field: "--authority-ca")
        }
        return o
    }

    /// Entry point: returns the process exit status.
    public static func main(_ args: [String]) -> Int32 {
        if args.first == "authority" { return AuthorityDaemon.main(Array(args.dropFirst())) }
        let options: DaemonOptions
        do {
            guard let parsed = try parse(args) else {
                print(usage)
                return 0
            }
            options = parsed
        } catch {
            writeStderr("rainwalletd: error: \(error.code): \(error.message)\n")
            return 64
        }
        let logger = Logger(label: "rainwalletd", minimumLevel: options.logLevel)
        do {
            try run(options, logger: logger)
            return 0
        } catch {
            logger.error("daemon.failed", ["code": error.code.description, "error": error.message])
            writeStderr("rainwalletd: error: \(error.code): \(error.message)\n")
            return error.code == .invalidArgument ? 78 : 1
        }
    }

    static func writeStderr(_ s: String) { StandardErrorSink().write(String(s.dropLast(s.hasSuffix("\n") ? 1 : 0))) }

    /// Runs the daemon until SIGTERM or SIGINT.
    public static func run(_ options: DaemonOptions, logger: Logger) throws(RainError) {
        // Read (and unset) the service manager's variables before any other thread reads the
        // environment, and before any child could inherit them.
        let notifier = ServiceNotifier.fromEnvironment(logger: logger.child("notify"))
        let activated = try SocketActivation.takeListeningSocket(name: activationSocketName)
        try ProcessHardening.disableCoreDumps()
        let fileLimit = ProcessHardening.raiseOpenFileLimit()
        signal(SIGPIPE, SIG_IGN)

        let paths = DaemonPaths.resolve(socket: options.socket, stateDirectory: options.stateDirectory, config: options.config)
        let config = try DaemonConfig.load(path: paths.config, isRequired: paths.isConfigExplicit)
        try AtomicFile.makeDirectory(paths.stateDirectory, mode: 0o700)

        let clock = SystemClock()
        let device = try DeviceIdentity.loadOrCreate(stateDirectory: paths.stateDirectory)
        let storage = try EncryptedFileStorage(stateDirectory: paths.stateDirectory, logger: logger.child("storage"))
        let authority: any Authority
        var pruning: PeriodicPruning?
        if let remote = options.authority {
            let tls = try options.authorityCA.map { (ca) throws(RainError) in
                try renamingField(of: TLSContext.client(trustedCertificatesFile: ca), to: "--authority-ca")
            }
            authority = try RemoteAuthority(address: remote, tls: tls, clock: clock, logger: logger.child("authority"))
        } else {
            let embedded = try blockingAwait { () async throws(RainError) -> EmbeddedAuthority in
                let sender: (any CodeSender)?
                switch config.codeSender {
                case .outbox: sender = nil
                case .command(let arguments, let timeout):
                    sender = try CommandCodeSender(command: arguments, timeout: timeout, logger: logger.child("sender"))
                }
                return try await EmbeddedAuthority(
                    stateDirectory: "\(paths.stateDirectory)/authority", settings: config.authority, clock: clock,
                    sender: sender, logger: logger.child("authority"))
            }
            authority = embedded
            pruning = PeriodicPruning(authority: embedded, interval: config.authority.pruneInterval)
        }
        let context = DeviceContext(
            authority: authority, storage: storage, clock: clock, device: device, logger: logger,
            profileState: ProfileStateStore(directory: "\(paths.stateDirectory)/profiles"))
        let service = DeviceService(config: config, context: context, isTestMethodsEnabled: options.isTestMethodsEnabled)

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
            let socketDir = (paths.socket as NSString).deletingLastPathComponent
            try UnixSocket.prepareDirectory(socketDir.isEmpty ? "." : socketDir, mode: extraUIDs.isEmpty ? 0o700 : 0o711)
            fd = try UnixSocket.listen(path: paths.socket, mode: extraUIDs.isEmpty ? 0o600 : 0o666)
            socketAddress = paths.socket
        }
        var serverOptions = ServerOptions()
        serverOptions.allowedUIDs = extraUIDs
        let server = try EventLoopServer(listeningSocket: fd, options: serverOptions, handler: service, logger: logger.child("loop"))

        let sources = stopOnSignals(server, drainTimeout: options.drainTimeout, notifier: notifier, logger: logger)
        Task { await service.restoreStoredProfiles() }
        pruning?.start()
        logger.info(
            "daemon.ready",
            [
                "version": daemonVersion, "socket": socketAddress, "state": paths.stateDirectory, "pid": "\(getpid())",
                "uid": "\(getuid())", "device": device.id, "nofile": "\(fileLimit)",
                "authority": options.authority ?? "embedded", "activation": activated == nil ? "none" : "systemd",
                "authorityTLS": options.authorityCA == nil ? "false" : "true",
            ])
        // The socket listens and the loop is about to wait on it: connections from now on are served.
        notifier?.ready(status: "serving \(socketAddress)")
        server.run()
        pruning?.stop()
        if activated == nil { unlink(paths.socket) }  // never a socket the service manager handed over
        for s in sources { s.cancel() }
        logger.info("daemon.stopped")
    }

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

    /// SIGTERM and SIGINT stop the server after draining calls in flight.
    static func stopOnSignals(
        _ server: EventLoopServer, drainTimeout: Duration, notifier: ServiceNotifier? = nil, logger: Logger
    ) -> [any DispatchSourceSignal] {
        let queue = DispatchQueue(label: "rainwalletd.signals")
        var sources: [any DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                logger.info("daemon.stopping", ["signal": sig == SIGTERM ? "TERM" : "INT"])
                notifier?.stopping(status: "draining calls in flight")
                server.stop(drainTimeout: drainTimeout)
            }
            source.resume()
            sources.append(source)
        }
        return sources
    }

    /// Runs async setup from synchronous `main` before the loop starts.
    static func blockingAwait<T: Sendable>(_ body: @escaping @Sendable () async throws(RainError) -> T) throws(RainError) -> T {
        let box = ResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        Task {
            do throws(RainError) {
                box.set(.success(try await body()))
            } catch {
                box.set(.failure(error))
            }
            done.signal()
        }
        done.wait()
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
