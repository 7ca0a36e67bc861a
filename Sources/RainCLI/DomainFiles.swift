import FoundationEssentials
import RainCore

/// Builds and checks the two association files a passkey domain hosts (seed "Set up your domain"):
/// `https://<domain>/.well-known/apple-app-site-association` (iOS, `webcredentials` apps) and
/// `https://<domain>/.well-known/assetlinks.json` (Android, a site statement and an `android_app`
/// statement). Pure functions: values in, JSON bytes or problem texts out; `DomainCommand` does
/// the files and the printing.
enum DomainFiles {
    /// The relation that lets the app use the site's passkeys (both statements need it).
    static let getLoginCreds = "delegate_permission/common.get_login_creds"
    /// The relation that makes the site's links open the app (the `android_app` statement needs it).
    static let handleAllURLs = "delegate_permission/common.handle_all_urls"

    /// A mistake in one input value (a domain, team id, bundle id, package name or fingerprint).
    struct InputProblem: Error, Equatable, Sendable, CustomStringConvertible {
        /// What is wrong, naming the value.
        var message: String
        init(_ message: String) { self.message = message }
        var description: String { message }
    }

    /// An iOS app listed under `webcredentials`.
    struct AppleApp: Hashable, Sendable {
        /// The 10-character Apple team id, like `A1B2C3D4E5`.
        var teamID: String
        /// The bundle id, like `com.example.app`.
        var bundleID: String
        /// The `TEAMID.bundle.id` form the file lists.
        var appID: String { "\(teamID).\(bundleID)" }
    }

    /// An Android app: its package name and the SHA-256 fingerprints of its signing certificates.
    struct AndroidApp: Hashable, Sendable {
        /// The package name (application id), like `com.example.app`.
        var packageName: String
        /// Normalized fingerprints: 32 uppercase hex bytes separated by colons.
        var fingerprints: [String]
    }

    /// Which association file a path holds.
    enum Kind: String, Sendable {
        /// iOS `apple-app-site-association`.
        case appleAppSiteAssociation = "apple-app-site-association"
        /// Android `assetlinks.json`.
        case assetLinks = "assetlinks.json"
        /// Neither could be recognized from the name or the content.
        case unknown
    }

    // MARK: input values

