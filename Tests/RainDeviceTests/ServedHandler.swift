import Foundation
import RainCore
import RainTestSupport
import RainTransport
import RainWire
import Synchronization

@testable import RainDevice

/// A handler (a `DeviceService`, a test's route table) served by a real `EventLoopServer` on a Unix
/// socket, its loop on a thread.
final class ServedHandler: Sendable {
    let server: EventLoopServer
    let socketPath: String
    private let isFinished = Mutex(false)

    init(_ handler: any ServerHandler, directory: String, logger: Logger) throws {
        socketPath = directory + "/s.sock"
        let fd = try UnixSocket.listen(path: socketPath, mode: 0o600)
        // Not a test of admission: with the whole suite on two busy cores a first request can leave
        // more than the default 10 s after its connection, which the server would then close.
        var options = ServerOptions()
        options.admissionTimeout = .seconds(120)
        server = try EventLoopServer(listeningSocket: fd, options: options, handler: handler, logger: logger)
        let thread = Thread { [self] in
            server.run()
            isFinished.withLock { $0 = true }
        }
        thread.name = "test.served.loop"
        thread.start()
    }

    func stop() async {
        server.stop(drainTimeout: .milliseconds(200))
        let deadline = ContinuousClock.now + .seconds(10)
        while !isFinished.withLock({ $0 }) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Serves the fixture's `DeviceService` for `body`, which gets a connection to it.
    static func serve(_ f: SchedulerFixture, _ body: (ClientConnection) async throws -> Void) async throws {
        try await serve(f.service, directory: f.dir.path, logger: f.logger, body)
    }

    /// Serves `handler` for `body`, which gets a connection to it; stopped however `body` ends.
    static func serve(
        _ handler: any ServerHandler, directory: String, logger: Logger, _ body: (ClientConnection) async throws -> Void
    ) async throws {
        let served = try ServedHandler(handler, directory: directory, logger: logger)
        let connection = try ClientConnection(path: served.socketPath)
        do {
            try await body(connection)
        } catch {
            connection.close()
            await served.stop()
            throw error
        }
        connection.close()
        await served.stop()
    }

    /// Account/Get over `c`.
    static func account(_ c: ClientConnection) async throws -> AccountResponse {
        try AccountResponse.decode(try await c.call(method: Method.accountGet, payload: try GetAccountRequest().encode()))
    }

    /// Wallet/Get over `c`.
    static func wallet(_ c: ClientConnection) async throws -> WalletResponse {
        try WalletResponse.decode(try await c.call(method: Method.walletGet, payload: try GetWalletRequest().encode()))
    }
}
