import Dispatch
import Foundation
import RainAuthority
import RainAuthorityAPI
import RainAuthorityServer
import RainCore
import RainCrypto
import RainStore
import RainTransport

/// `rainwalletd authority`: the authority alone, served over TCP with the device protocol's
/// framing, so several device daemons share accounts, codes and sessions.
public enum AuthorityDaemon {
    static let usage = """
        usage: rainwalletd authority --listen HOST:PORT --state-dir DIR [--dev-outbox]
                                     [--access-token-lifetime SECONDS] [--code-lifetime SECONDS]
                                     [--refresh-grace SECONDS] [--log-level LEVEL]
                                     [--tls-cert PEM --tls-key PEM]
                                     [--send-cooldown SECONDS] [--contact-max-sends N]
                                     [--contact-window SECONDS] [--account-max-sends N]
                                     [--account-window SECONDS] [--prune-interval SECONDS]
                                     [--prune-retention SECONDS]
                                     [--store sqlite|postgres://USER@HOST:PORT/DATABASE]

        Serves the RainWallet authority (accounts, login codes, wallets, session tokens) on TCP.
        Device daemons use it with `rainwalletd --authority HOST:PORT`.

          --listen HOST:PORT              address to serve: loopback (127.0.0.1:7420, [::1]:7420,
                                          localhost:7420), or with TLS any IP address (0.0.0.0:7420)
          --tls-cert PEM                  serve TLS 1.3 only, with this certificate chain (server first)
          --tls-key PEM                   the certificate's private key (mode 0600, owned by this user)
          --state-dir DIR                 authority.key, authority.sqlite3, outbox.jsonl
          --dev-outbox                    serve the development outbox RPC (codes in clear: development only)
          --access-token-lifetime SECONDS access token lifetime (default 900)
          --code-lifetime SECONDS         login code lifetime (default 300)
          --refresh-grace SECONDS         window in which a repeated refresh gets the same pair (default 10)
          --log-level LEVEL               debug, info, warning or error (default info)
          --send-cooldown SECONDS         least time between two codes to one contact (default 30)
          --contact-max-sends N           most codes to one contact per contact window (default 5)
          --contact-window SECONDS        the contact window (default 900)
          --account-max-sends N           most codes for one account per account window (default 10)
          --account-window SECONDS        the account window (default 3600)
          --prune-interval SECONDS        how often old codes, sessions and outbox lines are deleted
                                          (default 600)
          --prune-retention SECONDS       how long they are kept once expired or revoked (default 86400)
          --store STORE                   sqlite (default: authority.sqlite3 in the state directory) or a
                                          PostgreSQL URL shared by several authority instances (they must
                                          share authority.key too)
        """

    struct Options {
        var listen: String?
        var stateDirectory: String?
        var settings = AuthoritySettings(isDevOutboxEnabled: false)
        var logLevel = LogLevel.info
        var tlsCertificate: String?
        var tlsKey: String?
        /// nil or "sqlite": the state directory's SQLite file; else a PostgreSQL URL.
        var store: String?
    }

