import Foundation
import RainTestSupport
import RainWallet
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The audit log through the real daemon and CLI.
@Suite("Audit log")
struct AuditTests {
    static let config = #"{"profiles": {"default": {"allowExport": true}}}"#

    @Test("a login, an export and a logout appear in `audit --json`; an edited line fails `audit --verify`; no secret")
    func auditTrail() async throws {
        let h = try await DaemonHarness.start(config: Self.config)
        defer { h.shutdown() }
        var scanner = SecretScanner()

        let send = try await h.runCLI(["code", "send", "--email", "audit@example.com"])
        #expect(send.status == 0, "\(send)")
        let code = try await h.waitForCode(for: "audit@example.com")
        scanner.addCode(code)
        let confirm = try await h.runCLI(["code", "confirm", code])
        #expect(confirm.status == 0, "\(confirm)")
        try await h.addStoredSecrets(to: &scanner)
        let phrase = try await h.runCLI(["--json", "export", "phrase", "--yes"])
        #expect(phrase.status == 0, "\(phrase)")
        scanner.addPhrase(try #require(try jsonObject(phrase.stdout)["words"] as? [String]))
        let key = try await h.runCLI(["--json", "export", "key", "--chain", "ethereum", "--yes"])
        #expect(key.status == 0, "\(key)")
        scanner.addText(try #require(try jsonObject(key.stdout)["privateKey"] as? String), label: "private key")
        // A profile that does not allow export: refused, and recorded as such.
        let refused = try await h.runCLI(["--profile", "other", "export", "phrase", "--yes"])
        #expect(refused.status != 0, "\(refused)")
        let logout = try await h.runCLI(["logout"])
        #expect(logout.status == 0, "\(logout)")

        let listed = try await h.runCLI(["--json", "audit"])
        #expect(listed.status == 0, "\(listed)")
        let entries = try listed.stdout.split(separator: "\n").map { try jsonObject(String($0)) }
        let events = entries.map { "\($0["event"] as? String ?? "?")/\($0["result"] as? String ?? "?")" }
        // The first start records the settings; each export was confirmed on the prompt first, but
        // nobody is asked about an export the profile does not allow.
        #expect(
            events == [
                "settings_changed/ok", "login/ok", "prompt_result/ok", "export/ok", "prompt_result/ok", "export/ok",
                "export/refused", "logout/ok",
            ], "\(listed.stdout)")
        let calls = entries.filter { $0["event"] as? String != "prompt_result" && $0["event"] as? String != "settings_changed" }
        let login = try #require(calls.first)
        #expect(login["profile"] as? String == "default")
        #expect(login["detail"] as? String == "code")
        let app = try #require(login["app"] as? [String: Any])
        #expect((app["pid"] as? Int ?? 0) > 0)
        #expect(app["uid"] as? Int == Int(getuid()))
        // The app as per-app access identified it: the CLI's path and the hash of its content.
        #expect(app["path"] as? String == h.binaryDirectory.appendingPathComponent("rainwallet").resolvingSymlinksInPath().path)
        #expect((app["hash"] as? String)?.count == 12, "\(app)")
        #expect(calls[3]["reason"] as? String == "export_not_allowed")
        #expect(calls[3]["profile"] as? String == "other")
        #expect((entries[2]["detail"] as? String)?.hasPrefix("export the wallet's recovery phrase") == true, "\(entries[2])")

        let table = try await h.runCLI(["audit"])
        #expect(table.status == 0 && table.stdout.contains("TIME") && table.stdout.contains("export"), "\(table)")
        let recent = try await h.runCLI(["--json", "audit", "--since", "1h"])
        #expect(recent.stdout.split(separator: "\n").count == 8, "\(recent)")
        let future = try await h.runCLI(["--json", "audit", "--since", "2999-01-01T00:00:00Z"])
        #expect(future.status == 0 && future.stdout.isEmpty, "\(future)")
        let badSince = try await h.runCLI(["audit", "--since", "yesterday"])
        #expect(badSince.status == 64, "\(badSince)")
        let intact = try await h.runCLI(["audit", "--verify"])
        #expect(intact.status == 0, "\(intact)")

        // The file: 0600, and no code, token, phrase or key in it.
        let path = "\(h.stateDirectory)/audit.jsonl"
        var st = stat()
        #expect(lstat(path, &st) == 0 && st.st_mode & 0o777 == 0o600)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(scanner.findings(in: [text]).isEmpty, "\(scanner.findings(in: [text]))")

        // An edit of the login line (a later line chained its hash) is caught and named.
        let edited = text.replacingOccurrences(of: #""detail":"code""#, with: #""detail":"passkey""#)
        #expect(edited != text)
        try edited.write(toFile: path, atomically: false, encoding: .utf8)
        let broken = try await h.runCLI(["audit", "--verify"])
        #expect(broken.status == 1, "\(broken)")
        #expect(broken.stderr.contains("audit.jsonl line 2 is edited"), "\(broken)")
        let brokenJSON = try await h.runCLI(["--json", "audit", "--verify"])
        #expect(brokenJSON.status == 1, "\(brokenJSON)")
        let found = try jsonObject(brokenJSON.stdout)
        #expect(found["problem"] as? String == "edited" && found["line"] as? Int == 2, "\(brokenJSON)")
    }
}
