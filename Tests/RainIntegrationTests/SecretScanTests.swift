import Foundation
import RainCore
import RainCrypto
import RainTestSupport
import RainWallet
import Testing

/// Every flow against the real daemon with debug logging; then no code, token, key or phrase
/// may appear in its log, the CLI's output or any error message.
@Suite("Secret scanning of logs and output")
struct SecretScanTests {
    static let config = """
        {"authority": {"sendLimits": {"contactMaxSends": 1000, "accountMaxSends": 1000}},
         "profiles": {"default": {"allowExport": true}, "pk": {"passkeyDomain": "example.com"}}}
        """

    /// Everything the flows printed, to be scanned.
    final class Transcript: @unchecked Sendable {
        // @unchecked: used by one test task only.
        var texts: [String] = []
        let h: DaemonHarness
        init(_ h: DaemonHarness) { self.h = h }

        /// Runs the CLI, keeps what it printed, and returns the result.
        @discardableResult
        func cli(_ arguments: [String], expect status: Int32?, sourceLocation: SourceLocation = #_sourceLocation)
            async throws -> CLIResult
        {
            let r = try await h.runCLI(arguments)
            if let status { #expect(r.status == status, "\(arguments): \(r)", sourceLocation: sourceLocation) }
            #expect(r.status != 0 || status == 0, "\(arguments) should fail: \(r)", sourceLocation: sourceLocation)
            texts += [r.stdout, r.stderr]
            return r
        }

        /// Runs a library call that must fail and keeps its message.
        func failure(sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
            let error = await rainError(body)
            #expect(error != nil, "expected a failure", sourceLocation: sourceLocation)
            if let error { texts += [error.message, error.description, "\(error.details)"] }
        }
    }

    @Test("code login, lockout, refresh, export, passkeys, contacts, refused sends: no secret in logs or output")
    func realFlowsLeakNothing() async throws {
        let h = try await DaemonHarness.start(
            config: Self.config, extraArguments: ["--log-level", "debug"], sendLimits: .defaults)
        defer { h.shutdown() }
        let t = Transcript(h)
        var scanner = SecretScanner()
        var exports: [String] = []

        // A code locked by three wrong attempts, then refused even when right.
        try await t.cli(["code", "send", "--email", "locked@example.com"], expect: 0)
        let locked = try await h.waitForCode(for: "locked@example.com")
        for _ in 0..<3 { try await t.cli(["code", "confirm", wrongCode(for: locked)], expect: 6) }
        try await t.cli(["code", "confirm", locked], expect: 6)

        // A code login, then a quick resend refused by the cooldown (CLI and library).
        try await t.cli(["code", "send", "--email", "scan@example.com"], expect: 0)
        let code = try await h.waitForCode(for: "scan@example.com")
        try await t.cli(["--json", "code", "confirm", code], expect: 0)
        try await t.cli(["code", "confirm", code], expect: nil)  // nothing pending any more
        try await t.cli(["code", "send", "--email", "scan@example.com"], expect: 8)
        try await t.cli(["--json", "code", "send", "--email", "scan@example.com"], expect: 8)
        await t.failure { try await h.provider().sendLoginCode(to: .email("scan@example.com")) }
        try await h.addStoredSecrets(to: &scanner)

        // Reads and refreshes (new tokens each time).
        try await t.cli(["--json", "status"], expect: 0)
        try await t.cli(["--json", "account"], expect: 0)
        try await t.cli(["refresh"], expect: 0)
        try await h.addStoredSecrets(to: &scanner)
        try await t.cli(["--json", "refresh"], expect: 0)
        try await h.addStoredSecrets(to: &scanner)

        // Exports: their output is the secret (kept out of the scanned texts).
        let phrase = try await h.runCLI(["--json", "export", "phrase", "--yes"])
        #expect(phrase.status == 0, "\(phrase)")
        let words = try #require(try jsonObject(phrase.stdout)["words"] as? [String])
        scanner.addPhrase(words)
        scanner.addKey(try BIP39.entropy(fromMnemonic: words), label: "wallet entropy")
        let ethereum = try await h.runCLI(["export", "key", "--chain", "ethereum", "--yes"])
        let ethereumKey = ethereum.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        scanner.addKey(try #require(Hex.decode(String(ethereumKey.dropFirst(2)))), label: "ethereum key")
        let solana = try await h.runCLI(["export", "key", "--chain", "solana", "--yes"])
        let keypair = try #require(Base58.decode(solana.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        scanner.addKey(keypair, label: "solana keypair")
        scanner.addKey(Array(keypair.prefix(32)), label: "solana seed")
        exports += [phrase.stdout, ethereum.stdout, solana.stdout]
        _ = try await h.provider().exportRecoveryPhrase()

        // A backup contact: a wrong code, then the right one; a quick second send is refused.
        try await t.cli(["contact", "add", "--email", "backup-scan@example.com"], expect: 0)
        let verification = try await h.waitForCode(for: "backup-scan@example.com")
        try await t.cli(["contact", "confirm", wrongCode(for: verification)], expect: 6)
        try await t.cli(["contact", "add", "--email", "backup-scan@example.com"], expect: 8)
        try await t.cli(["--json", "contact", "confirm", verification], expect: 0)

        // Passkeys on another profile: sign up, log out, log in; failures on the way.
        let file = "\(h.directory)/scan-authenticator.json"
        try await t.cli(["--profile", "pk", "--json", "passkey", "signup", "--authenticator", file], expect: 0)
        try await h.addStoredSecrets(to: &scanner)
        try await t.cli(["--profile", "pk", "logout"], expect: 0)
        try await t.cli(["--profile", "pk", "passkey", "login", "--authenticator", "\(h.directory)/none.json"], expect: 9)
        try await t.cli(["--profile", "pk", "--json", "passkey", "login", "--authenticator", file], expect: 0)
        try await h.addStoredSecrets(to: &scanner)

        // Failures without a session.
        try await t.cli(["--profile", "other", "export", "phrase", "--yes"], expect: nil)
        try await t.cli(["--profile", "other", "refresh"], expect: nil)
        await t.failure { _ = try await h.provider(profile: "other").account() }

        // Every code the outbox delivered, in both apps.
        for profile in ["default", "pk"] {
            for c in try await h.outboxCodes(profile: profile) { scanner.addCode(c) }
        }
        try await t.cli(["logout"], expect: 0)
        try await h.stop()

        let log = h.log
        #expect(log.contains(" debug "), "the daemon did not log at debug level")
        #expect(log.contains("code.limited"))
        let findings = scanner.findings(in: [log] + t.texts)
        #expect(findings.isEmpty, "\(findings)")
        // The scanner does see the secrets where they belong (the exports), so an empty result means something.
        #expect(!scanner.findings(in: exports).isEmpty)
        #expect(t.texts.count > 40)
    }
}
