import Foundation
import RainAuthority
import RainAuthorityAPI
import RainConfig
import RainCore
import RainStore
import RainTestSupport
import RainWire
import Synchronization
import Testing

@testable import RainDevice

/// Storage on a disk that can fill up: while `isFull`, every save fails as a full disk does
/// (`EncryptedFileStorage` reports ENOSPC from its atomic write as RAIN_502) and changes nothing.
actor FillableStorage: SecureStorage {
    private let inner = InMemoryStorage()
    private(set) var isFull = false
    private(set) var failedSaves = 0
    func setFull(_ full: Bool) { isFull = full }
    func load(profile: String) async -> StoredSession? { await inner.load(profile: profile) }
    func save(_ session: StoredSession, profile: String) async throws(RainError) {
        guard !isFull else {
            failedSaves += 1
            throw RainError(
                .internalError, "write /state/sessions/\(profile).session.tmp: No space left on device (ENOSPC)")
        }
        try await inner.save(session, profile: profile)
    }
    func delete(profile: String) async throws(RainError) { try await inner.delete(profile: profile) }
    func storedProfiles() async -> [String] { await inner.storedProfiles() }
}

/// A refresh whose new tokens cannot be saved is reported, the tokens are not
/// used until saved, the save is retried, and a restart with the previous tokens recovers.
@Suite struct SessionPersistenceTests {
    struct Setup {
        let fixture: Fixture
        let storage: FillableStorage
        let sink: CapturingLogSink

        init() async throws {
            storage = FillableStorage()
            fixture = try await Fixture(storage: storage)
            sink = CapturingLogSink()
        }

        var session: ProfileSession { fixture.service.session(profile: "default") }
        var runtime: ProfileRuntime { fixture.service.entry("default").runtime }

        /// The authority's record of the one session of the fixture's account.
        func record() async throws -> SessionRecord {
            let account = try #require(runtime.snapshot().accountID)
            return try #require(try await fixture.authority.store.sessions(appID: "default", accountID: account).last)
        }
    }

    static func expectNotPersisted(_ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation)
        async
    {
        do {
            try await body()
            Issue.record("expected RAIN_502 session_not_persisted, the call succeeded", sourceLocation: sourceLocation)
        } catch let error as RainError {
            #expect(error.code == .internalError, sourceLocation: sourceLocation)
            #expect(error.details.reason == "session_not_persisted", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected a RainError, got \(error)", sourceLocation: sourceLocation)
        }
    }

    /// Polls `condition` for at most 2 s (tasks started by a timer need a moment to run).
    static func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
        for _ in 0..<400 {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("timed out waiting for: \(what)")
    }

    @Test("a refresh whose tokens cannot be saved is RAIN_502 session_not_persisted, shown in the snapshot; calls are refused")
    func refreshReportsUnsaved() async throws {
        let s = try await Setup()
        _ = try await s.fixture.login()
        let before = try #require(await s.storage.load(profile: "default"))
        await s.storage.setFull(true)

        await Self.expectNotPersisted { _ = try await s.session.refreshSession() }
        #expect(await s.session.hasUnsavedSession)
        let snapshot = s.runtime.snapshot()
        #expect(snapshot.authState == .authenticated)
        #expect(snapshot.storageWarning == "session_not_persisted")
        // No kept Account/Get or Wallet/Get answer is given for the unsaved session either: a
        // read goes to the session actor, which refuses it below.
        s.runtime.keep(.account, [1], stamp: 1, ticket: s.runtime.readTicket())
        #expect(s.runtime.kept(.account, stamp: 1) == nil)
        // Still the old pair on disk.
        #expect(await s.storage.load(profile: "default") == before)

        // Every call that needs the session is refused the same way, and the new pair stays unused.
        await Self.expectNotPersisted { _ = try await s.session.account() }
        await Self.expectNotPersisted { _ = try await s.session.wallet() }
        await Self.expectNotPersisted { _ = try await s.session.refreshSession() }
        #expect(try await s.record().isPairUsed == false)
        #expect(try await s.record().refreshGeneration == 1)
    }

    @Test("the save is retried on the clock; once it succeeds the session works as usual")
    func saveIsRetried() async throws {
        let s = try await Setup()
        _ = try await s.fixture.login()
        await s.storage.setFull(true)
        await Self.expectNotPersisted { _ = try await s.session.refreshSession() }
        let failed = await s.storage.failedSaves
        #expect(failed == 1)

        // The retry timer runs on the injected clock: 500 ms, then doubling.
        s.fixture.clock.advance(by: .milliseconds(500))
        try await Self.eventually("a save retry") { await s.storage.failedSaves == failed + 1 }
        s.fixture.clock.advance(by: .milliseconds(1000))
        try await Self.eventually("a second save retry") { await s.storage.failedSaves == failed + 2 }
        #expect(await s.session.hasUnsavedSession)

        await s.storage.setFull(false)
        s.fixture.clock.advance(by: .milliseconds(2000))
        try await Self.eventually("the save") { await !s.session.hasUnsavedSession }
        let saved = try #require(await s.storage.load(profile: "default"))
        #expect(try await s.record().refreshHash == s.fixture.authority.keys.tokenHash(saved.refreshToken))
        #expect(s.runtime.snapshot().storageWarning == nil)
        _ = try await s.session.account()
        #expect(try await s.record().isPairUsed)
    }

    @Test("a call once the disk has room saves the tokens first and goes on")
    func callSavesFirst() async throws {
        let s = try await Setup()
        _ = try await s.fixture.login()
        await s.storage.setFull(true)
        await Self.expectNotPersisted { _ = try await s.session.refreshSession() }
        await s.storage.setFull(false)
        let account = try await s.session.account()
        #expect(account.accountID == s.runtime.snapshot().accountID)
        #expect(await !s.session.hasUnsavedSession)
        #expect(await s.storage.load(profile: "default")?.refreshToken != nil)
        #expect(s.runtime.snapshot().storageWarning == nil)
    }

    @Test("a restart with the previous tokens, past the grace window, gets the unsaved pair back: the session lives")
    func restartRecovers() async throws {
        let s = try await Setup()
        _ = try await s.fixture.login()
        await s.storage.setFull(true)
        await Self.expectNotPersisted { _ = try await s.session.refreshSession() }
        let accountID = try #require(s.runtime.snapshot().accountID)

        // The daemon stops; a minute later a new one starts on the same storage, disk freed.
        s.fixture.clock.advance(by: .seconds(60))
        await s.storage.setFull(false)
        let logger = Logger(label: "test.restart", sink: s.sink)
        let device = await s.session.context.device
        let restarted = DeviceService(
            config: DaemonConfig(),
            context: DeviceContext(
                authority: s.fixture.authority, storage: s.storage, clock: s.fixture.clock,
                device: device, logger: logger))
        let session = restarted.session(profile: "default")
        let account = try await session.account()
        #expect(account.accountID == accountID)
        let records = try await s.fixture.authority.store.sessions(appID: "default", accountID: accountID)
        #expect(records.last?.revokedAt == nil)
        #expect(records.last?.isPairUsed == true)
    }
}
