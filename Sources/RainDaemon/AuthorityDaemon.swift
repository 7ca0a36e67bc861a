import Dispatch
import FoundationEssentials
import Glibc
import RainAuthority
import RainAuthorityAPI
import RainAuthorityServer
import RainCodeSenderSettings
import RainConfig
import RainStore
import RainDevice
import RainCommandLine
import RainCore
import RainCrypto
import RainSystem
import RainTransport

/// `rainwalletd authority`: the authority alone, served over TCP with the device protocol's
/// framing, so several device daemons share accounts, codes and sessions.
public enum AuthorityDaemon {
    /// `rainwalletd authority`'s declaration.
    static let declaration: Command = {
        let defaults = AuthoritySettings(isDevOutboxEnabled: false)
        func seconds(_ d: Duration) -> Command.Default { .computed("\(Int(d.components.seconds))") }
        func number(_ n: Int) -> Command.Default { .computed("\(n)") }
        return Command(
            name: "authority",
            abstract: "serve the authority alone on TCP, shared by device daemons",
            discussion: """
                Serves the RainWallet authority (accounts, login codes, wallets, session tokens) on TCP.
                Device daemons use it with `rainwalletd --authority HOST:PORT`.
                """,
            options: [
                Command.Option(
                    "--listen", value: "HOST:PORT",
                    help: """
                        address to serve: loopback (127.0.0.1:7420, [::1]:7420,
                        localhost:7420), or with TLS any IP address (0.0.0.0:7420)
                        """, isRequired: true),
                Command.Option(
                    "--state-dir", value: "DIR", help: "authority.key, authority.store, authority.sqlite3, outbox.jsonl",
                    kind: .directory,
                    isRequired: true),
                Command.Option(
                    "--apps", value: "APP,APP",
                    help: """
                        the app ids served (comma-separated); calls for any other app id are
                        refused with RAIN_102. Without it every app id is served (a warning
                        is logged); the send limits across apps hold either way
                        """),
                .flag("--dev-outbox", help: "serve the development outbox RPC (codes in clear: development only)"),
                Command.Option(
                    "--code-sender", value: "FILE",
                    help: """
                        how codes are delivered: a JSON file (this user's, not writable by others)
                        holding a codeSender object: {"type": "outbox"} (the default), "command",
                        "smtp" or "sms" (docs/operations.md, "Sending codes"); secrets stay in their own 0600 files
                        """, kind: .file),
                Command.Option(
                    "--access-token-lifetime", value: "SECONDS", help: "access token lifetime", kind: .seconds(2...86400),
                    default: seconds(defaults.accessTokenLifetime)),
                Command.Option(
                    "--refresh-token-lifetime", value: "SECONDS",
                    help: "how long a session lives from its last refresh (the refresh token's lifetime)",
                    kind: .seconds(10...31_536_000), default: seconds(defaults.refreshTokenLifetime)),
                Command.Option(
                    "--code-lifetime", value: "SECONDS", help: "login code lifetime", kind: .seconds(1...3600),
                    default: seconds(defaults.codeLifetime)),
                Command.Option(
                    "--refresh-grace", value: "SECONDS", help: "window in which a repeated refresh gets the same pair",
                    kind: .seconds(0...600), default: seconds(defaults.refreshGraceWindow)),
                Daemon.logLevelOption,
                Command.Option(
                    "--tls-cert", value: "PEM", help: "serve TLS 1.3 only, with this certificate chain (server first)",
                    kind: .file, requires: ["--tls-key"]),
                Command.Option(
                    "--tls-key", value: "PEM", help: "the certificate's private key (mode 0600, owned by this user)",
                    kind: .file, requires: ["--tls-cert"]),
                Command.Option(
                    "--send-cooldown", value: "SECONDS", help: "least time between two codes to one contact",
                    kind: .seconds(0...3600), default: seconds(defaults.sendLimits.contactCooldown)),
                Command.Option(
                    "--contact-max-sends", value: "N", help: "most codes to one contact per contact window",
                    kind: .integer(1...1_000_000), default: number(defaults.sendLimits.contactMaxSends)),
                Command.Option(
                    "--contact-window", value: "SECONDS", help: "the contact window", kind: .seconds(1...86400),
                    default: seconds(defaults.sendLimits.contactWindow)),
                Command.Option(
                    "--account-max-sends", value: "N", help: "most codes for one account per account window",
                    kind: .integer(1...1_000_000), default: number(defaults.sendLimits.accountMaxSends)),
                Command.Option(
                    "--account-window", value: "SECONDS", help: "the account window", kind: .seconds(1...86400),
                    default: seconds(defaults.sendLimits.accountWindow)),
                Command.Option(
                    "--contact-all-apps-max-sends", value: "N",
                    help: "most codes to one contact per contact-all-apps window, whatever the app",
                    kind: .integer(1...1_000_000), default: number(defaults.sendLimits.contactAllAppsMaxSends)),
                Command.Option(
                    "--contact-all-apps-window", value: "SECONDS", help: "the contact-all-apps window",
                    kind: .seconds(1...86400), default: seconds(defaults.sendLimits.contactAllAppsWindow)),
                Command.Option(
                    "--source-max-sends", value: "N",
                    help: "most codes per source address (a caller's IP address) per source window",
                    kind: .integer(1...1_000_000), default: number(defaults.sendLimits.sourceMaxSends)),
                Command.Option(
                    "--source-window", value: "SECONDS", help: "the source window", kind: .seconds(1...86400),
                    default: seconds(defaults.sendLimits.sourceWindow)),
                Command.Option(
                    "--prune-interval", value: "SECONDS", help: "how often old codes, sessions and outbox lines are deleted",
                    kind: .seconds(1...86400), default: seconds(defaults.pruneInterval)),
                Command.Option(
                    "--prune-retention", value: "SECONDS", help: "how long they are kept once expired or revoked",
                    kind: .seconds(1...31_536_000), default: seconds(defaults.pruneRetention)),
                Command.Option(
                    "--revocation-heartbeat", value: "SECONDS",
                    help:
                        "how often each device's revocation stream gets a heartbeat (a device drops a stream silent for 2.5 of them)",
                    kind: .seconds(0.05...3600), default: seconds(AuthorityService.defaultRevocationHeartbeat)),
                Command.Option(
                    "--read-lease", value: "SECONDS",
                    help: """
                        how long a device may answer Account/Get and Wallet/Get from what it read (at most 1;
                        0 grants no lease: every read comes here); a change to an account waits until its
                        leased readers acknowledged it, at most this long; never granted on PostgreSQL
                        """,
                    kind: .seconds(0...1), default: seconds(ReadLease.longest)),
                Command.Option(
                    "--metrics-listen", value: "HOST:PORT",
                    help: """
                        serve GET /metrics (Prometheus text) and GET /healthz over HTTP on this
                        loopback address (127.0.0.1:9420; port 0 picks one, logged as metricsPort);
                        any other address is refused (RAIN_102)
                        """),
                Command.Option(
                    "--store", value: "STORE",
                    help: """
                        sqlite (default: authority.sqlite3 in the state directory) or a
                        PostgreSQL URL shared by several authority instances (they must
                        share authority.key too): postgres://USER@HOST:PORT/DATABASE; no
                        password in it (ps shows it): PGPASSFILE (~/.pgpass) or PGPASSWORD,
                        and PGHOST, PGUSER, PGDATABASE, PGSSLMODE… fill what it leaves out.
                        The state directory records its store (authority.store): a start on
                        another one is refused (exit 78) without --store-change
                        """),
                .flag(
                    "--store-change",
                    help: """
                        let this start move the state directory to the store --store names (its
                        authority.key must be the new store's); without it a start on another
                        store than the recorded one is refused
                        """),
            ],
            exitStatuses: [
                .init(0, "stopped by SIGTERM or SIGINT"), .init(1, "failed"), .init(64, "a usage mistake"),
                .init(78, "an invalid configuration (RAIN_102)"),
            ])
    }()

