import Foundation
import RainTestSupport
import Testing

/// A fingerprint in the file's form (uppercase, colons) made of one repeated byte.
private func fingerprint(_ byte: String = "AB") -> String {
    Array(repeating: byte, count: 32).joined(separator: ":")
}

/// A good assetlinks.json for example.com, as the tests' starting point.
private let goodAssetLinks = """
    [
      {"relation": ["delegate_permission/common.get_login_creds"],
       "target": {"namespace": "web", "site": "https://example.com"}},
      {"relation": ["delegate_permission/common.handle_all_urls", "delegate_permission/common.get_login_creds"],
       "target": {"namespace": "android_app", "package_name": "com.example.app",
                  "sha256_cert_fingerprints": ["\(fingerprint())"]}}
    ]
    """

private let goodAASA = #"{"webcredentials": {"apps": ["A1B2C3D4E5.com.example.app"]}}"#

@Suite("DomainCLI: rainwallet domain files and domain check, end to end")
struct DomainCLITests {
    /// Writes `text` to `dir/name` and returns the path.
    private func write(_ text: String, _ dir: String, _ name: String) throws -> String {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = "\(dir)/\(name)"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("domain files writes both files, mode 0644, and domain check passes on them")
    func filesThenCheck() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let out = "\(h.directory)/site"
        let r = try await h.runCLI([
            "domain", "files", "--domain", "Example.com", "--out", out, "--apple-team-id", "A1B2C3D4E5", "--bundle-id",
            "com.example.app", "--bundle-id", "com.example.beta", "--android-package", "com.example.app",
            "--android-fingerprint", String(repeating: "ab", count: 32), "--android-fingerprint=\(fingerprint("CD"))",
        ])
        #expect(r.status == 0, "\(r)")
        let aasa = "\(out)/.well-known/apple-app-site-association"
        let links = "\(out)/.well-known/assetlinks.json"
        #expect(r.stdout.contains("Wrote \(aasa)"), "\(r)")
        #expect(r.stdout.contains("host it at https://example.com/.well-known/apple-app-site-association"), "\(r)")
        #expect(r.stdout.contains("host it at https://example.com/.well-known/assetlinks.json"), "\(r)")
        for path in [aasa, links] {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o644, "\(path)")
        }
        let aasaJSON = try jsonObject(String(contentsOfFile: aasa, encoding: .utf8))
        let apps = (aasaJSON["webcredentials"] as? [String: Any])?["apps"] as? [String]
        #expect(apps == ["A1B2C3D4E5.com.example.app", "A1B2C3D4E5.com.example.beta"])
        let linksText = try String(contentsOfFile: links, encoding: .utf8)
        #expect(linksText.contains(fingerprint()) && linksText.contains(fingerprint("CD")), "normalized fingerprints")

        let check = try await h.runCLI(["domain", "check", "--domain", "example.com", aasa, links])
        #expect(check.status == 0, "\(check)")
        #expect(check.stdout == "\(aasa): ok (apple-app-site-association)\n\(links): ok (assetlinks.json)\n", "\(check)")

