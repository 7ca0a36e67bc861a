import Foundation
import RainConfig
import RainCore
import RainTestSupport
import RainTransport
import RainWire
import Synchronization
import Testing

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
}

/// Account/Get and Wallet/Get take the direct path (the authority's reader thread, no session
/// actor) while the profile has a live session, and fall back to the actor for everything else.
@Suite struct DirectReadPathTests {
    static func serve(_ f: SchedulerFixture, _ body: (ClientConnection) async throws -> Void) async throws {
        let served = try ServedHandler(f.service, directory: f.dir.path, logger: f.logger)
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

    static func account(_ c: ClientConnection) async throws -> AccountResponse {
        try AccountResponse.decode(try await c.call(method: Method.accountGet, payload: try GetAccountRequest().encode()))
    }

    static func wallet(_ c: ClientConnection) async throws -> WalletResponse {
        try WalletResponse.decode(try await c.call(method: Method.walletGet, payload: try GetWalletRequest().encode()))
    }

    @Test func liveSessionReadsTakeTheDirectPathAndAnswerWhatTheActorAnswers() async throws {
        let f = try await SchedulerFixture(directReads: true)
        try await f.login()
        try await Self.serve(f) { c in
            let account = try await Self.account(c)
            let wallet = try await Self.wallet(c)
            #expect(f.authority.directCalls == 2)
            #expect(f.authority.readCalls == 0, "the session actor was not involved")
            #expect(account == (try await f.session.account()))
            #expect(wallet == (try await f.session.wallet()))
            #expect(f.authority.readCalls == 2)
        }
    }

    @Test func aFailedDirectReadFallsBackToTheActorWhichRetries() async throws {
        let f = try await SchedulerFixture(directReads: true)
        try await f.login()
        f.authority.failNextDirectReads(2)
        try await Self.serve(f) { c in
            let account = try await Self.account(c)
            let wallet = try await Self.wallet(c)
            #expect(account.walletID == wallet.walletID)
            #expect(f.authority.directCalls == 2)
            #expect(f.authority.readCalls == 2, "each failed direct read went through the actor once")
        }
    }

    @Test func aSessionRevokedElsewhereEndsThroughTheFallbackWithRAIN201() async throws {
        let f = try await SchedulerFixture(directReads: true)
        try await f.login()
        try await f.loginOnAnotherDevice()
        try await Self.serve(f) { c in
            let error = await #expect(throws: RainError.self) { _ = try await Self.account(c) }
            #expect(error?.code == .sessionExpired)
            #expect(f.authority.directCalls == 1)
            #expect(f.runtime.snapshot().authState == .unauthenticated)
            #expect(f.runtime.liveAccessToken() == nil)
            // With no session left, the next read skips the direct path.
            _ = await #expect(throws: RainError.self) { _ = try await Self.wallet(c) }
            #expect(f.authority.directCalls == 1)
        }
    }

    @Test func withoutALiveTokenTheDirectPathIsSkipped() async throws {
        let f = try await SchedulerFixture(directReads: true)
        try await Self.serve(f) { c in
            let error = await #expect(throws: RainError.self) { _ = try await Self.account(c) }
            #expect(error?.code == .sessionExpired)
            #expect(f.authority.directCalls == 0)
        }
    }

    @Test func theRuntimeOffersTheTokenOnlyWhileTheSessionIsRestoredPublishedAndUnexpired() {
        let clock = ManualClock()
        let runtime = ProfileRuntime(name: "default", settings: ProfileSettings(appID: "default"), clock: clock)
        #expect(runtime.liveAccessToken() == nil, "still restoring")
        runtime.publish(session: nil)
        #expect(runtime.liveAccessToken() == nil, "no session")
        let session = StoredSession(
            accountID: "acc_1", walletID: "wal_1", accessToken: "access-1", refreshToken: "refresh-1",
            expiresAt: clock.now.addingTimeInterval(60), lifetimeSeconds: 60, contact: .email("user@example.com"))
        runtime.publish(session: session)
        #expect(runtime.liveAccessToken() == "access-1")
        clock.advance(by: .seconds(59))
        #expect(runtime.liveAccessToken() == "access-1")
        clock.advance(by: .seconds(1))
        #expect(runtime.liveAccessToken() == nil, "expired: the actor refreshes first")
        runtime.publish(session: session, expiry: nil)
        runtime.publish(session: nil, expiry: .refreshFailed)
        #expect(runtime.liveAccessToken() == nil, "ended")
    }
}