    struct Options: Sendable {
        var listen: String?
        var stateDirectory: String?
        var settings = AuthoritySettings(isDevOutboxEnabled: false)
        var logLevel = LogLevel.info
        var tlsCertificate: String?
        var tlsKey: String?
        /// nil or "sqlite": the state directory's SQLite file; else a PostgreSQL URL.
        var store: String?
        /// `--code-sender`: the file holding the codeSender object; nil: the outbox.
        var codeSenderFile: String?
        /// `--revocation-heartbeat`: the `WatchRevocations` heartbeat interval.
        var revocationHeartbeat = AuthorityService.defaultRevocationHeartbeat
        /// `--read-lease`: the read lease granted to devices.
        var readLease = ReadLease.longest
        /// `--store-change`: the state directory may move to the store `--store` names.
        var isStoreChangeAllowed = false
        /// `--metrics-listen`: the loopback address of the metrics and health server; nil: none.
        var metricsListen: TCPAddress?
    }

    /// Parses the arguments after `authority`; nil when help was asked for.
    /// - Throws: RAIN_102 with a message naming the bad flag.
    static func parse(_ args: [String]) throws(RainError) -> Options? {
        let parsed = try Daemon.parseCommandLine(["authority"] + args)
        return parsed.isHelpRequested ? nil : try options(parsed)
    }

