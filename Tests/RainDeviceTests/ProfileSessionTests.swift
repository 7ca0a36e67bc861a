import Foundation
import RainAuthority
import RainAuthorityAPI
import RainConfig
import RainCore
import RainCrypto
import RainTestSupport
import RainTransport
import RainWire
import Synchronization
import Testing

@testable import RainDevice
import RainKeyStore

/// Storage whose loads wait until released (a slow disk at start-up).
actor GatedStorage: SecureStorage {
    private var released = false
    private let inner = InMemoryStorage()
    func release() { released = true }
    func load(profile: String) async -> StoredSession? {
        while !released { try? await Task.sleep(for: .milliseconds(5)) }
        return await inner.load(profile: profile)
    }
    func save(_ session: StoredSession, profile: String) async throws(RainError) {
        try await inner.save(session, profile: profile)
    }
    func delete(profile: String) async throws(RainError) { try await inner.delete(profile: profile) }
    func storedProfiles() async -> [String] { await inner.storedProfiles() }
}

/// Collects the events a watcher receives.
final class EventCollector: Sendable {
    let events = Mutex<[WatchEvent]>([])
    var send: @Sendable ([UInt8]) -> Void {
        { bytes in
            if let e = try? WatchEvent.decode(bytes) { self.events.withLock { $0.append(e) } }
        }
    }
    var all: [WatchEvent] { events.withLock { $0 } }
}

/// A device identity with a fresh signing key.
func testDevice(id: String = "dev_test1") throws -> DeviceIdentity {
    DeviceIdentity(id: id, signer: SoftwareDeviceSigner(try Ed25519PrivateKey()))
}

struct Fixture {
    let dir = TempDir()
    let clock = ManualClock()
    let sender = CapturingCodeSender()
    let authority: EmbeddedAuthority
    let service: DeviceService

    init(
        storage: any SecureStorage = InMemoryStorage(), config: DaemonConfig = DaemonConfig(),
        settings: AuthoritySettings = AuthoritySettings(sendLimits: .unlimited)
    ) async throws {
        let logger = Logger(label: "test", sink: CapturingLogSink())
        authority = try await EmbeddedAuthority(
            stateDirectory: dir.path, settings: settings, clock: clock, sender: sender, logger: logger)
        service = DeviceService(
            config: config,
            context: DeviceContext(authority: authority, storage: storage, clock: clock, device: try testDevice(), logger: logger)
        )
    }

    func login(_ profile: String = "default", contact: RainWalletContact = .email("user@example.com")) async throws
        -> ConfirmLoginCodeResponse
    {
        let s = service.session(profile: profile)
        _ = try await s.sendLoginCode(contact)
        return try await s.confirmLoginCode(try #require(sender.lastCode))
    }
}

@Suite struct ProfileSessionTests {
    @Test func loginPublishesAnActiveSession() async throws {
        let f = try await Fixture()
        let r = try await f.login()
        #expect(r.isAccountCreated)
        let snap = f.service.entry("default").runtime.snapshot()
        #expect(snap.authState == .authenticated)
        #expect(snap.sessionState == .active(expiresAt: f.clock.now.adding(.seconds(900))))
        #expect(snap.hasActiveSession)
        #expect(snap.contact == .email("user@example.com"))
    }

    @Test func hasActiveSessionNeedsMoreThanThirtySecondsLeft() async throws {
        let f = try await Fixture()
        _ = try await f.login()
        let runtime = f.service.entry("default").runtime
        f.clock.advance(by: .seconds(900 - 31))
        #expect(runtime.snapshot().hasActiveSession)
        f.clock.advance(by: .seconds(1))  // exactly 30 s left
        #expect(!runtime.snapshot().hasActiveSession)
        #expect(runtime.snapshot().authState == .authenticated)
    }

    @Test func thresholdIsClampedToHalfAShortLifetime() async throws {
        var settings = AuthoritySettings(sendLimits: .unlimited)
        settings.accessTokenLifetime = .seconds(20)
        let f = try await Fixture(settings: settings)
        _ = try await f.login()
        let runtime = f.service.entry("default").runtime
        f.clock.advance(by: .seconds(9))  // 11 s left > 10 s (half of 20)
        #expect(runtime.snapshot().hasActiveSession)
        f.clock.advance(by: .seconds(1))
        #expect(!runtime.snapshot().hasActiveSession)
    }

    @Test func sessionReadsExpiredAtItsExpiry() async throws {
        let f = try await Fixture()
        _ = try await f.login()
        let runtime = f.service.entry("default").runtime
        f.clock.advance(by: .seconds(900))
        let snap = runtime.snapshot()
        #expect(snap.sessionState == .expired)
        #expect(snap.authState == .unauthenticated)
        #expect(!snap.hasActiveSession)
    }

    @Test func confirmWithoutPendingCodeIsRefused() async throws {
        let f = try await Fixture()
        let error = await #expect(throws: RainError.self) {
            try await f.service.session(profile: "default").confirmLoginCode("123456")
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "no_pending_code")
    }

