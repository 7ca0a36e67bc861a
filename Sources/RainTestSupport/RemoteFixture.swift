import Foundation
import RainAuthority
import RainAuthorityAPI
import RainAuthorityServer
import RainCore
import RainCrypto
import RainStore
import RainSystem
import RainTransport
import RainWire
import Synchronization

/// An `EventLoopServer` on a loopback TCP port, serving `handler`, with its loop on a thread.
package final class RunningTCPServer: Sendable {
    package let server: EventLoopServer
    package let port: UInt16
    private let isFinished = Mutex(false)

    /// A server on a free port below the kernel's ephemeral range (`ip_local_port_range`, 32768 up
    /// here), for tests that stop it and listen on its port again: an ephemeral port, once freed,
    /// can become the local port of any test's outgoing connection in the meantime, and the second
    /// listen then failed with "address already in use" (seen once in the parallel unit stage).
    /// Ports below the range are never given to outgoing connections.
    package static func belowEphemeralPorts(
        handler: any ServerHandler, tls: TLSContext? = nil, logger: Logger
    ) throws -> RunningTCPServer {
        var lastError: RainError?
        for _ in 0..<100 {
            do {
                return try RunningTCPServer(handler: handler, port: UInt16.random(in: 20_000...32_000), tls: tls, logger: logger)
            } catch let error as RainError where (error.underlying as? ErrnoError)?.code == EADDRINUSE {
                lastError = error  // another test's port: draw again
            }
        }
        throw lastError ?? RainError(.internalError, "no free port below the ephemeral range")
    }

    /// Listens on `host`:`port` (0: an ephemeral port) and starts the loop; with `tls`, serves TLS.
    package init(
        handler: any ServerHandler, port: UInt16 = 0, host: String = "127.0.0.1", tls: TLSContext? = nil,
        handshakeTimeout: Duration = .seconds(10), logger: Logger
    ) throws {
        let address = try TCPAddress(parsing: "\(host):\(port)", field: "listen", allowsNonLoopback: tls != nil)
        let fd = try TCPSocket.listen(address)
        self.port = try TCPSocket.localPort(of: fd)
        var options = ServerOptions()
        options.isTCP = true
        options.tls = tls
        options.tlsHandshakeTimeout = handshakeTimeout
        server = try EventLoopServer(listeningSocket: fd, options: options, handler: handler, logger: logger)
        let thread = Thread { [self] in
            server.run()
            isFinished.withLock { $0 = true }
        }
        thread.name = "test.authority.loop"
        thread.start()
    }

    /// `127.0.0.1:PORT`.
    package var address: String { "127.0.0.1:\(port)" }

    /// Stops the loop and waits until it has returned (its listening socket and connections closed);
    /// throws when it did not return within 10 s.
    package func stop() async throws {
        server.stop(drainTimeout: .milliseconds(200))
        let deadline = ContinuousClock.now + .seconds(10)
        while !isFinished.withLock({ $0 }) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        guard isFinished.withLock({ $0 }) else { throw HarnessError("the server loop did not stop") }
    }
}