    /// The passkey domain in lowercase, after the shape check the CLI can do without the Public
    /// Suffix List (the daemon checks that the domain is registrable): a host name alone, no
    /// scheme, port, path or trailing dot, at least two labels, not `localhost`, not an IP address.
    /// - Throws: an `InputProblem` naming what is wrong.
    static func normalizedDomain(_ text: String) throws(InputProblem) -> String {
        let d = text.lowercased()
        func bad(_ why: String) -> InputProblem { InputProblem("domain \"\(text)\" \(why)") }
        if d.isEmpty { throw InputProblem("the domain is empty") }
        if d.contains("://") { throw bad("has a scheme; give the host name alone, like example.com") }
        if d.contains("/") { throw bad("has a path; give the host name alone, like example.com") }
        if d.contains("?") || d.contains("#") || d.contains("@") || d.contains(where: \.isWhitespace) {
            throw bad("is not a host name; give the host name alone, like example.com")
        }
        if d.contains(":") { throw bad("has a port; give the host name alone, like example.com") }
        if d.hasSuffix(".") { throw bad("ends with a dot") }
        let labels = d.split(separator: ".", omittingEmptySubsequences: false)
        if d == "localhost" || d.hasSuffix(".localhost") { throw bad("is localhost; passkeys need a public domain") }
        if labels.count < 2 { throw bad("needs at least two labels, like example.com") }
        if d.utf8.count > 253 { throw bad("is longer than 253 characters") }
        for label in labels {
            if label.isEmpty { throw bad("has an empty label") }
            if label.utf8.count > 63 { throw bad("has a label longer than 63 characters") }
            if !label.unicodeScalars.allSatisfy(\.isASCII) {
                throw bad("has non-ASCII characters; use its punycode form (xn--…)")
            }
            if !label.utf8.allSatisfy({ isLowerAlphanumeric($0) || $0 == UInt8(ascii: "-") }) {
                throw bad("has a label with characters other than letters, digits and hyphens: \(label)")
            }
            if label.hasPrefix("-") || label.hasSuffix("-") {
                throw bad("has a label that starts or ends with a hyphen: \(label)")
            }
        }
        if let last = labels.last, last.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            throw bad("is an IP address; a passkey domain is a name")
        }
        return d
    }

    /// Checks an Apple team id: exactly 10 uppercase letters or digits.
    /// - Throws: an `InputProblem` naming the value.
    static func validateTeamID(_ text: String) throws(InputProblem) {
        guard text.utf8.count == 10, text.utf8.allSatisfy({ isUpperAlphanumeric($0) }) else {
            throw InputProblem("team id \"\(text)\" is not 10 uppercase letters or digits, like A1B2C3D4E5")
        }
    }

    /// Checks a bundle id: reverse-DNS, at least two dot-separated parts of letters, digits and
    /// hyphens.
    /// - Throws: an `InputProblem` naming the value.
    static func validateBundleID(_ text: String) throws(InputProblem) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        let ok =
            parts.count >= 2 && text.utf8.count <= 155
            && parts.allSatisfy { p in
                !p.isEmpty && p.utf8.allSatisfy { isLowerAlphanumeric(lowercase($0)) || $0 == UInt8(ascii: "-") }
            }
        guard ok else {
            throw InputProblem(
                "bundle id \"\(text)\" is not reverse-DNS (dot-separated letters, digits and hyphens, like com.example.app)")
        }
    }

    /// Words Java reserves, which may not be a package name segment.
    static let javaKeywords: Set<String> = [
        "abstract", "assert", "boolean", "break", "byte", "case", "catch", "char", "class", "const", "continue",
        "default", "do", "double", "else", "enum", "extends", "final", "finally", "float", "for", "goto", "if",
        "implements", "import", "instanceof", "int", "interface", "long", "native", "new", "package", "private",
        "protected", "public", "return", "short", "static", "strictfp", "super", "switch", "synchronized", "this",
        "throw", "throws", "transient", "try", "void", "volatile", "while", "true", "false", "null",
    ]

    /// Checks an Android package name: at least two segments, each starting with a letter, of
    /// letters, digits and underscores, and not a Java keyword.
    /// - Throws: an `InputProblem` naming the value and the rule it breaks.
    static func validatePackageName(_ text: String) throws(InputProblem) {
        func bad(_ why: String) -> InputProblem { InputProblem("package name \"\(text)\" \(why)") }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count < 2 { throw bad("needs at least two segments, like com.example.app") }
        for p in parts {
            guard let first = p.utf8.first else { throw bad("has an empty segment") }
            if !isLowerAlphanumeric(lowercase(first)) || isDigit(first) {
                throw bad("has a segment that does not start with a letter: \(p)")
            }
            if !p.utf8.allSatisfy({ isLowerAlphanumeric(lowercase($0)) || $0 == UInt8(ascii: "_") }) {
                throw bad("has a segment with characters other than letters, digits and underscores: \(p)")
            }
            if javaKeywords.contains(String(p)) { throw bad("has a Java keyword as a segment: \(p)") }
        }
    }

    /// A SHA-256 certificate fingerprint in the form the file uses: 32 uppercase hex bytes
    /// separated by colons. Accepts lowercase and the 64 hex digits without colons.
    /// - Throws: an `InputProblem` naming the value.
    static func normalizedFingerprint(_ text: String) throws(InputProblem) -> String {
        let bad = InputProblem(
            "fingerprint \"\(text)\" is not a SHA-256 fingerprint: 32 hex bytes, like AB:CD:…, or 64 hex digits")
        let bytes: [Substring]
        if text.contains(":") {
            bytes = text.split(separator: ":", omittingEmptySubsequences: false)
            guard bytes.count == 32, bytes.allSatisfy({ $0.utf8.count == 2 }) else { throw bad }
        } else {
            guard text.utf8.count == 64 else { throw bad }
            var out: [Substring] = []
            var i = text.startIndex
            while i < text.endIndex {
                let j = text.index(i, offsetBy: 2)
                out.append(text[i..<j])
                i = j
            }
            bytes = out
        }
        guard bytes.allSatisfy({ $0.utf8.allSatisfy(isHexDigit) }) else { throw bad }
        return bytes.map { $0.uppercased() }.joined(separator: ":")
    }

    /// Whether `text` is already in the file's fingerprint form (uppercase, with colons).
    static func isCanonicalFingerprint(_ text: String) -> Bool {
        guard let n = try? normalizedFingerprint(text) else { return false }
        return n == text
    }

    // MARK: building

    /// The `apple-app-site-association` file: `{"webcredentials": {"apps": ["TEAMID.bundle.id", …]}}`.
    static func appleAppSiteAssociation(apps: [AppleApp]) -> [UInt8] {
        encode(.object(["webcredentials": .object(["apps": .array(apps.map { .string($0.appID) })])]))
    }

    /// The `assetlinks.json` file: the site statement (`get_login_creds` for `https://<domain>`)
    /// first, then one `android_app` statement per app with both relations.
    static func assetLinks(domain: String, apps: [AndroidApp]) -> [UInt8] {
        var statements: [JSONValue] = [
            .object([
                "relation": .array([.string(getLoginCreds)]),
                "target": .object(["namespace": .string("web"), "site": .string("https://\(domain)")]),
            ])
        ]
        for app in apps {
            statements.append(
                .object([
                    "relation": .array([.string(handleAllURLs), .string(getLoginCreds)]),
                    "target": .object([
                        "namespace": .string("android_app"), "package_name": .string(app.packageName),
                        "sha256_cert_fingerprints": .array(app.fingerprints.map { .string($0) }),
                    ]),
                ]))
        }
        return encode(.array(statements))
    }

    private static func encode(_ value: JSONValue) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encoding a JSONValue of strings, arrays and objects cannot fail.
        guard let data = try? encoder.encode(value) else { return Array("null\n".utf8) }
        return Array(data) + [UInt8(ascii: "\n")]
    }

    // MARK: checking

    /// The kind of file at `path`: by its name, else by its content (an array is `assetlinks.json`,
    /// an object with `webcredentials`, `applinks` or `appclips` is `apple-app-site-association`).
    static func kind(path: String, bytes: [UInt8]) -> Kind {
        let name = PathText.lastComponent(path)
        if name == "apple-app-site-association" || name == "apple-app-site-association.json" {
            return .appleAppSiteAssociation
        }
        if name == "assetlinks.json" { return .assetLinks }
        switch try? parse(bytes) {
        case .array?: return .assetLinks
        case .object(let members)?
        where members["webcredentials"] != nil || members["applinks"] != nil || members["appclips"] != nil:
            return .appleAppSiteAssociation
        default: return .unknown
        }
    }

    /// Parses JSON text.
    /// - Throws: an `InputProblem` saying the file is not valid JSON, with the parser's reason.
    static func parse(_ bytes: [UInt8]) throws(InputProblem) -> JSONValue {
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            throw InputProblem("not valid JSON: the file is empty")
        }
        if let line = trailingCommaLine(bytes) {
            throw InputProblem("not valid JSON: a trailing comma on line \(line)")
        }
        do {
            return try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
        } catch {
            // JSONDecoder gives no reason: say where the text stops being JSON.
            let reason = JSONSyntax.firstError(in: bytes).map { ": \($0)" } ?? ""
            throw InputProblem("not valid JSON\(reason)")
        }
    }

    /// The line of the first comma followed only by whitespace and then `]` or `}`, outside
    /// strings, or nil. Foundation's parser accepts such commas; strict JSON parsers (browsers,
    /// Android) do not, so the check must refuse them itself.
    static func trailingCommaLine(_ bytes: [UInt8]) -> Int? {
        var line = 1
        var inString = false
        var escaped = false
        var commaLine: Int?
        for b in bytes {
            if b == 0x0A { line += 1 }
            if inString {
                if escaped {
                    escaped = false
                } else if b == UInt8(ascii: "\\") {
                    escaped = true
                } else if b == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch b {
            case UInt8(ascii: "\""):
                inString = true
                commaLine = nil
            case UInt8(ascii: ","): commaLine = line
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                if let commaLine { return commaLine }
            case 0x20, 0x0A, 0x0D, 0x09: break
            default: commaLine = nil
            }
        }
        return nil
    }

    /// The problems of one file, each a sentence naming what is wrong; empty when the file is fine.
    /// - Parameters:
    ///   - domain: the normalized passkey domain the site statement must name, or nil to accept
    ///     any `https` site without a path.
    static func problems(path: String, bytes: [UInt8], domain: String?) -> (kind: Kind, problems: [String]) {
        let kind = kind(path: path, bytes: bytes)
        let json: JSONValue
        do {
            json = try parse(bytes)
        } catch {
            return (kind, [error.message])
        }
        switch kind {
        case .appleAppSiteAssociation: return (kind, appleProblems(json))
        case .assetLinks: return (kind, assetLinksProblems(json, domain: domain))
        case .unknown:
            return (
                kind,
                [
                    "neither an apple-app-site-association (an object with webcredentials) nor an assetlinks.json "
                        + "(an array of statements); name the file after its kind"
                ]
            )
        }
    }

    /// The problems of an `apple-app-site-association` document.
    static func appleProblems(_ json: JSONValue) -> [String] {
        guard case .object(let top) = json else { return ["apple-app-site-association must be a JSON object"] }
        guard let web = top["webcredentials"] else {
            return ["no webcredentials: passkeys need {\"webcredentials\": {\"apps\": [\"TEAMID.bundle.id\"]}}"]
        }
        guard case .object(let members) = web else { return ["webcredentials must be an object with an apps array"] }
        guard let appsValue = members["apps"] else { return ["webcredentials has no apps array"] }
        guard case .array(let apps) = appsValue else { return ["webcredentials.apps must be an array of strings"] }
        if apps.isEmpty { return ["webcredentials.apps is empty: list at least one app as TEAMID.bundle.id"] }
        var problems: [String] = []
        var seen: Set<String> = []
        for (i, app) in apps.enumerated() {
            guard case .string(let id) = app else {
                problems.append("webcredentials.apps[\(i)] is not a string")
                continue
            }
            if let problem = appIDProblem(id) { problems.append("webcredentials.apps[\(i)]: \(problem)") }
            if !seen.insert(id).inserted { problems.append("webcredentials.apps lists \(id) twice") }
        }
        return problems
    }

    /// Why `id` is not a `TEAMID.bundle.id` app id, or nil.
    static func appIDProblem(_ id: String) -> String? {
        guard let dot = id.firstIndex(of: ".") else {
            return "\"\(id)\" is not TEAMID.bundle.id"
        }
        do {
            try validateTeamID(String(id[..<dot]))
            try validateBundleID(String(id[id.index(after: dot)...]))
        } catch {
            return "\"\(id)\" is not TEAMID.bundle.id: \(error.message)"
        }
        return nil
    }

    /// The problems of an `assetlinks.json` document.
    static func assetLinksProblems(_ json: JSONValue, domain: String?) -> [String] {
        guard case .array(let statements) = json else { return ["assetlinks.json must be a JSON array of statements"] }
        if statements.isEmpty { return ["assetlinks.json has no statements"] }
        var problems: [String] = []
        var sites = 0
        var androidApps = 0
        for (i, statement) in statements.enumerated() {
            let at = "statement \(i + 1)"
            guard case .object(let members) = statement else {
                problems.append("\(at) is not an object")
                continue
            }
            var relations: Set<String> = []
            switch members["relation"] {
            case .array(let list)?:
                for r in list {
                    if case .string(let s) = r {
                        relations.insert(s)
                    } else {
                        problems.append("\(at): a relation is not a string")
                    }
                }
            case nil: problems.append("\(at) has no relation array")
            default: problems.append("\(at): relation must be an array of strings")
            }
            guard case .object(let target)? = members["target"] else {
                problems.append("\(at) has no target object")
                continue
            }
            switch target["namespace"] {
            case .string("web")?:
                sites += 1
                let what = "\(at) (site)"
                if !relations.contains(getLoginCreds) { problems.append("\(what) lacks the relation \(getLoginCreds)") }
                guard case .string(let site)? = target["site"] else {
                    problems.append("\(what) has no site string, like \"https://\(domain ?? "example.com")\"")
                    continue
                }
                if let problem = siteProblem(site, domain: domain) { problems.append("\(what): \(problem)") }
            case .string("android_app")?:
                androidApps += 1
                var what = "\(at) (android_app)"
                if case .string(let name)? = target["package_name"] {
                    what = "\(at) (android_app \(name))"
                    do { try validatePackageName(name) } catch { problems.append("\(what): \(error.message)") }
                } else {
                    problems.append("\(what) has no package_name string")
                }
                for r in [handleAllURLs, getLoginCreds] where !relations.contains(r) {
                    problems.append("\(what) lacks the relation \(r)")
                }
                switch target["sha256_cert_fingerprints"] {
                case .array(let prints)? where !prints.isEmpty:
                    for p in prints {
                        guard case .string(let s) = p else {
                            problems.append("\(what): a fingerprint is not a string")
                            continue
                        }
                        if !isCanonicalFingerprint(s) {
                            problems.append(
                                "\(what): fingerprint \"\(s)\" is not 32 uppercase hex bytes separated by colons (AB:CD:…)")
                        }
                    }
                case .array?: problems.append("\(what): sha256_cert_fingerprints is empty")
                case nil: problems.append("\(what) has no sha256_cert_fingerprints")
                default: problems.append("\(what): sha256_cert_fingerprints must be an array of strings")
                }
            case .string(let other)?:
                problems.append("\(at): unknown target namespace \"\(other)\" (expected web or android_app)")
            default:
                problems.append("\(at): target has no namespace string")
            }
        }
        if sites == 0 {
            problems.append(
                androidApps > 0
                    ? "the android_app statement is alone: add the site statement (namespace web, relation "
                        + "\(getLoginCreds)); the device refuses a file without it"
                    : "no site statement (namespace web, relation \(getLoginCreds))")
        }
        if androidApps == 0 {
            problems.append("no android_app statement (package_name, sha256_cert_fingerprints, both relations)")
        }
        return problems
    }

    /// Why a site statement's `site` is wrong, or nil: it must be `https://<domain>` exactly when
    /// the domain is known, otherwise any `https` origin (host, optional port) without a path.
    static func siteProblem(_ site: String, domain: String?) -> String? {
        let expected = domain.map { "https://\($0)" }
        let hint = expected.map { "; use \($0)" } ?? ""
        guard let schemeEnd = site.firstRange(of: "://") else { return "site \"\(site)\" is not a URL like https://example.com" }
        let scheme = site[..<schemeEnd.lowerBound].lowercased()
        if scheme != "https" { return "site \"\(site)\" must use https\(hint)" }
        let rest = site[schemeEnd.upperBound...]
        if let cut = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            let origin = "https://\(rest[..<cut])"
            return "site \"\(site)\" has a path; the site is an origin without one: \(expected ?? origin)"
        }
        var host = String(rest)
        if let colon = host.lastIndex(of: ":") {
            if domain != nil { return "site \"\(site)\" has a port\(hint)" }
            host = String(host[..<colon])
        }
        if let domain {
            if host.lowercased() != domain { return "site \"\(site)\" is not the passkey domain\(hint)" }
            return nil
        }
        do { _ = try normalizedDomain(host) } catch { return "site \"\(site)\": \(error.message)" }
        return nil
    }

    // MARK: characters

    private static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
    private static func isLowerAlphanumeric(_ c: UInt8) -> Bool {
        isDigit(c) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z"))
    }
    private static func isUpperAlphanumeric(_ c: UInt8) -> Bool {
        isDigit(c) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
    }
    private static func isHexDigit(_ c: UInt8) -> Bool {
        isDigit(c) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "f")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "F"))
    }
    private static func lowercase(_ c: UInt8) -> UInt8 {
        c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c + 32 : c
    }
}
