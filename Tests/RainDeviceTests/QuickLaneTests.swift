import Foundation
import RainAccess
import RainConfig
import RainCore
import RainCrypto
import RainTestSupport
@testable import RainTransport
import RainWire
import Testing

@testable import RainDevice

/// The quick lane: a route placed `.ready` (GetInfo, GetState, and with an authority that says
/// when an answer stands, Account/Get and Wallet/Get) answered from kept bytes gives what the
/// ordinary path gives, is taken only where the ordinary path would answer at once, and the kept
/// bytes follow the session, the policy, the link, the clock and every change at the authority.
@Suite struct QuickLaneTests {
    static let ownUID = getuid()

    /// A connection's quick-lane memo, kept across calls as the server keeps it.
    final class Memo {
        var value: AnyObject?
    }

    /// The quick lane's answer to GetState for `profile` (nil: no profile entry).
    static func quick(
        _ service: DeviceService, profile: String?, method: String = Method.sessionGetState, uid: UInt32 = ownUID,
        connection: ConnectionID = ConnectionID(rawValue: 9), memo: Memo = Memo()
    ) throws -> [UInt8]? {
        let metadata = profile.map { [MetadataEntry(key: profileMetadataKey, value: $0)] } ?? []
        let body = try Envelope(requestID: 1, kind: .request(WireRequest(method: method, payload: [], metadata: metadata)))
            .canonicalBytes(isFramed: false)
        return try body.withUnsafeBufferPointer { buf in
            let request = try #require(QuickRequest(buf))
            return service.quickAnswer(
                request, connection: connection, peer: PeerCredentials(pid: 1, uid: uid, gid: 0), memo: &memo.value)
        }
    }

