import Foundation
import RainAuthority
import RainAuthorityAPI
import RainConfig
import RainCore
import RainTestSupport
import RainWire
import Synchronization
import Testing

@testable import RainDevice

/// A profile session built directly (no `DeviceService`, so nothing starts its restore).
private func standaloneSession(
    storage: any SecureStorage, authority: any Authority, clock: ManualClock
) throws -> ProfileSession {
    let runtime = ProfileRuntime(name: "default", settings: DaemonConfig().settings(for: "default"), clock: clock)
    let context = DeviceContext(
        authority: authority, storage: storage, clock: clock, device: try testDevice(),
        logger: Logger(label: "test", sink: CapturingLogSink()))
    return ProfileSession(runtime: runtime, context: context)
}

/// The session actor's `State`: one value for where the session stands, moved by restore, login,
/// logout and every way a session ends.
@Suite struct SessionStateTests {
    @Test func restoreThenLoginThenLogoutMoveTheState() async throws {
        let f = try await Fixture()
        let storage = GatedStorage()
        let session = try standaloneSession(storage: storage, authority: f.authority, clock: f.clock)
        #expect(await session.phase == .unrestored)
        let restoring = Task { await session.restore() }
        await eventually("restoring") { await session.phase == .restoring }
        #expect(session.runtime.snapshot() == .loading)
        await storage.release()
        await restoring.value
        #expect(await session.phase == .signedOut)
        _ = try await session.sendLoginCode(.email("user@example.com"))
        #expect(await session.phase == .signedOut)  // a pending code is a challenge, not a session
        _ = try await session.confirmLoginCode(try #require(f.sender.lastCode))
        #expect(await session.phase == .authenticated)
        #expect(await session.isScheduled)
        _ = try await session.logout()
        #expect(await session.phase == .signedOut)
        #expect(await !session.isScheduled)
    }

    @Test func aSessionThatExpiredWhileTheDaemonWasDownAndCannotBeRefreshedEndsDuringTheRestore() async throws {
        let f = try await Fixture()
        let storage = InMemoryStorage()
        let stale = StoredSession(
            accountID: "acct_gone", walletID: "wal_gone", accessToken: "at_unknown", refreshToken: "rt_unknown",
            expiresAt: f.clock.now.adding(.seconds(-1)), lifetimeSeconds: 900, contact: .email("user@example.com"))
        try await storage.save(stale, profile: "default")
        let session = try standaloneSession(storage: storage, authority: f.authority, clock: f.clock)
        await session.restore()
        // The authority refused the refresh: the restore ends the session, and the state is signed out.
        #expect(await session.phase == .signedOut)
        #expect(session.runtime.snapshot().sessionState == .expired)
        #expect(await storage.load(profile: "default") == nil)
        let error = await #expect(throws: RainError.self) { try await session.refreshSession() }
        #expect(error?.code == .sessionExpired)
        #expect(error?.details.reason == SessionEndReason.refreshFailed.rawValue)
    }

    @Test func aRevocationLearntOnARefreshSignsTheProfileOut() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        #expect(await f.session.phase == .authenticated)
        try await f.loginOnAnotherDevice()
        let error = await #expect(throws: RainError.self) { try await f.session.refreshSession() }
        #expect(error?.details.reason == SessionEndReason.revokedElsewhere.rawValue)
        #expect(await f.session.phase == .signedOut)
        #expect(await !f.session.isScheduled)
        #expect(f.runtime.endedReason == .revokedElsewhere)
    }

    @Test func aLoginAfterAnEndIsAuthenticatedAgain() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        try await f.loginOnAnotherDevice()
        _ = try? await f.session.account()
        #expect(await f.session.phase == .signedOut)
        try await f.login()
        #expect(await f.session.phase == .authenticated)
        #expect(f.runtime.endedReason == nil)
    }

    // PROTOCOL.md §5.1 and §5.5: the two ways a state reads EXPIRED.

    @Test("a session that ended on its own reads EXPIRED without account, wallet or contact; Logout then had no session")
    func anEndedSessionIsGone() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        try await f.loginOnAnotherDevice()
        _ = try? await f.session.refreshSession()
        let state = f.runtime.snapshot()
        #expect(state.authState == .unauthenticated && state.sessionState == .expired)
        #expect(state.accountID == nil && state.walletID == nil && state.contact == nil)
        let logout = try await f.session.logout()
        #expect(!logout.hadSession && !logout.isRevokedAtAuthority)
    }

    @Test("a session past its expiry that has not ended yet reads EXPIRED with its ids; Logout deletes and revokes it")
    func aSessionPastItsExpiryIsStillStored() async throws {
        let f = try await SchedulerFixture()
        try await f.login()
        // The wall clock alone moves: no timer fires, so nothing has refreshed or ended the session.
        f.clock.jumpWallClock(by: .seconds(901))
        let state = f.runtime.snapshot()
        #expect(state.authState == .unauthenticated && state.sessionState == .expired)
        #expect(state.accountID != nil && state.walletID != nil && state.contact == .email("user@example.com"))
        let logout = try await f.session.logout()
        #expect(logout.hadSession && logout.isRevokedAtAuthority)
        #expect(f.runtime.snapshot().sessionState == .none)
    }
}

