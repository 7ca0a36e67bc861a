import FoundationEssentials
import Glibc
import RainCore
import RainSystem
import RainTransport

/// The daemon's metrics server and where it listens: `GET /metrics` (the registry in the
/// Prometheus text format) and `GET /healthz` (the health check's report, 200 or 503).
struct MetricsEndpoint: Sendable {
    /// The server, started by the role once it serves.
    let server: MetricsHTTPServer
    /// Where it listens, for the ready log line (`127.0.0.1:9420`, or the socket's path).
    let address: String
    /// The TCP port (the one picked for port 0); nil on a Unix socket.
    let port: UInt16?

    /// Listens on the loopback `address` (`rainwalletd authority --metrics-listen`).
    /// - Throws: RAIN_102 (field `--metrics-listen`) when the address is in use; RAIN_502 when
    ///   another socket call fails.
    static func listen(
        _ address: TCPAddress, registry: MetricsRegistry, health: @escaping @Sendable () -> AuthorityHealth.Report,
        logger: Logger
    ) throws(RainError) -> MetricsEndpoint {
        let fd: Int32
        do {
            fd = try TCPSocket.listen(address, backlog: 64)
        } catch {
            var error = error
            if error.details.field == "listen" { error.details.field = "--metrics-listen" }
            throw error
        }
        let port = (try? TCPSocket.localPort(of: fd)) ?? address.port
        let server = MetricsHTTPServer(
            listeningSocket: fd, logger: logger, handler: handler(registry: registry, health: health))
        return MetricsEndpoint(server: server, address: "\(address.withPort(port))", port: port)
    }

    /// Listens on a Unix socket at `path`, mode 0600: a device daemon's metrics are its user's
    /// (any uid reaches a loopback TCP port).
    /// - Throws: RAIN_102 when another daemon serves the path; RAIN_502 when a socket call fails.
    static func listen(
        unixPath path: String, registry: MetricsRegistry, health: @escaping @Sendable () -> AuthorityHealth.Report,
        logger: Logger
    ) throws(RainError) -> MetricsEndpoint {
        let fd = try UnixSocket.listen(path: path, mode: 0o600, backlog: 64)
        let server = MetricsHTTPServer(
            listeningSocket: fd, logger: logger, handler: handler(registry: registry, health: health))
        return MetricsEndpoint(server: server, address: path, port: nil)
    }

    /// Answers the two paths; anything else is 404.
    static func handler(
        registry: MetricsRegistry, health: @escaping @Sendable () -> AuthorityHealth.Report
    ) -> MetricsHTTPServer.Handler {
        { path in
            switch path {
            case "/metrics":
                return HTTPAnswer(status: 200, contentType: MetricsRegistry.contentType, body: registry.exposition())
            case "/healthz":
                let report = health()
                return HTTPAnswer(
                    status: report.isHealthy ? 200 : 503, contentType: "application/json", body: report.json)
            default:
                return HTTPAnswer(status: 404, body: "not found: GET /metrics or /healthz\n")
            }
        }
    }
}
