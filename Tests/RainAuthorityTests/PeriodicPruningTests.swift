import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainTestSupport
import RainWire
import Testing

@testable import RainAuthority
@testable import RainStore

/// Pruning on a schedule: the authority deletes expired challenges, revoked
/// sessions, retired refresh tokens and old outbox lines every interval on its clock.
@Suite("Periodic pruning")
struct PeriodicPruningTests {
    /// Polls `condition` (every 10 ms, up to 30 s of real time); false when it never held.
    static func eventually(_ condition: () async throws -> Bool) async rethrows -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return try await condition()
    }

    /// Sends a code to the fixture's email from `device`, reads it from the outbox and confirms it.
    static func login(_ f: AuthorityFixture, device: String, key: Ed25519PrivateKey? = FixtureDevice.key) async throws
        -> LoginResult
    {
        let challenge = try await f.authority.sendLoginCode(
            SendCodeRequest(appID: AuthorityFixture.app, deviceID: device, contact: AuthorityFixture.email))
        let code = try #require(try await f.authority.listOutbox().last?.code)
        return try await f.confirm(challenge, code: code, device: device, deviceKey: key)
    }

    @Test("every interval on the clock, rows past the retention go and live ones stay; one log line with counts")
    func schedule() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outbox = OutboxCodeSender(stateDirectory: directory, logger: Logger(label: "test", sink: CapturingLogSink()))
        let settings = AuthoritySettings(
            refreshTokenLifetime: .seconds(3600), sendLimits: .unlimited, pruneInterval: .seconds(600),
            pruneRetention: .seconds(3600))
        try await AuthorityFixture.with(settings: settings, outbox: outbox) { f in
            // t0: A logs in, B logs in (A's session is revoked), B refreshes twice (one retired
            // refresh hash beyond the previous one), C has a pending code: 3 challenges, 3 outbox lines.
            _ = try await Self.login(f, device: "device-a")
            let keyB = try Ed25519PrivateKey()
            let loginB = try await Self.login(f, device: "device-b", key: keyB)
            var refresh = loginB.tokens.refreshToken
            for _ in 0..<2 {
                f.clock.advance(by: .seconds(1))
                refresh = try await f.refresh(refresh, key: keyB, device: "device-b").refreshToken
            }
            let pending = try await f.authority.sendLoginCode(
                SendCodeRequest(appID: AuthorityFixture.app, deviceID: "device-c", contact: AuthorityFixture.email))
            func rows(_ table: String) async throws -> Int { try await f.store.dumpAllRows()[table]?.count ?? 0 }
            #expect(try await rows("challenges") == 3)
            #expect(try await rows("sessions") == 2)
            #expect(try await rows("retired_refresh_tokens") == 1)
            #expect(try await outbox.entries().count == 3)

            let pruning = PeriodicPruning(authority: f.authority, interval: settings.pruneInterval)
            defer { pruning.stop() }
            pruning.start()
            #expect(await Self.eventually { pruning.completedRuns == 1 })
            #expect(try await rows("challenges") == 3)

            // One interval at a time (each run re-arms its timer before it counts as completed).
            var login: LoginResult?
            for step in 1...7 {
                f.clock.advance(by: .seconds(600))
                if step == 6 { login = try await Self.login(f, device: "device-d") }  // t0 + 3602: live
                #expect(await Self.eventually { pruning.completedRuns == step + 1 })
                if step == 6 {
                    // Nothing is past the retention yet: the pending code expired at t0 + 302.
                    #expect(try await f.store.challenge(id: pending.challengeID) != nil)
                }
            }
            // t0 + 4202: everything of t0 is more than an hour past its expiry or revocation.
            #expect(try await f.store.challenge(id: pending.challengeID) == nil)
            #expect(try await rows("challenges") == 1)  // D's, used a few minutes ago
            let sessions = try await f.store.dumpAllRows()["sessions"]?.count
            #expect(sessions == 2)  // B (revoked by D's login minutes ago) and D (live)
            #expect(try await rows("retired_refresh_tokens") == 0)
            #expect(try await outbox.entries().count == 1)
            let live = try #require(login)
            _ = try await f.authority.accountInfo(appID: AuthorityFixture.app, accessToken: live.tokens.accessToken)

            // One line per run, with counts only: they add up to what went.
            let lines = f.logSink.captured.filter { $0.contains(" prune ") }
            #expect(lines.count == 8)
            func total(_ key: String) -> Int {
                lines.reduce(0) { sum, line in
                    let field = line.split(separator: " ").first { $0.hasPrefix("\(key)=") }
                    return sum + (field.flatMap { Int($0.dropFirst(key.count + 1)) } ?? 0)
                }
            }
            #expect(total("challenges") == 3)
            #expect(total("sessions") == 1)
            #expect(total("retiredRefreshTokens") == 1)
            #expect(total("outbox") == 3)
            var scanner = SecretScanner()
            scanner.addToken(live.tokens.accessToken, label: "access token")
            scanner.addToken(live.tokens.refreshToken, label: "refresh token")
            #expect(scanner.findings(in: f.logSink.captured).isEmpty)
        }
    }

    @Test("stop() ends the schedule: later intervals run nothing")
    func stop() async throws {
        try await AuthorityFixture.with { f in
            let pruning = PeriodicPruning(authority: f.authority, interval: .seconds(60))
            pruning.start()
            #expect(await Self.eventually { pruning.completedRuns == 1 })
            pruning.stop()
            #expect(f.clock.pendingTimerCount == 0)
            f.clock.advance(by: .seconds(600))
            #expect(pruning.completedRuns == 1)
        }
    }
}
