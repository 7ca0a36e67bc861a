import RainCore
import RainTestSupport
import RainWire
import Testing

@testable import RainDevice

/// Account/Get and Wallet/Get over a socket, whether the authority tells when an answer still
/// stands (`keptReads`: placed `.ready`, a miss goes to the session actor) or not (`.actor`): the
/// session actor's answer, and its rules for a session that is gone.
@Suite struct SessionReadRoutesTests {
    @Test(arguments: [false, true])
    func aLiveSessionReadsWhatTheSessionActorAnswers(keptReads: Bool) async throws {
        let f = try await SchedulerFixture(keptReads: keptReads)
        try await f.login()
        try await ServedHandler.serve(f) { c in
            let account = try await ServedHandler.account(c)
            let wallet = try await ServedHandler.wallet(c)
            #expect(f.authority.readCalls == 2)
            #expect(account.walletID == wallet.walletID)
            #expect(account == (try await f.session.account()))
            #expect(wallet == (try await f.session.wallet()))
        }
    }

    @Test(arguments: [false, true])
    func aSessionRevokedElsewhereEndsWithRAIN201(keptReads: Bool) async throws {
        let f = try await SchedulerFixture(keptReads: keptReads)
        try await f.login()
        try await ServedHandler.serve(f) { c in
            // Kept first (with `keptReads`): the revocation must still be seen.
            _ = try await ServedHandler.account(c)
            try await f.loginOnAnotherDevice()
            let error = await #expect(throws: RainError.self) { _ = try await ServedHandler.account(c) }
            #expect(error?.code == .sessionExpired)
            #expect(f.runtime.snapshot().authState == .unauthenticated)
            let next = await #expect(throws: RainError.self) { _ = try await ServedHandler.wallet(c) }
            #expect(next?.code == .sessionExpired)
        }
    }

    @Test(arguments: [false, true])
    func withoutASessionAReadIsRAIN201(keptReads: Bool) async throws {
        let f = try await SchedulerFixture(keptReads: keptReads)
        try await ServedHandler.serve(f) { c in
            let error = await #expect(throws: RainError.self) { _ = try await ServedHandler.account(c) }
            #expect(error?.code == .sessionExpired)
            #expect(f.authority.readCalls == 0, "no session: the authority is not asked")
        }
    }
}