    static func options(_ parsed: ParsedCommand) throws(RainError) -> Options {
        var o = Options()
        o.listen = parsed.value("--listen")
        o.stateDirectory = parsed.value("--state-dir")
        o.settings.isDevOutboxEnabled = parsed.flag("--dev-outbox")
        o.logLevel = Daemon.logLevel(parsed)
        o.tlsCertificate = parsed.value("--tls-cert")
        o.tlsKey = parsed.value("--tls-key")
        o.store = parsed.value("--store")
        o.codeSenderFile = parsed.value("--code-sender")
        o.isStoreChangeAllowed = parsed.flag("--store-change")
        func given(_ name: String) -> Bool { parsed.source(of: name) == .commandLine }
        if given("--access-token-lifetime"), let v = parsed.seconds("--access-token-lifetime") {
            o.settings.accessTokenLifetime = v
        }
        if given("--code-lifetime"), let v = parsed.seconds("--code-lifetime") { o.settings.codeLifetime = v }
        if given("--refresh-token-lifetime"), let v = parsed.seconds("--refresh-token-lifetime") {
            o.settings.refreshTokenLifetime = v
        }
        if given("--refresh-grace"), let v = parsed.seconds("--refresh-grace") { o.settings.refreshGraceWindow = v }
        if given("--send-cooldown"), let v = parsed.seconds("--send-cooldown") { o.settings.sendLimits.contactCooldown = v }
        if given("--contact-max-sends"), let v = parsed.integer("--contact-max-sends") {
            o.settings.sendLimits.contactMaxSends = v
        }
        if given("--contact-window"), let v = parsed.seconds("--contact-window") { o.settings.sendLimits.contactWindow = v }
        if given("--account-max-sends"), let v = parsed.integer("--account-max-sends") {
            o.settings.sendLimits.accountMaxSends = v
        }
        if given("--account-window"), let v = parsed.seconds("--account-window") { o.settings.sendLimits.accountWindow = v }
        if given("--contact-all-apps-max-sends"), let v = parsed.integer("--contact-all-apps-max-sends") {
            o.settings.sendLimits.contactAllAppsMaxSends = v
        }
        if given("--contact-all-apps-window"), let v = parsed.seconds("--contact-all-apps-window") {
            o.settings.sendLimits.contactAllAppsWindow = v
        }
        if given("--source-max-sends"), let v = parsed.integer("--source-max-sends") {
            o.settings.sendLimits.sourceMaxSends = v
        }
        if given("--source-window"), let v = parsed.seconds("--source-window") { o.settings.sendLimits.sourceWindow = v }
        if let apps = parsed.value("--apps") { o.settings.servedAppIDs = try servedApps(apps) }
        if given("--prune-interval"), let v = parsed.seconds("--prune-interval") { o.settings.pruneInterval = v }
        if given("--prune-retention"), let v = parsed.seconds("--prune-retention") { o.settings.pruneRetention = v }
        if given("--revocation-heartbeat"), let v = parsed.seconds("--revocation-heartbeat") { o.revocationHeartbeat = v }
        if given("--read-lease"), let v = parsed.seconds("--read-lease") { o.readLease = v }
        if let text = parsed.value("--metrics-listen") { o.metricsListen = try metricsAddress(text) }
        if let store = o.store, store != "sqlite", !store.hasPrefix("postgres://"), !store.hasPrefix("postgresql://") {
            throw RainError.invalid("--store takes sqlite or postgres://USER@HOST:PORT/DATABASE", field: "--store")
        }
        return o
    }
}