        let json = try await h.runCLI(["--json", "domain", "check", aasa, links])
        #expect(json.status == 0, "\(json)")
        let array = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
        #expect(array?.count == 2)
        #expect(array?.first?["path"] as? String == aasa)
        #expect(array?.first?["kind"] as? String == "apple-app-site-association")
        #expect((array?.last?["problems"] as? [Any])?.isEmpty == true)
    }

    @Test("domain files --json, one platform, and its refusals")
    func filesJSONAndRefusals() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let out = "\(h.directory)/android"
        let r = try await h.runCLI([
            "--json", "domain", "files", "--domain", "example.com", "--out", out, "--android-package", "com.example.app",
            "--android-fingerprint", fingerprint(),
        ])
        #expect(r.status == 0, "\(r)")
        let json = try jsonObject(r.stdout)
        #expect(json["domain"] as? String == "example.com")
        let files = json["files"] as? [[String: Any]]
        #expect(files?.count == 1)
        #expect(files?.first?["kind"] as? String == "assetlinks.json")
        #expect(files?.first?["url"] as? String == "https://example.com/.well-known/assetlinks.json")
        #expect(!FileManager.default.fileExists(atPath: "\(out)/.well-known/apple-app-site-association"))

        let base = ["domain", "files", "--out", "\(h.directory)/refused"]
        let apple = ["--apple-team-id", "A1B2C3D4E5", "--bundle-id", "com.example.app"]
        let cases: [([String], Int32, String)] = [
            (base + ["--domain", "example.com"], 64, "at least one platform"),
            (base + apple, 64, "--domain"),
            (base + ["--domain", "https://example.com"] + apple, 3, "scheme"),
            (base + ["--domain", "example.com:443"] + apple, 3, "port"),
            (base + ["--domain", "localhost"] + apple, 3, "localhost"),
            (base + ["--domain", "example.com", "--apple-team-id", "abc", "--bundle-id", "com.example.app"], 3, "team id"),
            (base + ["--domain", "example.com", "--apple-team-id", "A1B2C3D4E5", "--bundle-id", "app"], 3, "bundle id"),
            (base + ["--domain", "example.com", "--bundle-id", "com.example.app"], 64, "needs an --apple-team-id"),
            (base + ["--domain", "example.com", "--apple-team-id", "A1B2C3D4E5"], 64, "has no --bundle-id"),
            (base + ["--domain", "example.com", "--android-package", "com.example.app"], 64, "has no --android-fingerprint"),
            (
                base + ["--domain", "example.com", "--android-package", "1com.app", "--android-fingerprint", fingerprint()], 3,
                "package name"
            ),
            (
                base + ["--domain", "example.com", "--android-package", "com.example.app", "--android-fingerprint", "AB:CD"], 3,
                "fingerprint"
            ),
            (base + ["--domain", "example.com", "--frobnicate"] + apple, 64, "unknown option --frobnicate"),
        ]
        for (arguments, status, text) in cases {
            let refused = try await h.runCLI(arguments)
            #expect(refused.status == status, "\(arguments): \(refused)")
            #expect(refused.stderr.contains(text), "\(arguments): \(refused)")
        }
        #expect(!FileManager.default.fileExists(atPath: "\(h.directory)/refused/.well-known/apple-app-site-association"))
    }

    @Test("domain check reports each broken file specifically, one line per problem, exit 3")
    func checkBroken() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let dir = "\(h.directory)/broken"
        let appOnly = try write(
            """
            [{"relation": ["delegate_permission/common.handle_all_urls", "delegate_permission/common.get_login_creds"],
              "target": {"namespace": "android_app", "package_name": "com.example.app",
                         "sha256_cert_fingerprints": ["\(fingerprint())"]}}]
            """, "\(dir)/app-only", "assetlinks.json")
        let noRelation = try write(
            goodAssetLinks.replacingOccurrences(of: "\"delegate_permission/common.handle_all_urls\", ", with: ""),
            "\(dir)/no-relation", "assetlinks.json")
        let badPrint = try write(
            goodAssetLinks.replacingOccurrences(of: fingerprint(), with: "AB:CD:EF"), "\(dir)/bad-print", "assetlinks.json")
        let path = try write(
            goodAssetLinks.replacingOccurrences(of: "\"https://example.com\"", with: "\"https://example.com/login\""),
            "\(dir)/path", "assetlinks.json")
        let noApps = try write(#"{"webcredentials": {"apps": []}}"#, "\(dir)/no-apps", "apple-app-site-association")
        let notJSON = try write(#"{"webcredentials": {"apps": ["#, "\(dir)/not-json", "apple-app-site-association")
        let good = try write(goodAASA, "\(dir)/good", "apple-app-site-association")
        let missing = "\(dir)/missing/assetlinks.json"

        let expectations: [(String, String)] = [
            (appOnly, "the android_app statement is alone"),
            (
                noRelation,
                "statement 2 (android_app com.example.app) lacks the relation delegate_permission/common.handle_all_urls"
            ),
            (badPrint, "fingerprint \"AB:CD:EF\" is not 32 uppercase hex bytes"),
            (path, "statement 1 (site): site \"https://example.com/login\" has a path"),
            (noApps, "webcredentials.apps is empty"),
            (notJSON, "not valid JSON"),
            (missing, "no such file"),
        ]
        for (file, text) in expectations {
            let r = try await h.runCLI(["domain", "check", "--domain", "example.com", file])
            #expect(r.status == 3, "\(file): \(r)")
            let lines = r.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 1, "\(file): \(r)")
            #expect(lines.first?.hasPrefix("\(file): ") == true, "\(file): \(r)")
            #expect(lines.first?.contains(text) == true, "\(file): \(r)")
            #expect(r.stderr.contains("error: RAIN_102: 1 problem found in 1 of 1 file"), "\(file): \(r)")
        }

        // All at once: one line per problem, the good file ok, exit 3.
        let all = try await h.runCLI(["domain", "check", good] + expectations.map(\.0))
        #expect(all.status == 3, "\(all)")
        let lines = all.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == expectations.count + 1, "\(all)")
        #expect(lines.first == "\(good): ok (apple-app-site-association)", "\(all)")
        #expect(all.stderr.contains("7 problems found in 7 of 8 files"), "\(all)")

        let json = try await h.runCLI(["--json", "domain", "check", good, notJSON, appOnly])
        #expect(json.status == 3, "\(json)")
        let array = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
        #expect(array?.map { $0["path"] as? String } == [good, notJSON, appOnly])
        #expect(array?.map { ($0["problems"] as? [String])?.count } == [0, 1, 1])
        #expect(array?.last?["kind"] as? String == "assetlinks.json")
    }

    @Test("domain check without --domain accepts any https site; --domain pins it")
    func checkDomainOption() async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let file = try write(
            goodAssetLinks.replacingOccurrences(of: "https://example.com", with: "https://login.other.org"),
            "\(h.directory)/other", "assetlinks.json")
        let free = try await h.runCLI(["domain", "check", file])
        #expect(free.status == 0, "\(free)")
        let pinned = try await h.runCLI(["domain", "check", "--domain", "example.com", file])
        #expect(pinned.status == 3, "\(pinned)")
        #expect(pinned.stdout.contains("is not the passkey domain; use https://example.com"), "\(pinned)")
        let usage = try await h.runCLI(["domain", "check"])
        #expect(usage.status == 64, "\(usage)")
    }

    @Test(
        "--help works for domain, domain set, domain files and domain check",
        arguments: [["domain"], ["domain", "set"], ["domain", "files"], ["domain", "check"]])
    func help(command: [String]) async throws {
        let h = try DaemonHarness.prepare()
        defer { h.shutdown() }
        let r = try await h.runCLI(command + ["--help"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.hasPrefix("usage: rainwallet domain"), "\(r)")
        if command.count == 2 { #expect(r.stdout.contains("usage: rainwallet domain \(command[1])"), "\(r)") }
        let main = try await h.runCLI(["--help"])
        #expect(main.stdout.contains("domain set|files|check"), "\(main)")
    }
}