    static func parse(_ args: [String]) throws(RainError) -> Options? {
        var o = Options()
        var flags = FlagReader(args)
        while let a = flags.next() {
            switch a {
            case "-h", "--help": return nil
            case "--listen": o.listen = try flags.value(of: a)
            case "--state-dir": o.stateDirectory = try flags.value(of: a)
            case "--dev-outbox": o.settings.isDevOutboxEnabled = true
            case "--access-token-lifetime": o.settings.accessTokenLifetime = try flags.seconds(of: a, min: 2, max: 86400)
            case "--code-lifetime": o.settings.codeLifetime = try flags.seconds(of: a, min: 1, max: 3600)
            case "--refresh-grace": o.settings.refreshGraceWindow = try flags.seconds(of: a, min: 0, max: 600)
            case "--log-level": o.logLevel = try flags.logLevel(of: a)
            case "--tls-cert": o.tlsCertificate = try flags.value(of: a)
            case "--tls-key": o.tlsKey = try flags.value(of: a)
            case "--send-cooldown": o.settings.sendLimits.contactCooldown = try flags.seconds(of: a, min: 0, max: 3600)
            case "--contact-max-sends": o.settings.sendLimits.contactMaxSends = try flags.integer(of: a, min: 1, max: 1_000_000)
            case "--contact-window": o.settings.sendLimits.contactWindow = try flags.seconds(of: a, min: 1, max: 86400)
            case "--account-max-sends": o.settings.sendLimits.accountMaxSends = try flags.integer(of: a, min: 1, max: 1_000_000)
            case "--account-window": o.settings.sendLimits.accountWindow = try flags.seconds(of: a, min: 1, max: 86400)
            case "--prune-interval": o.settings.pruneInterval = try flags.seconds(of: a, min: 1, max: 86400)
            case "--prune-retention": o.settings.pruneRetention = try flags.seconds(of: a, min: 1, max: 31_536_000)
            case "--store": o.store = try flags.value(of: a)
            default: throw RainError.invalid("unknown argument \(a); see rainwalletd authority --help", field: a)
            }
        }
        guard o.listen != nil else { throw RainError.invalid("--listen HOST:PORT is required", field: "--listen") }
        guard o.stateDirectory != nil else { throw RainError.invalid("--state-dir DIR is required", field: "--state-dir") }
        guard (o.tlsCertificate == nil) == (o.tlsKey == nil) else {
            throw RainError.invalid("--tls-cert and --tls-key go together", field: o.tlsKey == nil ? "--tls-key" : "--tls-cert")
        }
        if let store = o.store, store != "sqlite", !store.hasPrefix("postgres://"), !store.hasPrefix("postgresql://") {
            throw RainError.invalid("--store takes sqlite or postgres://USER@HOST:PORT/DATABASE", field: "--store")
        }
        return o
    }

    static func main(_ args: [String]) -> Int32 {
        let options: Options
        do {
            guard let parsed = try parse(args) else {
                print(usage)
                return 0
            }
            options = parsed
        } catch {
            Daemon.writeStderr("rainwalletd authority: error: \(error.code): \(error.message)\n")
            return 64
        }
        let logger = Logger(label: "rainwalletd-authority", minimumLevel: options.logLevel)
        do {
            try run(options, logger: logger)
            return 0
        } catch {
            logger.error("authority.failed", ["code": error.code.description, "error": error.message])
            Daemon.writeStderr("rainwalletd authority: error: \(error.code): \(error.message)\n")
            return error.code == .invalidArgument ? 78 : 1
        }
    }

    static func run(_ options: Options, logger: Logger) throws(RainError) {
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
        try AtomicFile.makeDirectory(stateDirectory, mode: 0o700)
        let settings = options.settings
        let storeURL = options.store.flatMap { $0 == "sqlite" ? nil : $0 }
        let authority = try Daemon.blockingAwait { () async throws(RainError) -> EmbeddedAuthority in
            let store: (any AuthorityStore)? =
                if let storeURL { try await PostgresAuthorityStore.open(url: storeURL) } else { nil }
            return try await EmbeddedAuthority(
                stateDirectory: stateDirectory, settings: settings, clock: SystemClock(), store: store,
                logger: logger.child("authority"))
        }
        let service = AuthorityService(
            authority: authority, isDevOutboxEnabled: settings.isDevOutboxEnabled, version: daemonVersion,
            logger: logger.child("service"))
        let fd = try TCPSocket.listen(address)
        let port = (try? TCPSocket.localPort(of: fd)) ?? address.port
        var serverOptions = ServerOptions()
        serverOptions.isTCP = true
        serverOptions.tls = tls
        let server = try EventLoopServer(listeningSocket: fd, options: serverOptions, handler: service, logger: logger.child("loop"))
        let sources = Daemon.stopOnSignals(server, drainTimeout: .seconds(10), logger: logger)
        let pruning = PeriodicPruning(authority: authority, interval: settings.pruneInterval)
        pruning.start()
        logger.info(
            "authority.ready",
            [
                "version": daemonVersion, "listen": "\(address.withPort(port))", "port": "\(port)", "state": stateDirectory,
                "store": (authority.store as? PostgresAuthorityStore).map { "postgres:\($0.target)" } ?? "sqlite",
                "pid": "\(getpid())", "devOutbox": settings.isDevOutboxEnabled ? "true" : "false",
                "accessTokenLifetime": "\(settings.accessTokenLifetime.timeInterval)", "tls": tls == nil ? "false" : "true",
            ])
        server.run()
        pruning.stop()
        for s in sources { s.cancel() }
        logger.info("authority.stopped")
    }
}