extension AuthorityDaemon {
    /// The sender `--code-sender FILE` describes (nil: the outbox), with its secret files read.
    /// The file holds the codeSender object itself, or that object under a `codeSender` key (the
    /// form config.json uses), so one snippet serves both.
    /// - Throws: RAIN_102 (field `--code-sender` or the key path) for a file that is linked,
    ///   another user's or writable by others, invalid JSON, or an invalid codeSender object.
    /// - Parameter smsBudget: where an SMS sender counts its hourly budget (the authority's store).
    static func codeSender(file: String, smsBudget: (any SMSBudget)? = nil, logger: Logger) throws(RainError)
        -> (any CodeSender)?
    {
        guard
            let bytes = try OwnedPath.readTrustedFile(
                file, owners: [geteuid()], name: "the code sender file", field: "--code-sender", limit: 1 << 20)
        else {
            throw RainError.invalid("--code-sender: \(file) does not exist", field: "--code-sender")
        }
        var value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
        } catch {
            throw RainError.invalid("--code-sender: \(file) is not valid JSON", field: "--code-sender")
        }
        if case .object(let outer) = value, outer.count == 1, let inner = outer["codeSender"] {
            value = inner
        }
        guard case .object(let dict) = value, case .string(let type)? = dict["type"] else {
            throw RainError.invalid(
                "--code-sender: \(file) must hold an object with a \"type\": outbox, command, smtp or sms "
                    + "(alone, or as the value of \"codeSender\")",
                field: "codeSender.type")
        }
        switch type {
        case "outbox":
            return nil
        case "command":
            guard case .array(let items)? = dict["command"] else {
                throw RainError.invalid("codeSender.command must be [program, arguments...]", field: "codeSender.command")
            }
            let arguments = items.compactMap { item -> String? in
                if case .string(let s) = item { return s }
                return nil
            }
            guard arguments.count == items.count else {
                throw RainError.invalid("codeSender.command must be an array of strings", field: "codeSender.command")
            }
            var timeout = Duration.seconds(10)
            if let value = dict["timeoutSeconds"] {
                guard case .number(let seconds) = value, seconds >= 0.1, seconds <= 300 else {
                    throw RainError.invalid(
                        "codeSender.timeoutSeconds must be seconds from 0.1 to 300", field: "codeSender.timeoutSeconds")
                }
                timeout = .milliseconds(Int64(seconds * 1000))
            }
            return try CommandCodeSender(command: arguments, timeout: timeout, logger: logger)
        default:
            return try CodeSenderConfiguration.parse(value, path: "codeSender").makeSender(
                smsBudget: smsBudget, logger: logger)
        }
    }

    /// `--metrics-listen HOST:PORT`: a loopback address only, TLS or not: the metrics and the
    /// health check are for the machine's own scraper, and a reverse proxy or a tunnel reaches
    /// them from elsewhere.
    /// - Throws: RAIN_102 (field `--metrics-listen`, reason `non_loopback` or `malformed_address`).
    static func metricsAddress(_ text: String) throws(RainError) -> TCPAddress {
        do {
            return try TCPAddress(parsing: text, field: "--metrics-listen", allowsNonLoopback: false)
        } catch  where error.details.reason == TCPAddress.nonLoopbackReason {
            throw RainError.invalid(
                "--metrics-listen \(text): metrics are served on loopback only (127.0.0.1:PORT or [::1]:PORT); "
                    + "scrape them from this machine, or through a tunnel",
                field: "--metrics-listen", reason: TCPAddress.nonLoopbackReason)
        }
    }

    /// `--apps a,b`: the app ids, each 1 to 128 bytes.
    /// - Throws: RAIN_102 (field `--apps`) for an empty list or app id.
    static func servedApps(_ text: String) throws(RainError) -> Set<String> {
        let apps = text.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingWhitespace()
        }
        guard !apps.isEmpty, apps.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 128 }) else {
            throw RainError.invalid(
                "--apps takes app ids separated by commas, each 1 to 128 characters (--apps myapp,otherapp)",
                field: "--apps")
        }
        return Set(apps)
    }
}

