import Foundation
import RainSoftAuthenticator
import RainTestSupport
import RainWallet
import Testing

/// The account's passkeys listed with their kind and creation, and removed one at a time: asked on
/// the prompt, audited, never the account's last way to log in, never another account's.
@Suite("Listing and removing passkeys")
struct PasskeyRemovalTests {
    static func listed(_ h: DaemonHarness) async throws -> [[String: Any]] {
        let result = try await h.runCLI(["--json", "passkey", "list"])
        #expect(result.status == 0, "\(result)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
    }

    @Test(
        "passkey list shows domain, kind and creation; remove asks on the prompt naming the passkey: dismissed removes nothing, confirmed removes it, both audited; an unknown id is exit 3"
    )
    func listThenRemove() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let provider = RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.socketPath))
        try await h.logIn(provider, .email("remove@example.com"))
        try await provider.addPasskey(anchor: SoftAuthenticator(path: "\(h.directory)/authenticator.json"))

        let passkeys = try await Self.listed(h)
        let passkey = try #require(passkeys.first)
        #expect(passkeys.count == 1)
        #expect(passkey["domain"] as? String == "example.com" && passkey["kind"] as? String == "file", "\(passkey)")
        #expect(passkey["createdAt"] is String && passkey["lastUsedAt"] is NSNull, "\(passkey)")
        let id = try #require(passkey["credentialId"] as? String)
        let text = try await h.runCLI(["passkey", "list"])
        #expect(text.status == 0 && text.stdout.contains("\(id)  example.com  file  created "), "\(text)")

        // Dismissed: RAIN_401, still there.
        h.autoPinentryDismisses(true)
        let dismissed = await rainError { try await provider.removePasskey(id: id) }
        #expect(dismissed?.code == .userCancelled, "\(String(describing: dismissed))")
        h.autoPinentryDismisses(false)
        #expect(try await provider.account().passkeys.map(\.credentialID) == [id])

        // Confirmed through the CLI: the prompt names the passkey; the account has none left.
        let removed = try await h.runCLI(["--json", "passkey", "remove", id])
        #expect(removed.status == 0 && removed.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "\(removed)")
        let prompt = DaemonHarness.unescaped(h.answeredPrompts.last ?? "")
        #expect(
            prompt.contains("remove a passkey for example.com") && prompt.contains("Kind: file")
                && prompt.contains("Passkey id: \(id)"), "\(prompt)")
        #expect(try await provider.account().passkeys.isEmpty)

        // Both answers are audited with the passkey's domain and kind: the refusal as the prompt's
        // result, the removal as passkey_removed.
        let audit = try await PasskeyDomainChangeTests.audit(h).filter { $0["detail"] as? String == "example.com file" }
        let answers = audit.map { "\($0["event"] as? String ?? "?") \($0["result"] as? String ?? "?")" }
        #expect(answers == ["prompt_result refused", "prompt_result ok", "passkey_removed ok"], "\(answers)")

        // An id the account does not hold: exit 3, credential_unknown, nobody asked.
        let prompts = h.answeredPrompts.count
        let unknown = try await h.runCLI(["passkey", "remove", id])
        #expect(unknown.status == 3 && unknown.stderr.contains("no passkey with that id"), "\(unknown)")
        #expect(h.answeredPrompts.count == prompts)
    }

    @Test(
        "a passkey-only account keeps its last passkey (last_login_method, nobody asked); with a second one the first goes; another account cannot remove it"
    )
    func neverTheLastNorAnotherAccounts() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let provider = RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.socketPath))
        try await provider.signUpWithPasskey(anchor: SoftAuthenticator(path: "\(h.directory)/first.json"))
        let first = try #require(try await provider.account().passkeys.first?.credentialID)

        let prompts = h.answeredPrompts.count
        let last = await rainError { try await provider.removePasskey(id: first) }
        #expect(last?.code == .invalidArgument && last?.details.reason == "last_login_method", "\(String(describing: last))")
        #expect(h.answeredPrompts.count == prompts, "nobody is asked about a removal that cannot happen")

        try await provider.addPasskey(anchor: SoftAuthenticator(path: "\(h.directory)/second.json"))
        let account = try await provider.removePasskey(id: first)
        let second = try #require(account.passkeys.first?.credentialID)
        #expect(account.passkeys.map(\.credentialID) == [second])

        // Another account (another profile, logged in by code) does not hold it: unknown to it.
        let other = RainProvider(
            RainWalletConfig(passkeyDomain: "example.com", profile: "other", socketPath: h.socketPath))
        try await h.logIn(other, .email("someone-else@example.com"))
        let foreign = await rainError { try await other.removePasskey(id: second) }
        #expect(foreign?.details.reason == "credential_unknown", "\(String(describing: foreign))")
        #expect(try await provider.account().passkeys.map(\.credentialID) == [second])
    }
}
