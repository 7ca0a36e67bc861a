import Foundation
import RainSoftAuthenticator
import RainTestSupport
import RainWallet
import RainWire
import Testing

/// Moving a profile's passkey domain: asked by the profile's own app, confirmed on the prompt,
/// audited; the session stays, the old domain's passkeys stay listed but no longer log in.
@Suite("Moving a profile's passkey domain")
struct PasskeyDomainChangeTests {
    /// The test runner owns profile `default` (listed under it in the policy); the harness's
    /// `rainwallet` may use every profile but owns none.
    static var runnerOwnsDefault: String {
        #"{"access": {"apps": {"default": [{"path": "\#(DaemonHarness.testRunnerPath)"}]}}}"#
    }

    static func audit(_ h: DaemonHarness, program: URL? = nil) async throws -> [[String: Any]] {
        let listed =
            if let program { try await h.runCLI(["--json", "audit"], program: program) } else {
                try await h.runCLI(["--json", "audit"])
            }
        #expect(listed.status == 0, "\(listed)")
        return try listed.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    static func domainChanges(_ entries: [[String: Any]]) -> [String] {
        entries.filter { $0["event"] as? String == "passkey_domain_changed" }.map {
            "\($0["result"] as? String ?? "?"): \($0["detail"] as? String ?? "?")"
        }
    }

    @Test(
        "the owner's move, confirmed: the session stays, an old passkey is refused naming both domains and stays listed, a new one is added and logs in; dismissed and another app's move change nothing; all audited"
    )
    func moveConfirmedDismissedRefused() async throws {
        let h = try await DaemonHarness.start(config: Self.runnerOwnsDefault)
        defer { h.shutdown() }
        let anchor = SoftAuthenticator(path: "\(h.directory)/authenticator.json")
        let old = RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.socketPath))
        let session = try await h.logIn(old, .email("move@example.com")).session
        try await old.addPasskey(anchor: anchor)
        // A ceremony begun for the old domain, to be finished after the move.
        let stale = try await old.call(Method.passkeyBeginLogin, BeginPasskeyRequest(), as: BeginPasskeyResponse.self)

        // The app's new version asks for the new domain: Configure refuses it (it never moves the domain).
        let moved = RainProvider(RainWalletConfig(passkeyDomain: "other.com", socketPath: h.socketPath))
        let mismatch = await rainError { try await moved.awaitSessionRestore() }
        #expect(mismatch?.details.reason == "passkey_domain_mismatch", "\(String(describing: mismatch))")

        // Another app (approved for every profile, owner of none) may not move it: nobody is asked.
        let prompts = h.answeredPrompts.count
        let other = try await h.runCLI(["domain", "set", "other.com"])
        #expect(other.status == 5 && other.stderr.contains("move its passkey domain"), "\(other)")
        #expect(h.answeredPrompts.count == prompts)

        // Dismissed: RAIN_401, nothing changed.
        h.autoPinentryDismisses(true)
        let dismissed = await rainError { try await moved.changePasskeyDomain(to: "other.com") }
        #expect(dismissed?.code == .userCancelled, "\(String(describing: dismissed))")
        #expect(try await old.profilePasskeyDomain() == "example.com")
        h.autoPinentryDismisses(false)

