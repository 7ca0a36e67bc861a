import Foundation
import RainAuthorityAPI
import RainConfig
import RainCore
import RainTestSupport
import Testing

@testable import RainDevice

/// Storage whose deletes wait until released (a slow disk while a session ends).
actor SlowDeleteStorage: SecureStorage {
    private let inner = InMemoryStorage()
    private var released = false
    private(set) var deletesStarted = 0
    func release() { released = true }
    func load(profile: String) async -> StoredSession? { await inner.load(profile: profile) }
    func save(_ session: StoredSession, profile: String) async throws(RainError) {
        try await inner.save(session, profile: profile)
    }
    func delete(profile: String) async throws(RainError) {
        deletesStarted += 1
        while !released { try? await Task.sleep(for: .milliseconds(2)) }
        try await inner.delete(profile: profile)
    }
    func storedProfiles() async -> [String] { await inner.storedProfiles() }
}

/// Why a call fails while its session is ending: the end's reason, never "no session; log in
/// first" (`no_session`, which means never logged in or logged out). Found end to end: a copied
/// state directory's first `account` raced the daemon's own liveness check, and one of the two
/// calls reported `no_session` while the other ended the session (`CopiedStateTests`).
@Suite struct SessionEndingTests {
    @Test func aCallWhileTheSessionIsBeingWipedGetsTheReasonItEnded() async throws {
        let f = try await Fixture()
        let storage = SlowDeleteStorage()
        // Tokens the authority never issued: the refresh is refused and ends the session.
        let unknown = StoredSession(
            accountID: "acct_gone", walletID: "wal_gone", accessToken: "at_unknown", refreshToken: "rt_unknown",
            expiresAt: f.clock.now.adding(.seconds(900)), lifetimeSeconds: 900, contact: .email("user@example.com"))
        try await storage.save(unknown, profile: "default")
        let runtime = ProfileRuntime(name: "default", settings: DaemonConfig().settings(for: "default"), clock: f.clock)
        let session = ProfileSession(
            runtime: runtime,
            context: DeviceContext(
                authority: f.authority, storage: storage, clock: f.clock, device: try testDevice(),
                logger: Logger(label: "test", sink: CapturingLogSink())))
        await session.restore()
        #expect(await session.phase == .authenticated)

        let ending = Task { () -> RainError? in
            do throws(RainError) {
                _ = try await session.refreshSession()
                return nil
            } catch {
                return error
            }
        }
        // The refusal ended the session, whose file is being deleted now.
        let deadline = ContinuousClock.now + .seconds(10)
        while await storage.deletesStarted == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(await storage.deletesStarted == 1)
        let meanwhile = await #expect(throws: RainError.self) { try await session.refreshSession() }
        #expect(meanwhile?.code == .sessionExpired)
        #expect(meanwhile?.details.reason == SessionEndReason.refreshFailed.rawValue, "\(String(describing: meanwhile))")

        await storage.release()
        let first = await ending.value
        #expect(first?.details.reason == SessionEndReason.refreshFailed.rawValue, "\(String(describing: first))")
        let after = await #expect(throws: RainError.self) { try await session.refreshSession() }
        #expect(after?.details.reason == SessionEndReason.refreshFailed.rawValue)
    }
}