    @Test(arguments: ["12345", "1234567", "12a456", ""])
    func malformedCodeIsRefusedWithoutUsingAnAttempt(code: String) async throws {
        let f = try await Fixture()
        let s = f.service.session(profile: "default")
        _ = try await s.sendLoginCode(.email("user@example.com"))
        let error = await #expect(throws: RainError.self) { try await s.confirmLoginCode(code) }
        #expect(error?.code == .invalidArgument)
        // Three real attempts remain: two wrong codes still leave one.
        let good = try #require(f.sender.lastCode)
        let wrong = good == "000000" ? "111111" : "000000"
        let w = await #expect(throws: RainError.self) { try await s.confirmLoginCode(wrong) }
        #expect(w?.details.attemptsRemaining == 2)
    }

    @Test func invalidContactIsRefusedBeforeTheAuthority() async throws {
        let f = try await Fixture()
        let s = f.service.session(profile: "default")
        let error = await #expect(throws: RainError.self) { try await s.sendLoginCode(.phone("+44 (0)20 7946 0958")) }
        #expect(error?.code == .invalidArgument)
        #expect(f.sender.deliveries.isEmpty)
    }

    @Test func switchingContactRetiresThePendingCode() async throws {
        let f = try await Fixture()
        let s = f.service.session(profile: "default")
        _ = try await s.sendLoginCode(.email("first@example.com"))
        let first = try #require(f.sender.lastCode)
        _ = try await s.sendLoginCode(.email("second@example.com"))
        let second = try #require(f.sender.lastCode)
        if first != second {
            // The profile now confirms against the second challenge only.
            await #expect(throws: RainError.self) { try await s.confirmLoginCode(first) }
        }
        let r = try await s.confirmLoginCode(second)
        #expect(r.session.contact == .email("second@example.com"))
    }

    @Test func awaitRestoreTimesOutWithLoading() async throws {
        let storage = GatedStorage()
        let f = try await Fixture(storage: storage)
        let entry = f.service.entry("default")
        // The timeout runs on the injected clock.
        let waiting = Task { await DeviceService.awaitRestore(entry, timeout: .milliseconds(100)) }
        await eventually("waiting for the restore") {
            entry.runtime.restoreWaiterCount == 1 && f.clock.pendingTimerCount == 1
        }
        f.clock.advance(by: .milliseconds(100))
        let snap = await waiting.value
        #expect(snap.authState == .loading)
        await storage.release()
        let after = await DeviceService.awaitRestore(entry, timeout: .seconds(10))
        #expect(after.authState == .unauthenticated)
    }

    @Test func restoreLoadsTheStoredSession() async throws {
        let storage = InMemoryStorage()
        let f = try await Fixture(storage: storage)
        let r = try await f.login()
        // A second service on the same storage (a restarted daemon) restores the session.
        let logger = Logger(label: "test", sink: CapturingLogSink())
        let again = DeviceService(
            config: DaemonConfig(),
            context: DeviceContext(
                authority: f.authority, storage: storage, clock: f.clock, device: try testDevice(), logger: logger))
        await again.restoreStoredProfiles()
        let snap = again.entry("default").runtime.snapshot()
        #expect(snap.authState == .authenticated)
        #expect(snap.accountID == r.session.accountID)
    }

    @Test func watchersGetTheCurrentStateFirstThenChangesAndLogoutFiresNoExpiry() async throws {
        let f = try await Fixture()
        let entry = f.service.entry("default")
        await entry.session.restore()
        let watchers = (0..<5).map { _ in EventCollector() }
        for (i, w) in watchers.enumerated() {
            entry.runtime.addWatcher(connection: ConnectionID(rawValue: 100), requestID: UInt64(i + 1), send: w.send)
        }
        _ = try await f.login()
        _ = try await entry.session.logout()
        for w in watchers {
            let events = w.all
            #expect(events.map(\.sequence) == Array(1...UInt64(events.count)))
            #expect(events.first?.kind == .authState)
            #expect(events.first?.state.authState == .unauthenticated)
            #expect(
                events.filter { $0.kind == .authState }.map(\.state.authState) == [
                    .unauthenticated, .authenticated, .unauthenticated,
                ])
            #expect(!events.contains { $0.kind == .sessionExpired })
        }
        entry.runtime.removeWatchers(connection: ConnectionID(rawValue: 100))
        #expect(entry.runtime.watcherCount == 0)
    }

    @Test func logoutWipesLocallyEvenWhenTheAuthorityFails() async throws {
        let storage = InMemoryStorage()
        let f = try await Fixture(storage: storage)
        _ = try await f.login()
        await f.authority.store.close()  // the authority can no longer answer
        let r = try await f.service.session(profile: "default").logout()
        #expect(r.hadSession)
        #expect(!r.isRevokedAtAuthority)
        #expect(await storage.load(profile: "default") == nil)
        #expect(f.service.entry("default").runtime.snapshot().authState == .unauthenticated)
    }

    @Test func profilesAreIndependent() async throws {
        let f = try await Fixture()
        _ = try await f.login("alpha")
        #expect(f.service.entry("alpha").runtime.snapshot().authState == .authenticated)
        await f.service.entry("beta").session.restore()
        #expect(f.service.entry("beta").runtime.snapshot().authState == .unauthenticated)
    }
}