/// The authority role: `rainwalletd authority`, the authority alone on TCP.
struct AuthorityRole: DaemonRole {
    var options: AuthorityDaemon.Options
    var displayName: String { "rainwalletd authority" }
    var label: String { "rainwalletd-authority" }
    var event: String { "authority" }
    var logLevel: LogLevel { options.logLevel }

    func takeEnvironment(logger: Logger) throws(RainError) -> RoleEnvironment {
        // Read (and unset) the service manager's variables before any other thread reads the
        // environment, and before a code sender's command could inherit them.
        let notifier = ServiceNotifier.fromEnvironment(logger: logger.child("notify"))
        let watchdog = AuthorityWatchdog.intervalFromEnvironment()
        return RoleEnvironment(notifier: notifier, activated: nil, watchdogInterval: notifier == nil ? nil : watchdog)
    }

    func prepare(_ environment: RoleEnvironment, logger: Logger) async throws(RainError) -> PreparedServer {
        // Files, sockets and the store's opening block: never on the Swift pool.
        let options = options
        return try await DispatchQueue(label: "rainwalletd.setup").runBlocking { () throws(RainError) in
            try Self.prepareBlocking(options, environment: environment, logger: logger)
        }
    }

    static func prepareBlocking(
        _ options: AuthorityDaemon.Options, environment: RoleEnvironment = RoleEnvironment(), logger: Logger
    ) throws(RainError) -> PreparedServer {
        guard let listen = options.listen, let stateDirectory = options.stateDirectory else {
            throw RainError.invalid("--listen and --state-dir are required")
        }
        try ProcessHardening.disableCoreDumps()
        ProcessHardening.raiseOpenFileLimit()
        signal(SIGPIPE, SIG_IGN)
        let address = try TCPAddress(parsing: listen, field: "listen", allowsNonLoopback: options.tlsCertificate != nil)
        var tls: TLSContext?
        if let certificate = options.tlsCertificate, let key = options.tlsKey {
            do {
                tls = try TLSContext.server(certificateChainFile: certificate, privateKeyFile: key)
            } catch {
                var error = error
                if error.code == .invalidArgument {
                    error.details.field = error.details.field == "certificate" ? "--tls-cert" : "--tls-key"
                }
                throw error
            }
        }
        let storeURL = options.store.flatMap { $0 == "sqlite" ? nil : $0 }
        if let storeURL { PostgresURL.warnAboutPassword(in: storeURL, logger: logger.child("store")) }
        let storeIdentity = try StateDirectoryStore.identity(of: options.store)
        let senderFile = options.codeSenderFile
        if let senderFile {
            // Read and parsed now, so a mistake in it leaves the state directory untouched; made
            // again below on the opened store, whose SMS budget it shares.
            _ = try AuthorityDaemon.codeSender(file: senderFile, logger: logger.child("sender"))
        }
        // The port too is checked before anything is touched: one already in use stops the start
        // with the state directory and the store as they were (connections wait in the backlog
        // until the store is open).
        let fd = try TCPSocket.listen(address)
        // Every option is valid: only now is the state directory created, locked and used.
        let stateLock = try Daemon.openStateDirectory(stateDirectory, role: "rainwalletd authority")
        let recordsStore = try StateDirectoryStore.check(
            stateDirectory: stateDirectory, identity: storeIdentity, isChangeAllowed: options.isStoreChangeAllowed)
        let settings = options.settings
        let authority = try Daemon.blockingAwait { () async throws(RainError) -> EmbeddedAuthority in
            let store: (any AuthorityStore)? =
                if let storeURL { try await PostgresAuthorityStore.open(url: storeURL) } else { nil }
            return try await EmbeddedAuthority(
                stateDirectory: stateDirectory, settings: settings,
                clock: TestClockEnvironment.clock(logger: logger) ?? SystemClock(), store: store,
                logger: logger.child("authority")
            ) { (store) throws(RainError) -> (any CodeSender)? in
                // The SMS budget is the store's, shared by every instance on it.
                try senderFile.flatMap { (file) throws(RainError) in
                    try AuthorityDaemon.codeSender(
                        file: file, smsBudget: StoreSMSBudget(store: store), logger: logger.child("sender"))
                }
            }
        }
        // The store and its master key are this directory's now: a later start must name them again.
        if recordsStore { try StateDirectoryStore.record(storeIdentity, stateDirectory: stateDirectory) }
        // Revocations pushed to the devices; on PostgreSQL, also those of the other instances.
        let revocationChannel = try storeURL.map { (url) throws(RainError) in
            try PostgresRevocationChannel(url: url, hub: authority.revocations, logger: logger.child("revocations"))
        }
        let service = AuthorityService(
            authority: authority, isDevOutboxEnabled: settings.isDevOutboxEnabled, version: daemonVersion,
            logger: logger.child("service"), revocations: authority.revocations,
            revocationHeartbeat: options.revocationHeartbeat,
            callMetrics: options.metricsListen == nil ? nil : CallMetrics(prefix: "rainwallet_authority"),
            readLease: options.readLease)
        let port = (try? TCPSocket.localPort(of: fd)) ?? address.port
        let health = AuthorityHealth(authority: authority)
        let metrics = try options.metricsListen.map { (metricsAddress) throws(RainError) in
            let registry = MetricsRegistry()
            registry.register(service.metricFamilies + authority.metricFamilies)
            return try MetricsEndpoint.listen(
                metricsAddress, registry: registry, health: { health.check() }, logger: logger.child("metrics"))
        }
        let notifier = environment.notifier
        let watchdog = environment.watchdogInterval.flatMap { interval in
            notifier.map { AuthorityWatchdog(interval: interval, health: health, notifier: $0, logger: logger.child("watchdog")) }
        }
        var serverOptions = ServerOptions()
        serverOptions.isTCP = true
        serverOptions.tls = tls
        serverOptions.maximumBufferedInput = 256 << 20  // an authority holds at most 256 MiB of partial frames
        serverOptions.maximumUnadmittedConnections = 1024  // TLS before admission holds buffers for each one
        let server = try EventLoopServer(
            listeningSocket: fd, options: serverOptions, handler: service, logger: logger.child("loop"))
        health.watch(server)
        let pruning = PeriodicPruning(authority: authority, interval: settings.pruneInterval)
        let storeName = (authority.store as? PostgresAuthorityStore).map { "postgres:\($0.target)" } ?? "sqlite"
        let isTLS = tls != nil
        let masterKeyID = authority.keys.masterKeyID
        // What an operator checks during a rolling upgrade: the schema the store is at now.
        let schemaVersion = authority.store.schemaCompatibility.map { String($0.storeVersion) } ?? ""
        return PreparedServer(
            server: server, drainTimeout: .seconds(10), notifier: notifier,
            stopping: {
                // Draining: /healthz fails and the watchdog is no longer fed.
                health.setServing(false)
                watchdog?.stop()
            },
            ready: {
                pruning.start()
                health.setServing(true)
                metrics?.server.start()
                watchdog?.start()
                if settings.servedAppIDs == nil {
                    logger.warning(
                        "authority.all_apps",
                        ["hint": "every app id is served; pass --apps APP,APP to refuse the others (RAIN_102)"])
                }
                logger.info(
                    "authority.ready",
                    [
                        "version": daemonVersion, "listen": "\(address.withPort(port))", "port": "\(port)",
                        "state": stateDirectory,
                        "store": storeName, "schemaVersion": schemaVersion, "masterKey": masterKeyID,
                        "pid": "\(getpid())",
                        "devOutbox": settings.isDevOutboxEnabled ? "true" : "false",
                        "accessTokenLifetime": "\(settings.accessTokenLifetime.timeInterval)", "tls": isTLS ? "true" : "false",
                        "apps": settings.servedAppIDs.map { $0.sorted().joined(separator: ",") } ?? "*",
                        "metricsListen": metrics.map { "\($0.address)" } ?? "none",
                        "metricsPort": metrics?.port.map { "\($0)" } ?? "none",
                    ])
                notifier?.ready(status: "serving \(address.withPort(port))")
            },
            finish: {
                health.setServing(false)
                watchdog?.stop()
                metrics?.server.stop()
                withExtendedLifetime(stateLock) {}  // the state directory stays locked while serving
                pruning.stop()
                revocationChannel?.stop()
            })
    }
}