    @Test("only where the ordinary path answers at once: a named profile in use, the daemon's uid, a route placed .ready")
    func takenOnlyWhereItMay() async throws {
        let f = try await SchedulerFixture()
        // Not in use yet: the ordinary path creates the entry and starts its restore.
        #expect(try Self.quick(f.service, profile: nil) == nil)
        _ = f.service.entry("default")
        #expect(try Self.quick(f.service, profile: nil) != nil)
        #expect(try Self.quick(f.service, profile: "default") != nil)
        #expect(try Self.quick(f.service, profile: nil, uid: Self.ownUID &+ 1) == nil, "another uid: its checks first")
        #expect(try Self.quick(f.service, profile: nil, method: Method.daemonGetInfo) != nil, "any route placed .ready")
        #expect(try Self.quick(f.service, profile: nil, method: Method.authLogout) == nil, "not .ready: the ordinary path")
        #expect(
            try Self.quick(f.service, profile: nil, method: Method.accountGet) == nil,
            "no session: RAIN_201 comes from the ordinary path")
        // A profile the config does not name keeps its use count on the ordinary path.
        _ = f.service.entry("unnamed")
        #expect(try Self.quick(f.service, profile: "unnamed") == nil)
    }

    @Test("what the lane kept for a connection answers only for the service that found it (a migration makes a new one)")
    func keptOnlyForItsService() async throws {
        let old = try await SchedulerFixture()
        let new = try await SchedulerFixture()
        _ = old.service.entry("default")
        let memo = Memo()
        #expect(try Self.quick(old.service, profile: nil, memo: memo) != nil)
        // The new service has no profile in use yet: the ordinary path must start it, whatever the
        // connection's memo holds of the old one.
        #expect(try Self.quick(new.service, profile: nil, memo: memo) == nil)
        let runtime = new.service.entry("default").runtime
        #expect(try Self.quick(new.service, profile: nil, memo: memo) != nil)
        #expect((memo.value as? DeviceService.QuickGrant)?.runtime === runtime)
    }

    struct NoPlaces: PromptPlaceRegistry {
        func register(terminal: String, secret: String?, caller: CallerIdentity, profile: String) async throws(RainError)
            -> String
        {
            throw RainError(.unauthorized, "no prompt places in this test")
        }

        func place() async -> PromptPlaceReport { PromptPlaceReport() }
    }

    @Test("with per-app access, only a connection whose app is approved for the profile, and no longer once revoked")
    func onlyApprovedConnections() async throws {
        let f = try await SchedulerFixture()
        let w = try AppAccessTests.world(prompt: true)
        let directory = NSTemporaryDirectory() + "rain-quick-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let settings = try SettingsGuard(
            store: try ConfirmedSettingsStore(stateDirectory: directory, storageKey: try SymmetricKey.random()),
            policy: GuardedSettings(), requested: { () throws(RainError) in GuardedSettings() })
        var config = DaemonConfig()
        config.profiles["default"] = ProfileSettings(appID: "default")
        config.profiles["work"] = ProfileSettings(appID: "work")
        let service = DeviceService(
            config: config,
            context: DeviceContext(
                authority: f.authority, storage: f.storage, clock: f.clock, device: try testDevice(), logger: f.logger),
            access: DeviceAccess(
                apps: w.access, settings: settings, prompts: NoPlaces(),
                hashFile: { (path) throws(RainError) in (path, [UInt8](repeating: 0, count: 32)) }))
        _ = service.entry("default")
        _ = service.entry("work")
        let (approved, other) = (ConnectionID(rawValue: 21), ConnectionID(rawValue: 22))
        let wallet = AppAccessTests.app("/usr/bin/wallet", hash: 1)
        w.resolver.identities.withLock {
            $0[approved] = wallet
            $0[other] = AppAccessTests.app("/usr/bin/other", hash: 2, pid: 11)
        }
        let own = PeerCredentials(pid: 10, uid: Self.ownUID, gid: 0)
        #expect(try Self.quick(service, profile: nil, connection: approved) == nil, "not decided yet: the ordinary path asks")
        w.prompt.script([nil])
        try await w.access.authorize(profile: "default", context: CallerHandle(connection: approved, peer: own))
        let memo = Memo()
        #expect(try Self.quick(service, profile: nil, connection: approved, memo: memo) != nil)
        #expect(memo.value != nil, "what was found is kept for the next call")
        #expect(try Self.quick(service, profile: nil, connection: approved, memo: memo) != nil)
        #expect(try Self.quick(service, profile: "default", connection: approved, memo: memo) != nil)
        // The memo of `default` does not answer for another profile the app is not approved for.
        #expect(try Self.quick(service, profile: "work", connection: approved, memo: memo) == nil)
        #expect(try Self.quick(service, profile: nil, connection: other) == nil, "another app on another connection")
        w.prompt.script([nil])
        try await w.access.revoke(
            appPath: wallet.appPath, profile: "default", context: CallerHandle(connection: approved, peer: own))
        #expect(
            try Self.quick(service, profile: nil, connection: approved, memo: memo) == nil,
            "revoked: the memo no longer holds, and the ordinary path refuses")
    }

    @Test("the quick answer is the ordinary answer over a real socket, through login and logout")
    func sameAnswerAsTheOrdinaryPath() async throws {
        let f = try await SchedulerFixture()
        try await ServedHandler.serve(f) { c in
            // A deadline keeps a request off the quick lane: the ordinary path's answer.
            func both() async throws -> (quick: [UInt8], ordinary: [UInt8]) {
                let quick = try await c.call(method: Method.sessionGetState, payload: [])
                let ordinary = try await c.call(method: Method.sessionGetState, payload: [], timeoutMilliseconds: 60_000)
                return (quick, ordinary)
            }
            _ = try await both()  // the first call of the connection admits it and creates the entry
            // Its restore finishes on its own: compared before, the two calls could straddle it.
            _ = await f.runtime.awaitRestore(timeout: .seconds(3600))
            var answers = try await both()
            #expect(answers.quick == answers.ordinary)
            let before = answers.quick
            try await f.login()
            answers = try await both()
            #expect(answers.quick == answers.ordinary)
            #expect(answers.quick != before, "the login changed the kept bytes")
            #expect(try SessionSnapshot.decode(answers.quick).authState == .authenticated)
            _ = try await f.session.logout()
            answers = try await both()
            #expect(answers.quick == answers.ordinary)
            #expect(try SessionSnapshot.decode(answers.quick).authState == .unauthenticated)
        }
    }

    @Test("every ready read answers on the lane what the ordinary path answers, through login, changes and logout")
    func everyReadAnswersTheSameOnBothPaths() async throws {
        let f = try await SchedulerFixture(keptReads: true)
        try await ServedHandler.serve(f) { c in
            // A deadline keeps a request off the quick lane: the ordinary path's answer.
            func both(_ method: String) async throws -> (quick: [UInt8], ordinary: [UInt8]) {
                let quick = try await c.call(method: method, payload: [])
                let ordinary = try await c.call(method: method, payload: [], timeoutMilliseconds: 60_000)
                return (quick, ordinary)
            }
            _ = try await both(Method.sessionGetState)
            _ = await f.runtime.awaitRestore(timeout: .seconds(3600))
            let info = try await both(Method.daemonGetInfo)
            #expect(info.quick == info.ordinary)
            try await f.login()
            for method in [Method.daemonGetInfo, Method.sessionGetState, Method.accountGet, Method.walletGet] {
                let first = try await both(method)
                #expect(first.quick == first.ordinary, "\(method)")
                // Kept now: the lane answers it without the authority.
                let reads = f.authority.readCalls
                let again = try await both(method)
                #expect(again.quick == first.quick, "\(method)")
                #expect(f.authority.readCalls == reads, "\(method) answered from kept bytes")
            }
            let account = try AccountResponse.decode(try await c.call(method: Method.accountGet, payload: []))
            #expect(try Self.quick(f.service, profile: nil, method: Method.accountGet) != nil)
            // A change made at the authority, not through this device's session actor: the kept
            // answer is never given after it completed.
            _ = try await f.session.sendContactVerificationCode(.email("backup@example.com"))
            _ = try await f.session.confirmContactVerification(try #require(f.sender.lastCode))
            let changed = try await both(Method.accountGet)
            #expect(changed.quick == changed.ordinary)
            #expect(try AccountResponse.decode(changed.quick) != account, "the new contact shows at once")
            // The same account logs in on another device: this device's session is revoked at
            // the authority, and its next read says so (RAIN_201), never the kept account.
            try await f.loginOnAnotherDevice()
            #expect(try Self.quick(f.service, profile: nil, method: Method.accountGet) == nil)
            #expect(try Self.quick(f.service, profile: nil, method: Method.walletGet) == nil)
            let refused = await rainErrorOf { _ = try await c.call(method: Method.accountGet, payload: []) }
            #expect(refused?.code == .sessionExpired, "\(String(describing: refused))")
        }
    }

    @Test("the kept bytes follow the clock: active, then not active enough, then expired, with no publish")
    func followsTheClock() throws {
        let clock = ManualClock()
        let settings = ProfileSettings(appID: "default", sessionPolicy: .default)
        let runtime = ProfileRuntime(name: "default", settings: settings, clock: clock)
        #expect(try runtime.encodedSnapshot() == runtime.snapshot().encode())
        let lifetime = 3_600.0
        let session = StoredSession(
            accountID: "acc_1", walletID: "wal_1", accessToken: "a", refreshToken: "r",
            expiresAt: clock.now.addingTimeInterval(lifetime), lifetimeSeconds: lifetime, contact: .email("u@example.com"))
        runtime.publish(session: session)
        let active = try #require(runtime.encodedSnapshot())
        #expect(active == (try runtime.snapshot().encode()))
        #expect(try SessionSnapshot.decode(active).hasActiveSession)
        // Just before the active threshold: the same bytes; past it: new ones, not active.
        let threshold = RainWalletSessionPolicy.default.effectiveActiveThreshold(lifetime: .seconds(lifetime)).timeInterval
        clock.advance(by: .milliseconds(Int64((lifetime - threshold) * 1000) - 1))
        #expect(runtime.encodedSnapshot() == active)
        clock.advance(by: .milliseconds(2))
        let inactive = try #require(runtime.encodedSnapshot())
        #expect(inactive == (try runtime.snapshot().encode()))
        #expect(try !SessionSnapshot.decode(inactive).hasActiveSession)
        #expect(try SessionSnapshot.decode(inactive).authState == .authenticated)
        clock.advance(by: .seconds(threshold))
        let expired = try #require(runtime.encodedSnapshot())
        #expect(expired == (try runtime.snapshot().encode()))
        #expect(try SessionSnapshot.decode(expired).sessionState == .expired)
        // A changed link and a changed policy are new bytes too.
        runtime.publish(link: AuthorityLinkState(phase: .connected, since: clock.now))
        #expect(runtime.encodedSnapshot() == (try runtime.snapshot().encode()))
        #expect(runtime.encodedSnapshot() != expired)
        runtime.publish(session: session, isUnsaved: true)
        #expect(runtime.encodedSnapshot() == (try runtime.snapshot().encode()))
    }
}
