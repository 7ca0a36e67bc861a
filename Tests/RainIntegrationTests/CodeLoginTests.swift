import Foundation
import RainTestSupport
import RainWallet
import Testing

@Suite("Code login through the client library")
struct CodeLoginTests {
    @Test("email: send, read the code from the outbox, confirm: authenticated and active")
    func emailLogin() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()

        try await p.sendLoginCode(to: .email("  User@Example.COM "))
        let entries = try await h.outbox()
        #expect(entries.count == 1)
        let entry = try #require(entries.last)
        #expect(entry.contact == .email("user@example.com"))
        #expect(entry.code.utf8.count == 6 && entry.code.allSatisfy(\.isASCII) && entry.code.allSatisfy(\.isNumber))

        try await p.confirmLoginCode(entry.code)
        let s = try await p.currentSession()
        #expect(s.authState == .authenticated)
        guard case .active(let expiresAt) = s.sessionState else {
            Issue.record("session state is \(s.sessionState), not active")
            return
        }
        #expect(expiresAt > Date())
        #expect(s.accountID != nil)
        #expect(s.contact == .email("user@example.com"))
        #expect(try await p.hasActiveSession())
    }

    @Test("phone: +1 555 123 4567 is normalized to +15551234567 and logs in")
    func phoneLogin() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()

        try await p.sendLoginCode(to: .phone("+1 555 123 4567"))
        let code = try #require(try await h.latestCode(for: "+15551234567"))
        #expect(try await h.outbox().map(\.contact) == [.phone("+15551234567")])

        let (session, created) = try await p.confirmLoginCodeReturningSession(code)
        #expect(created)
        #expect(session.authState == .authenticated)
        #expect(session.contact == .phone("+15551234567"))
        let s = try await p.currentSession()
        #expect(s.authState == .authenticated)
        #expect(s.accountID != nil)
        #expect(s.accountID == session.accountID)
        #expect(try await p.hasActiveSession())
    }

    @Test(
        "invalid contacts are refused with RAIN_102 before any request",
        arguments: [RainWalletContact.email("not-an-email"), .phone("+44 (0)20 7946 0958")])
    func invalidContact(_ contact: RainWalletContact) async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }

        let e = try #require(await rainError { try await h.provider().sendLoginCode(to: contact) })
        #expect(e.code == .invalidArgument)
        #expect(try await h.outbox().isEmpty)

        // Pointed at a socket nothing listens on, it still fails with 102 (not 101): no request was made.
        let nowhere = RainProvider(RainWalletConfig(socketPath: "\(h.directory)/nothing.sock"))
        let offline = try #require(await rainError { try await nowhere.sendLoginCode(to: contact) })
        #expect(offline.code == .invalidArgument)
    }

    @Test("a wrong code is RAIN_203 with 2 attempts remaining and keeps the challenge")
    func wrongCodeKeepsChallenge() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()

        try await p.sendLoginCode(to: .email("wrong@example.com"))
        let code = try await h.waitForCode(for: "wrong@example.com")

        let e = try #require(await rainError { try await p.confirmLoginCode(wrongCode(for: code)) })
        #expect(e.code == .invalidLoginCode)
        #expect(e.details.attemptsRemaining == 2)
        #expect(try await p.currentSession().authState == .unauthenticated)

        try await p.confirmLoginCode(code)
        #expect(try await p.currentSession().authState == .authenticated)
    }

    @Test("the third wrong code locks the challenge; the right code afterwards is RAIN_203")
    func lockAfterThreeWrong() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()

        try await p.sendLoginCode(to: .email("lock@example.com"))
        let code = try await h.waitForCode(for: "lock@example.com")
        let wrong = wrongCode(for: code)

        var remaining: [UInt32?] = []
        for _ in 0..<2 {
            let e = try #require(await rainError { try await p.confirmLoginCode(wrong) })
            #expect(e.code == .invalidLoginCode)
            remaining.append(e.details.attemptsRemaining)
        }
        #expect(remaining == [2, 1])

        let third = try #require(await rainError { try await p.confirmLoginCode(wrong) })
        #expect(third.code == .invalidLoginCode)
        #expect(third.details.reason == "locked")
        #expect(third.details.attemptsRemaining == 0)

        let after = try #require(await rainError { try await p.confirmLoginCode(code) })
        #expect(after.code == .invalidLoginCode)
        #expect(after.details.reason == "locked")
        #expect(try await p.currentSession().authState == .unauthenticated)
    }

    @Test("sending again replaces the pending code: the first code is refused, the second works")
    func resendReplaces() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()
        let contact = "resend@example.com"

        try await p.sendLoginCode(to: .email(contact))
        let first = try await h.waitForCode(for: contact, count: 1)
        try await p.sendLoginCode(to: .email(contact))
        let second = try await h.waitForCode(for: contact, count: 2)
        try #require(first != second, "both sends drew the same code; the test cannot tell them apart")

        let e = try #require(await rainError { try await p.confirmLoginCode(first) })
        #expect(e.code == .invalidLoginCode)
        #expect(try await p.currentSession().authState == .unauthenticated)

        try await p.confirmLoginCode(second)
        #expect(try await p.currentSession().authState == .authenticated)
    }

    @Test("the first login creates the account; the next login with the same contact finds it")
    func accountCreatedOnce() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()

        let first = try await h.logIn(p, .email("same@example.com"))
        #expect(first.accountCreated)
        let account = try #require(first.session.accountID)

        let second = try await h.logIn(p, .email("SAME@example.com"))
        #expect(!second.accountCreated)
        #expect(second.session.accountID == account)
        #expect(try await p.currentSession().accountID == account)

        try await p.logout()
        let third = try await h.logIn(p, .email("same@example.com"))
        #expect(!third.accountCreated)
        #expect(third.session.accountID == account)
    }

    @Test("an email and a phone number are different accounts")
    func emailAndPhoneAreSeparate() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = h.provider()

        let byEmail = try await h.logIn(p, .email("both@example.com"))
        let byPhone = try await h.logIn(p, .phone("+15551230000"))
        #expect(byEmail.accountCreated)
        #expect(byPhone.accountCreated)
        let emailAccount = try #require(byEmail.session.accountID)
        let phoneAccount = try #require(byPhone.session.accountID)
        #expect(emailAccount != phoneAccount)
    }

    @Test("two profiles hold independent sessions (library and CLI agree)")
    func profilesAreIndependent() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let a = h.provider(profile: "a")
        let d = h.provider()
        try await d.awaitSessionRestore()

        let inA = try await h.logIn(a, .email("profiles@example.com"))
        #expect(inA.accountCreated)
        #expect(try await a.currentSession().authState == .authenticated)
        #expect(try await d.currentSession().authState == .unauthenticated)

        let cliA = try await h.runCLI(["--profile", "a", "status", "--json"])
        #expect(cliA.status == 0, "\(cliA)")
        let jsonA = try jsonObject(cliA.stdout)
        #expect(jsonA["authState"] as? String == "authenticated")
        #expect(jsonA["accountId"] as? String == inA.session.accountID)
        let cliDefault = try await h.runCLI(["status", "--json"])
        #expect(cliDefault.status == 0, "\(cliDefault)")
        #expect(try jsonObject(cliDefault.stdout)["authState"] as? String == "unauthenticated")

        // Profiles are apps: the same email in another app is another account.
        let inDefault = try await h.logIn(d, .email("profiles@example.com"))
        #expect(inDefault.accountCreated)
        #expect(inDefault.session.accountID != inA.session.accountID)

        let out = try await h.runCLI(["--profile", "a", "logout"])
        #expect(out.status == 0, "\(out)")
        #expect(try await a.currentSession().authState == .unauthenticated)
        #expect(try await d.currentSession().authState == .authenticated)
    }
}
