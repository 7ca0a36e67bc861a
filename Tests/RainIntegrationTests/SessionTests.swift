import Foundation
import RainTestSupport
import RainWallet
import Testing

@Suite("Sessions across restarts, processes and logout")
struct SessionTests {
    @Test("a session survives a clean restart (SIGTERM, start on the same state)")
    func restartRestores() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let login = try await h.logIn(h.provider(), .email("restart@example.com"))
        let account = try #require(login.session.accountID)

        try await h.restart()

        let p = h.provider()
        try await p.awaitSessionRestore()
        let s = try await p.currentSession()
        #expect(s.authState == .authenticated)
        #expect(s.accountID == account)
        #expect(s.expiresAt != nil)
        #expect(try await p.hasActiveSession())
    }

    @Test("a session survives SIGKILL: start again on the same state")
    func killRestores() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let login = try await h.logIn(h.provider(), .phone("+15551239876"))
        let account = try #require(login.session.accountID)

        await h.kill()
        try await h.start()

        let p = h.provider()
        try await p.awaitSessionRestore()
        let s = try await p.currentSession()
        #expect(s.authState == .authenticated)
        #expect(s.accountID == account)
    }

    @Test("the provider that was connected before a restart reconnects on its next call")
    func providerReconnects() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()
        let login = try await h.logIn(p, .email("reconnect@example.com"))

        try await h.restart()

        try await p.awaitSessionRestore()
        #expect(try await p.currentSession().accountID == login.session.accountID)
    }

    @Test("a login through the library is what the CLI (another process) sees")
    func libraryLoginSeenByCLI() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let login = try await h.logIn(h.provider(), .email("shared@example.com"))

        let r = try await h.runCLI(["status", "--json"])
        #expect(r.status == 0, "\(r)")
        let json = try jsonObject(r.stdout)
        #expect(json["authState"] as? String == "authenticated")
        #expect(json["sessionState"] as? String == "active")
        #expect(json["accountId"] as? String == login.session.accountID)
    }

    @Test("a login through the CLI (code typed on stdin) is what the library sees")
    func cliLoginSeenByLibrary() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }

        let cli = try h.launchCLI(["login", "--email", "typed@example.com"])
        let code: String
        do {
            code = try await h.waitForCode(for: "typed@example.com")
        } catch {
            // Say what the CLI and the daemon did instead of only that no code came.
            let r = try await cli.finish()
            let started = ContinuousClock.now
            let now = (try? await h.outbox().map { "\($0.contact?.value ?? "?")" }) ?? ["outbox call failed"]
            Issue.record(
                "\(error); the CLI: \(r); the outbox now (\(ContinuousClock.now - started)): \(now); the daemon's log ends: \(h.log.suffix(2_000))"
            )
            return
        }
        cli.send(code + "\n")
        let r = try await cli.finish()
        #expect(r.status == 0, "\(r)")

        let p = h.provider()
        let s = try await p.currentSession()
        #expect(s.authState == .authenticated)
        #expect(s.contact == .email("typed@example.com"))
        let status = try jsonObject(try await h.runCLI(["status", "--json"]).stdout)
        #expect(status["accountId"] as? String == s.accountID)
    }

    @Test("logout ends the session; a second logout is fine; CLI logout exits 0")
    func logout() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()
        try await h.logIn(p, .email("logout@example.com"))

        try await p.logout()
        let s = try await p.currentSession()
        #expect(s.authState == .unauthenticated)
        #expect(s.sessionState == .none)
        #expect(s.accountID == nil)
        #expect(try await !p.hasActiveSession())

        try await p.logout()  // nothing to end: still fine
        #expect(try await p.currentSession().authState == .unauthenticated)

        try await h.logIn(p, .email("logout@example.com"))
        let r = try await h.runCLI(["logout"])
        #expect(r.status == 0, "\(r)")
        #expect(try await p.currentSession().authState == .unauthenticated)
        let again = try await h.runCLI(["logout"])
        #expect(again.status == 0, "\(again)")
    }

    @Test("logout with no session does not claim the authority was unreachable")
    func logoutWithoutSessionIsNotAnOutage() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }

        let r = try await h.runCLI(["logout"])
        #expect(r.status == 0, "\(r)")
        // The daemon reports hadSession=false, revokedAtAuthority=false; the CLI must not present
        // that as "the authority could not be reached" (docs/errors.md: only an unreachable authority is).
        #expect(!r.stdout.contains("could not be reached"), "\(r)")
    }

    @Test("logout survives a restart: the wiped session is not restored")
    func logoutIsDurable() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        try await h.logIn(h.provider(), .email("durable@example.com"))
        try await h.provider().logout()

        try await h.restart()

        let p = h.provider()
        try await p.awaitSessionRestore()
        #expect(try await p.currentSession().authState == .unauthenticated)
    }

    @Test("authState yields unauthenticated, then authenticated after login, then unauthenticated after logout")
    func authStateSequence() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()
        try await p.awaitSessionRestore()

        let seen = Recorder<AuthState>()
        let states = p.authState
        let watcher = Task {
            for await s in states { seen.append(s) }
        }
        defer { watcher.cancel() }

        #expect(await eventually { seen.count >= 1 })
        #expect(seen.all.first == .unauthenticated)

        try await h.logIn(p, .email("watch@example.com"))
        #expect(await eventually { seen.count >= 2 })

        try await p.logout()
        #expect(await eventually { seen.count >= 3 })

        #expect(seen.all == [.unauthenticated, .authenticated, .unauthenticated])
    }
}