/// `SessionEndReason`: the wire strings of RAIN_201 reasons, shared by the authority and the device.
@Suite struct SessionEndReasonTests {
    @Test func theRawValuesAreTheWireStrings() {
        let wire: [SessionEndReason: String] = [
            .expired: "expired", .revokedElsewhere: "revoked_elsewhere", .refreshFailed: "refresh_failed",
            .noSession: "no_session", .invalidToken: "invalid_token", .accessExpired: "access_expired",
            .revoked: "revoked", .refreshRejected: "refresh_rejected", .refreshTokenReused: "refresh_token_reused",
            .deviceUnbound: "device_unbound", .refreshExpired: "refresh_expired",
        ]
        #expect(Set(wire.keys) == Set(SessionEndReason.allCases))
        for (reason, string) in wire { #expect(reason.rawValue == string) }
    }

    @Test func theDeviceEndsWithRevokedElsewhereOnlyForThatRefusal() {
        for reason in SessionEndReason.allCases {
            #expect(reason.deviceExpiry == (reason == .revokedElsewhere ? .revokedElsewhere : .refreshFailed))
        }
        #expect(SessionEndReason.allCases.filter(\.isStaleAccessToken) == [.invalidToken, .accessExpired])
        #expect(SessionEndReason(.revokedElsewhere) == .revokedElsewhere)
        #expect(SessionEndReason(.refreshFailed) == .refreshFailed)
        #expect(SessionEndReason(.expired) == .expired)
    }

    @Test func theAuthoritysRefusalsParseAsReasons() async throws {
        let f = try await SchedulerFixture()
        let error = await #expect(throws: RainError.self) {
            try await f.embedded.accountInfo(
                appID: "default", accessToken: "at_unknown", proof: DeviceProof(holder: try testDevice()))
        }
        #expect(error.flatMap(SessionEndReason.init(reasonOf:)) == .invalidToken)
        #expect(SessionEndReason(reasonOf: RainError(.network, "down")) == nil)
        #expect(SessionEndReason(reasonOf: RainError.invalid("x", reason: "not_a_session_reason")) == nil)
    }
}

/// `awaitRestore` waits for the restore itself, with its timeout on the injected clock.
@Suite struct AwaitRestoreTests {
    @Test func returnsWhenTheRestoreFinishesWithoutWaitingForTheTimeout() async throws {
        let storage = GatedStorage()
        let f = try await Fixture(storage: storage)
        let entry = f.service.entry("default")
        let waiting = Task { await DeviceService.awaitRestore(entry, timeout: .seconds(60)) }
        // Waiting, with its timeout armed on the manual clock.
        await eventually("waiting") { entry.runtime.restoreWaiterCount == 1 && f.clock.pendingTimerCount == 1 }
        await storage.release()
        let snap = await waiting.value  // the clock never moved: the restore resumed it
        #expect(snap.authState == .unauthenticated)
        #expect(f.clock.pendingTimerCount == 0)  // the timeout was cancelled
        #expect(entry.runtime.restoreWaiterCount == 0)
    }

    @Test func timesOutWithLoadingAtTheTimeoutOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let runtime = ProfileRuntime(name: "default", settings: DaemonConfig().settings(for: "default"), clock: clock)
        let waiters = (0..<3).map { _ in Task { await runtime.awaitRestore(timeout: .milliseconds(100)) } }
        await eventually("all waiting, their timeouts armed") {
            runtime.restoreWaiterCount == 3 && clock.pendingTimerCount == 3
        }
        clock.advance(by: .milliseconds(99))
        #expect(runtime.restoreWaiterCount == 3)
        clock.advance(by: .milliseconds(1))
        for w in waiters { #expect(await w.value == .loading) }
        #expect(runtime.restoreWaiterCount == 0)
    }

    @Test func aFinishedRestoreAnswersAtOnce() async throws {
        let clock = ManualClock()
        let runtime = ProfileRuntime(name: "default", settings: DaemonConfig().settings(for: "default"), clock: clock)
        runtime.publish(session: nil)
        #expect(await runtime.awaitRestore(timeout: .seconds(5)) == .unauthenticated)
        #expect(clock.pendingTimerCount == 0)
    }

    @Test func everyWaiterIsResumedByTheRestore() async throws {
        let clock = ManualClock()
        let runtime = ProfileRuntime(name: "default", settings: DaemonConfig().settings(for: "default"), clock: clock)
        let waiters = (0..<5).map { i in Task { await runtime.awaitRestore(timeout: .seconds(Int64(i + 1))) } }
        await eventually("all waiting") { runtime.restoreWaiterCount == 5 }
        runtime.publish(session: nil)
        for w in waiters { #expect(await w.value == .unauthenticated) }
        #expect(clock.pendingTimerCount == 0)
    }
}
