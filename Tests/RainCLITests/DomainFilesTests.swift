import Foundation
import RainCore
import Testing

@testable import RainCLI

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

/// The problems `domain check` reports for `text` stored at `path`.
private func problems(_ text: String, path: String = "x/.well-known/assetlinks.json", domain: String? = "example.com")
    -> [String]
{
    DomainFiles.problems(path: path, bytes: Array(text.utf8), domain: domain).problems
}

@Suite("DomainFiles: building and checking the association files")
struct DomainFilesTests {
    @Test(
        "domain shape: accepted and refused",
        arguments: [
            ("example.com", "example.com"), ("Login.Example.CO.uk", "login.example.co.uk"),
            ("xn--bcher-kva.de", "xn--bcher-kva.de"),
        ])
    func domainsAccepted(input: String, normalized: String) throws {
        #expect(try DomainFiles.normalizedDomain(input) == normalized)
    }

    @Test(
        "domain shape: each refusal names what is wrong",
        arguments: [
            ("https://example.com", "scheme"), ("example.com/login", "path"), ("example.com:443", "port"),
            ("localhost", "localhost"), ("app.localhost", "localhost"), ("com", "two labels"), ("", "empty"),
            ("example.com.", "dot"), ("exa mple.com", "not a host name"), ("-a.example.com", "hyphen"),
            ("a..example.com", "empty label"), ("192.168.1.1", "IP address"), ("bücher.de", "punycode"),
            ("ex_ample.com", "characters"),
        ])
    func domainsRefused(input: String, expected: String) {
        #expect {
            try DomainFiles.normalizedDomain(input)
        } throws: { error in
            (error as? DomainFiles.InputProblem)?.message.contains(expected) == true
        }
    }

    @Test("team ids, bundle ids and package names")
    func identifiers() {
        #expect((try? DomainFiles.validateTeamID("A1B2C3D4E5")) != nil)
        for bad in ["a1b2c3d4e5", "A1B2C3D4E", "A1B2C3D4E5F", "A1B2C3D4-5"] {
            #expect((try? DomainFiles.validateTeamID(bad)) == nil, "\(bad)")
        }
        for good in ["com.example.app", "com.Example.my-app", "io.x2.App"] {
            #expect((try? DomainFiles.validateBundleID(good)) != nil, "\(good)")
        }
        for bad in ["app", "com..app", "com.example.app_1", ".com.example", "com.example."] {
            #expect((try? DomainFiles.validateBundleID(bad)) == nil, "\(bad)")
        }
        for good in ["com.example.app", "com.example.my_app2", "Com.Example.App"] {
            #expect((try? DomainFiles.validatePackageName(good)) != nil, "\(good)")
        }
        for bad in ["app", "com.1example", "com.example.my-app", "com._app", "com.example.class", "com..app"] {
            #expect((try? DomainFiles.validatePackageName(bad)) == nil, "\(bad)")
        }
    }

    @Test("fingerprints: lowercase and colon-less input normalized; wrong lengths and digits refused")
    func fingerprints() throws {
        let canonical = fingerprint("0F")
        #expect(try DomainFiles.normalizedFingerprint(canonical) == canonical)
        #expect(try DomainFiles.normalizedFingerprint(canonical.lowercased()) == canonical)
        #expect(try DomainFiles.normalizedFingerprint(String(repeating: "0f", count: 32)) == canonical)
        for bad in [
            fingerprint("0G"), String(repeating: "0F", count: 31), Array(repeating: "0F", count: 31).joined(separator: ":"),
            canonical + ":00", "0F:" + Array(repeating: "0F0", count: 31).joined(separator: ":"), "",
        ] {
            #expect((try? DomainFiles.normalizedFingerprint(bad)) == nil, "\(bad)")
        }
        #expect(DomainFiles.isCanonicalFingerprint(canonical))
        #expect(!DomainFiles.isCanonicalFingerprint(canonical.lowercased()))
    }

    @Test("built files pass the check, for the domain and without one")
    func builtFilesPass() throws {
        let aasa = DomainFiles.appleAppSiteAssociation(apps: [
            .init(teamID: "A1B2C3D4E5", bundleID: "com.example.app"), .init(teamID: "A1B2C3D4E5", bundleID: "com.example.beta"),
        ])
        let links = DomainFiles.assetLinks(
            domain: "example.com",
            apps: [.init(packageName: "com.example.app", fingerprints: [fingerprint(), fingerprint("CD")])])
        let aasaText = String(decoding: aasa, as: UTF8.self)
        let linksText = String(decoding: links, as: UTF8.self)
        #expect(problems(aasaText, path: "apple-app-site-association").isEmpty)
        #expect(problems(linksText).isEmpty)
        #expect(problems(linksText, domain: nil).isEmpty)
        #expect(!linksText.contains("\\/"), "slashes are not escaped")
        let parsed = try JSONDecoder().decode(JSONValue.self, from: Data(links))
        guard case .array(let statements) = parsed else {
            Issue.record("not an array")
            return
        }
        #expect(statements.count == 2)
        #expect(
            statements.first
                == .object([
                    "relation": .array([.string(DomainFiles.getLoginCreds)]),
                    "target": .object(["namespace": .string("web"), "site": .string("https://example.com")]),
                ]))
    }

    @Test("kind by name, else by content")
    func kinds() {
        #expect(DomainFiles.kind(path: "/a/apple-app-site-association", bytes: []) == .appleAppSiteAssociation)
        #expect(DomainFiles.kind(path: "/a/assetlinks.json", bytes: []) == .assetLinks)
        #expect(DomainFiles.kind(path: "/a/one", bytes: Array(goodAASA.utf8)) == .appleAppSiteAssociation)
        #expect(DomainFiles.kind(path: "/a/two", bytes: Array(goodAssetLinks.utf8)) == .assetLinks)
        #expect(DomainFiles.kind(path: "/a/three", bytes: Array("{}".utf8)) == .unknown)
        #expect(problems("{}", path: "/a/three").first?.contains("neither") == true)
    }

    @Test("each broken assetlinks.json is reported specifically")
    func brokenAssetLinks() {
        let appOnly = """
            [{"relation": ["delegate_permission/common.handle_all_urls", "delegate_permission/common.get_login_creds"],
              "target": {"namespace": "android_app", "package_name": "com.example.app",
                         "sha256_cert_fingerprints": ["\(fingerprint())"]}}]
            """
        #expect(
            problems(appOnly) == [
                "the android_app statement is alone: add the site statement (namespace web, relation "
                    + "delegate_permission/common.get_login_creds); the device refuses a file without it"
            ])

        let noHandle = goodAssetLinks.replacingOccurrences(of: "\"delegate_permission/common.handle_all_urls\", ", with: "")
        #expect(
            problems(noHandle) == [
                "statement 2 (android_app com.example.app) lacks the relation delegate_permission/common.handle_all_urls"
            ])

        let siteNoCreds = goodAssetLinks.replacingOccurrences(
            of: "[\"delegate_permission/common.get_login_creds\"]", with: "[\"delegate_permission/common.handle_all_urls\"]")
        #expect(problems(siteNoCreds) == ["statement 1 (site) lacks the relation delegate_permission/common.get_login_creds"])

        let lowerPrint = goodAssetLinks.replacingOccurrences(of: fingerprint(), with: fingerprint("ab"))
        #expect(problems(lowerPrint).count == 1)
        #expect(
            problems(lowerPrint).first?.contains("fingerprint \"\(fingerprint("ab"))\" is not 32 uppercase hex bytes") == true)

        let shortPrint = goodAssetLinks.replacingOccurrences(of: fingerprint(), with: "AB:CD")
        #expect(problems(shortPrint).first?.contains("fingerprint \"AB:CD\"") == true)

        let noPrints = goodAssetLinks.replacingOccurrences(of: "[\"\(fingerprint())\"]", with: "[]")
        #expect(problems(noPrints) == ["statement 2 (android_app com.example.app): sha256_cert_fingerprints is empty"])

        let noPackage = goodAssetLinks.replacingOccurrences(of: "\"package_name\": \"com.example.app\",", with: "")
        #expect(problems(noPackage) == ["statement 2 (android_app) has no package_name string"])

        let siteOnly = """
            [{"relation": ["delegate_permission/common.get_login_creds"],
              "target": {"namespace": "web", "site": "https://example.com"}}]
            """
        #expect(problems(siteOnly).first?.hasPrefix("no android_app statement") == true)

        #expect(problems("{\"a\": 1}") == ["assetlinks.json must be a JSON array of statements"])
        #expect(problems("[]") == ["assetlinks.json has no statements"])
        #expect(problems(#"[{"relation": ["a,]"]}]"#).first == "statement 1 has no target object", "a comma in a string is fine")
    }

    @Test(
        "site problems with and without --domain",
        arguments: [
            ("https://example.com/app", "example.com", "has a path"), ("https://example.com/", "example.com", "has a path"),
            ("https://example.com/app", nil, "has a path"), ("http://example.com", "example.com", "must use https"),
            ("https://example.com:8443", "example.com", "has a port"),
            ("https://other.com", "example.com", "not the passkey domain"),
            ("example.com", nil, "not a URL"), ("https://localhost", nil, "localhost"),
        ] as [(String, String?, String)])
    func sites(site: String, domain: String?, expected: String) {
        let text = goodAssetLinks.replacingOccurrences(of: "\"https://example.com\"", with: "\"\(site)\"")
        let found = problems(text, domain: domain)
        #expect(found.count == 1, "\(found)")
        #expect(found.first?.hasPrefix("statement 1 (site): site \"\(site)\"") == true, "\(found)")
        #expect(found.first?.contains(expected) == true, "\(found)")
    }

    @Test("sites accepted without --domain: any https origin, a port allowed")
    func sitesWithoutDomain() {
        #expect(DomainFiles.siteProblem("https://login.other.org", domain: nil) == nil)
        #expect(DomainFiles.siteProblem("https://login.other.org:8443", domain: nil) == nil)
        #expect(DomainFiles.siteProblem("https://Example.com", domain: "example.com") == nil)
    }

    @Test("each broken apple-app-site-association is reported specifically")
    func brokenAASA() {
        let path = "apple-app-site-association"
        #expect(
            problems(#"{"webcredentials": {"apps": []}}"#, path: path).first?.hasPrefix("webcredentials.apps is empty") == true)
        #expect(problems(#"{"webcredentials": {}}"#, path: path) == ["webcredentials has no apps array"])
        #expect(problems(#"{"applinks": {}}"#, path: path).first?.hasPrefix("no webcredentials") == true)
        #expect(
            problems(#"{"webcredentials": {"apps": "x"}}"#, path: path) == ["webcredentials.apps must be an array of strings"])
        let badIDs = problems(
            #"{"webcredentials": {"apps": ["com.example.app", "a1b2c3d4e5.com.example.app", 3, "A1B2C3D4E5.app"]}}"#, path: path)
        #expect(badIDs.count == 4, "\(badIDs)")
        #expect(badIDs.allSatisfy { $0.hasPrefix("webcredentials.apps[") }, "\(badIDs)")
        #expect(problems("[1]", path: path) == ["apple-app-site-association must be a JSON object"])
    }

    @Test("invalid JSON is reported as such, whatever the kind")
    func invalidJSON() {
        for text in ["{\"webcredentials\": ", "", "[1,]", "{\"a\": [1],\n }", "nope", "[1] x"] {
            for path in ["apple-app-site-association", "assetlinks.json", "other"] {
                let found = problems(text, path: path)
                #expect(found.count == 1 && found.first?.hasPrefix("not valid JSON") == true, "\(text) \(path): \(found)")
            }
        }
    }
}