/// An embedded authority (SQLite in a temp directory, manual clock, capturing sender) served by an
/// `AuthorityService` on 127.0.0.1, and a `RemoteAuthority` that calls it.
package struct RemoteFixture {
    package let directory: String
    package let clock: ManualClock
    package let sender: CapturingCodeSender
    package let store: SQLiteAuthorityStore
    package let embedded: EmbeddedAuthority
    package let service: AuthorityService
    package let server: RunningTCPServer
    package let remote: RemoteAuthority
    package let logSink: CapturingLogSink
    package let logger: Logger

    package static let app = "app-one"
    package static let device = "device-a"
    package static let email = RainWalletContact.email("user@example.com")

    /// Runs `body` with a fresh fixture and tears everything down afterwards.
    /// - Parameter withOutbox: deliver codes to an outbox file (so `listOutbox` has entries) instead
    ///   of the capturing sender.
    package static func with(
        isDevOutboxEnabled: Bool = false, withOutbox: Bool = false, callTimeout: Duration = .seconds(20),
        serverTLS: TLSContext? = nil, clientTLS: TLSContext? = nil, sendLimits: CodeSendLimits = .unlimited,
        _ body: (RemoteFixture) async throws -> Void
    ) async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sink = CapturingLogSink()
        let logger = Logger(label: "test", minimumLevel: .debug, sink: sink)
        let clock = ManualClock()
        let sender = CapturingCodeSender()
        let store = try await SQLiteAuthorityStore.open(stateDirectory: directory)
        let keys = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 9, count: 32)))
        let outbox = withOutbox ? OutboxCodeSender(stateDirectory: directory, logger: logger.child("outbox")) : nil
        let embedded = EmbeddedAuthority(
            store: store, keys: keys, settings: AuthoritySettings(isDevOutboxEnabled: true, sendLimits: sendLimits), clock: clock,
            sender: outbox ?? sender, outbox: outbox, logger: logger.child("authority"))
        let service = AuthorityService(
            authority: embedded, isDevOutboxEnabled: isDevOutboxEnabled, version: "test", logger: logger.child("service"),
            revocations: embedded.revocations)
        let server = try RunningTCPServer.belowEphemeralPorts(handler: service, tls: serverTLS, logger: logger.child("loop"))
        let remote = try RemoteAuthority(
            address: server.address, tls: clientTLS, device: FixtureDevice.keys, connectTimeout: .seconds(2),
            deadlines: AuthorityDeadlines(read: callTimeout, send: callTimeout, refresh: callTimeout),
            logger: logger.child("remote"))
        let fixture = RemoteFixture(
            directory: directory, clock: clock, sender: sender, store: store, embedded: embedded, service: service,
            server: server, remote: remote, logSink: sink, logger: logger)
        do {
            try await body(fixture)
        } catch {
            remote.close()
            try? await server.stop()
            await store.close()
            throw error
        }
        remote.close()
        try await server.stop()
        await store.close()
    }

    /// Sends a code through the remote authority; returns the challenge and the delivered code.
    package func send(
        _ contact: RainWalletContact = RemoteFixture.email, device: String = RemoteFixture.device,
        via authority: (any Authority)? = nil
    ) async throws -> (challenge: SendCodeResult, code: String) {
        let result = try await (authority ?? remote).sendLoginCode(
            SendCodeRequest(appID: Self.app, deviceID: device, contact: contact))
        return (result, try sender.lastCode(to: contact))
    }

    /// Sends and confirms through the remote authority, binding the session to `key`.
    package func login(
        _ contact: RainWalletContact = RemoteFixture.email, device: String = RemoteFixture.device,
        key: Ed25519PrivateKey? = FixtureDevice.key, via authority: (any Authority)? = nil
    ) async throws -> LoginResult {
        let (challenge, code) = try await send(contact, device: device, via: authority)
        return try await (authority ?? remote).confirmLoginCode(
            ConfirmCodeRequest(
                appID: Self.app, deviceID: device, challengeID: challenge.challengeID, code: code,
                devicePublicKey: key?.publicKey.rawRepresentation ?? []))
    }
}

// The passkey requests of the fixture's app and device, for the ceremonies run across the wire.
extension RemoteFixture {
    /// The origin the fixture's passkey requests allow.
    package static let passkeyOrigin = "https://example.com"

    package static func passkeyBegin(accessToken: String? = nil) -> PasskeyBeginRequest {
        PasskeyBeginRequest(
            appID: app, deviceID: device, rpID: "example.com", origins: [passkeyOrigin], accessToken: accessToken)
    }

    package static func passkeyFinish(_ ceremony: PasskeyCeremony, _ response: String, key: Ed25519PrivateKey)
        -> PasskeyFinishRequest
    {
        PasskeyFinishRequest(
            appID: app, deviceID: device, ceremonyID: ceremony.ceremonyID, responseJSON: response,
            devicePublicKey: key.publicKey.rawRepresentation)
    }
}