        // Confirmed: the prompt names the profile and both domains.
        #expect(try await moved.changePasskeyDomain(to: "other.com") == "example.com")
        let prompt = DaemonHarness.unescaped(h.answeredPrompts.last ?? "")
        #expect(
            prompt.contains("move profile default from passkey domain example.com to other.com")
                && prompt.contains("the session stays"), "\(prompt)")
        #expect(try await old.profilePasskeyDomain() == "other.com")
        // The provider's own refusal is gone: its passkey calls work at once.
        try await moved.awaitSessionRestore()

        // The session stays.
        let after = try await old.currentSession()
        #expect(after.authState == .authenticated && after.accountID == session.accountID, "\(after)")
        #expect(after.expiresAt == session.expiresAt)

        // The ceremony begun for the old domain was dropped with it.
        let staleAssertion = try await anchor.getAssertion(optionsJSON: stale.optionsJSON, origin: stale.origin)
        let staleFinish = await rainError {
            _ = try await old.call(
                Method.passkeyFinish, FinishPasskeyRequest(ceremonyID: stale.ceremonyID, responseJSON: staleAssertion),
                as: FinishPasskeyResponse.self)
        }
        #expect(staleFinish?.details.reason == "challenge_expired", "\(String(describing: staleFinish))")

        // The authenticator holds no passkey for the new domain yet: dismissed, as a real one would.
        #expect(await rainError { try await moved.loginWithPasskey(anchor: anchor) }?.code == .userCancelled)
        // An authenticator that answers with the old domain's passkey anyway: refused, naming both domains.
        let begun = try await moved.call(Method.passkeyBeginLogin, BeginPasskeyRequest(), as: BeginPasskeyResponse.self)
        #expect(begun.origin == "https://other.com")
        let oldOptions = begun.optionsJSON.replacingOccurrences(of: #""other.com""#, with: #""example.com""#)
        let oldAssertion = try await anchor.getAssertion(optionsJSON: oldOptions, origin: "https://example.com")
        let refused = await rainError {
            _ = try await moved.call(
                Method.passkeyFinish, FinishPasskeyRequest(ceremonyID: begun.ceremonyID, responseJSON: oldAssertion),
                as: FinishPasskeyResponse.self)
        }
        #expect(refused?.code == .invalidArgument && refused?.details.reason == "passkey_other_domain")
        // Naming both domains is the rule itself, so the message is checked here.
        #expect(
            refused.map { $0.message.contains("registered for example.com") && $0.message.contains("now uses other.com") }
                == true, "\(String(describing: refused))")
        #expect(try await old.currentSession().accountID == session.accountID)
        #expect(try await old.account().passkeys.map(\.rpID) == ["example.com"])

        // A passkey for the new domain: added (asked on the prompt), listed beside the old one, and it logs in.
        try await moved.addPasskey(anchor: anchor)
        #expect(try await old.account().passkeys.map(\.rpID) == ["example.com", "other.com"])
        let login = try await moved.loginWithPasskey(anchor: anchor)
        #expect(login.accountID == session.accountID && login.walletID == session.walletID)

        // The same domain again: answered without a prompt.
        let asked = h.answeredPrompts.count
        #expect(try await moved.changePasskeyDomain(to: "other.com") == "other.com")
        #expect(h.answeredPrompts.count == asked)

        // Kept across a restart.
        try await h.restart()
        #expect(try await old.profilePasskeyDomain() == "other.com")

        let changes = Self.domainChanges(try await Self.audit(h))
        #expect(
            changes == [
                "refused: example.com → other.com", "cancelled: example.com → other.com", "ok: example.com → other.com",
            ], "\(changes)")
    }

    @Test("a domain the daemon's config sets is moved there: the call is RAIN_102 passkey_domain_from_config, asking nobody")
    func configDomainIsNotMoved() async throws {
        let config = #"""
            {"profiles": {"default": {"passkeyDomain": "example.com"}},
             "access": {"apps": {"default": [{"path": "\#(DaemonHarness.testRunnerPath)"}]}}}
            """#
        let h = try await DaemonHarness.start(config: config)
        defer { h.shutdown() }
        let wallet = RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.socketPath))
        let refused = await rainError { try await wallet.changePasskeyDomain(to: "other.com") }
        #expect(refused?.code == .invalidArgument && refused?.details.reason == "passkey_domain_from_config")
        #expect(try await wallet.changePasskeyDomain(to: "example.com") == "example.com")
        #expect(h.answeredPrompts.isEmpty, "\(h.answeredPrompts)")
        #expect(try await wallet.profilePasskeyDomain() == "example.com")
        let invalid = await rainError { try await wallet.changePasskeyDomain(to: "https://other.com") }
        #expect(invalid?.details.reason == "invalid_passkey_domain")
    }

    @Test(
        "rainwallet domain set, run as the profile's app: progress while the prompt waits, then passkey add and login on the new domain; another approved app is refused"
    )
    func cli() async throws {
        let h = try await DaemonHarness.start(
            config: PerAppAccessTests.config, access: .enforced(pinentry: DaemonHarness.autoPinentryName))
        defer { h.shutdown() }
        let apps = try await PerAppAccessTests.Apps.make(h)
        let file = "\(h.directory)/authenticator.json"

        // A signs up on example.com: it owns the profile, which gets that domain.
        let signup = try await h.runCLI(
            ["passkey", "signup", "--domain", "example.com", "--authenticator", file], program: apps.a)
        #expect(signup.status == 0, "\(signup)")
        // B, approved later, may use the profile but not move its domain.
        #expect(try await h.runCLI(["apps", "approve", apps.b.path], program: apps.a).status == 0)
        let refused = try await h.runCLI(["domain", "set", "other.com"], program: apps.b)
        #expect(refused.status == 5 && refused.stderr.contains("not move its passkey domain"), "\(refused)")

        let set = try await h.runCLI(["domain", "set", "other.com"], program: apps.a)
        #expect(set.status == 0, "\(set)")
        #expect(
            set.stderr.contains(
                "Moving profile default from passkey domain example.com to other.com: confirm on the rainwalletd prompt"),
            "\(set)")
        #expect(set.stdout.contains("Profile default now uses passkey domain other.com (was example.com)"), "\(set)")
        let status = try await h.runCLI(["--json", "status"], program: apps.a)
        #expect(status.stdout.contains(#""authState":"authenticated""#), "\(status)")

        let add = try await h.runCLI(["passkey", "add", "--authenticator", file], program: apps.a)
        #expect(add.status == 0 && add.stdout.contains("Added a passkey for other.com"), "\(add)")
        let account = try await h.runCLI(["--json", "account"], program: apps.a)
        #expect(
            account.stdout.contains(#""domain":"example.com""#) && account.stdout.contains(#""domain":"other.com""#),
            "\(account)")
        #expect(try await h.runCLI(["logout"], program: apps.a).status == 0)
        let login = try await h.runCLI(["passkey", "login", "--authenticator", file], program: apps.a)
        #expect(login.status == 0 && login.stdout.contains("Logged in with a passkey for other.com"), "\(login)")

        let again = try await h.runCLI(["--json", "domain", "set", "other.com"], program: apps.a)
        #expect(again.status == 0 && again.stdout.contains(#""previousDomain":"other.com""#), "\(again)")

        let changes = Self.domainChanges(try await Self.audit(h, program: apps.a))
        #expect(changes == ["refused: example.com → other.com", "ok: example.com → other.com"], "\(changes)")
    }
}
