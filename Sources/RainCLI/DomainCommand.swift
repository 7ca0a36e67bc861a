import Foundation
import RainCore

/// `rainwallet domain files` and `rainwallet domain check`: the association files a passkey domain
/// hosts. Needs no daemon.
enum DomainCommand {
    static let filesHelp = """
        usage: rainwallet domain files --domain DOMAIN --out DIR
                 [--apple-team-id TEAMID --bundle-id BUNDLE [--bundle-id BUNDLE]...]...
                 [--android-package PACKAGE --android-fingerprint SHA256 [--android-fingerprint SHA256]...]...
                 [--json]

        Writes the files that let apps use the passkeys of DOMAIN; host them over HTTPS:
          DIR/.well-known/apple-app-site-association   (with iOS apps)
              {"webcredentials": {"apps": ["TEAMID.BUNDLE", ...]}}
          DIR/.well-known/assetlinks.json              (with Android apps)
              a site statement for https://DOMAIN granting get_login_creds, and per package an
              android_app statement granting handle_all_urls and get_login_creds

        Give at least one platform. Each --bundle-id pairs with the --apple-team-id before it; each
        --android-fingerprint belongs to the --android-package before it. List the fingerprint of every
        certificate that signs the app (debug, upload and Play App Signing).

          --domain DOMAIN               the passkey domain: a host name like example.com (no scheme, port
                                        or path); the daemon also checks it against the Public Suffix List
          --apple-team-id TEAMID        10 uppercase letters or digits
          --bundle-id BUNDLE            reverse-DNS, like com.example.app
          --android-package PACKAGE     Java package rules, like com.example.app
          --android-fingerprint SHA256  SHA-256 of a signing certificate, 32 hex bytes: AB:CD:…; lowercase
                                        and the 64 digits without colons are accepted, written as AB:CD:…

        Files are replaced atomically, mode 0644. With --json: {"domain", "files": [{"kind", "path",
        "url"}]}. Exit 3 (RAIN_102) for an invalid value, 64 for a usage mistake.
        """

    static let checkHelp = """
        usage: rainwallet domain check PATH... [--domain DOMAIN] [--json]

        Checks apple-app-site-association and assetlinks.json files (the kind comes from the file
        name, else from the content): valid JSON; webcredentials.apps non-empty, each TEAMID.BUNDLE;
        assetlinks.json with a site statement granting get_login_creds to an https site without a
        path (https://DOMAIN exactly with --domain) and android_app statements granting both
        handle_all_urls and get_login_creds, with a package name and fingerprints of 32 uppercase hex
        bytes separated by colons.

        Prints "PATH: ok (KIND)" for a good file and one line "PATH: PROBLEM" per problem found.
        With --json: [{"path", "kind", "problems": [...]}], kind one of apple-app-site-association,
        assetlinks.json, unknown.

        exit status: 0 when every file is fine; 3 (RAIN_102, with a count of the problems on stderr)
        when any problem is found, including a file that cannot be read; 64 for a usage mistake.
        """

    static let help = "usage: rainwallet domain files|check\n\n\(filesHelp)\n\n\(checkHelp)"

    /// Runs `domain files` or `domain check` on what follows `domain`.
    static func run(_ args: inout Arguments, output: Output) throws {
        let sub = args.rest.first(where: { !$0.hasPrefix("-") })
        switch sub {
        case "files":
            _ = try args.positional("subcommand")
            if CLI.showHelp(args, filesHelp) { return }
            try files(args.rest, output: output)
        case "check":
            _ = try args.positional("subcommand")
            if CLI.showHelp(args, checkHelp) { return }
            try check(args.rest, output: output)
        default:
            if CLI.showHelp(args, help) { return }
            throw UsageError("domain needs a subcommand: files or check", help: help)
        }
    }

    // MARK: arguments

    /// Options in the order given (repeats kept) and positional arguments.
    struct Scanned {
        var options: [(name: String, value: String)] = []
        var positionals: [String] = []

        /// The value of an option that may be given once.
        func single(_ name: String, help: String) throws(UsageError) -> String? {
            let values = options.filter { $0.name == name }
            if values.count > 1 { throw UsageError("\(name) given more than once", help: help) }
            return values.first?.value
        }
    }

    /// Reads `--name VALUE` and `--name=VALUE` for the names in `valued`, keeping their order.
    static func scan(_ tokens: [String], valued: Set<String>, help: String) throws(UsageError) -> Scanned {
        var out = Scanned()
        var i = 0
        while i < tokens.count {
            let t = tokens[i]
            i += 1
            guard t.hasPrefix("-"), t != "-" else {
                out.positionals.append(t)
                continue
            }
            if let eq = t.firstIndex(of: "="), valued.contains(String(t[..<eq])) {
                out.options.append((String(t[..<eq]), String(t[t.index(after: eq)...])))
            } else if valued.contains(t) {
                guard i < tokens.count else { throw UsageError("\(t) needs a value", help: help) }
                out.options.append((t, tokens[i]))
                i += 1
            } else {
                throw UsageError("unknown option \(t)", help: help)
            }
        }
        return out
    }

    /// A value check turned into RAIN_102 (exit 3) naming the option.
    static func invalid(_ option: String, _ problem: DomainFiles.InputProblem) -> RainError {
        RainError(.invalidArgument, "\(option): \(problem.message)")
    }

    // MARK: files

    static func files(_ tokens: [String], output: Output) throws {
        let help = filesHelp
        let s = try scan(
            tokens,
            valued: ["--domain", "--out", "--apple-team-id", "--bundle-id", "--android-package", "--android-fingerprint"],
            help: help)
        if let extra = s.positionals.first { throw UsageError("unexpected argument \(extra)", help: help) }
        guard let domainText = try s.single("--domain", help: help) else { throw UsageError("give --domain DOMAIN", help: help) }
        guard let out = try s.single("--out", help: help), !out.isEmpty else { throw UsageError("give --out DIR", help: help) }
        let domain: String
        do { domain = try DomainFiles.normalizedDomain(domainText) } catch { throw invalid("--domain", error) }

        var apple: [DomainFiles.AppleApp] = []
        var android: [DomainFiles.AndroidApp] = []
        var team: (id: String, used: Bool)?
        for (name, value) in s.options {
            switch name {
            case "--apple-team-id":
                if let team, !team.used { throw UsageError("--apple-team-id \(team.id) has no --bundle-id after it", help: help) }
                do { try DomainFiles.validateTeamID(value) } catch { throw invalid(name, error) }
                team = (value, false)
            case "--bundle-id":
                guard let current = team else {
                    throw UsageError("--bundle-id \(value) needs an --apple-team-id before it", help: help)
                }
                do { try DomainFiles.validateBundleID(value) } catch { throw invalid(name, error) }
                team = (current.id, true)
                let app = DomainFiles.AppleApp(teamID: current.id, bundleID: value)
                if !apple.contains(app) { apple.append(app) }
            case "--android-package":
                if let last = android.last, last.fingerprints.isEmpty {
                    throw UsageError("--android-package \(last.packageName) has no --android-fingerprint after it", help: help)
                }
                do { try DomainFiles.validatePackageName(value) } catch { throw invalid(name, error) }
                android.append(DomainFiles.AndroidApp(packageName: value, fingerprints: []))
            case "--android-fingerprint":
                guard !android.isEmpty else {
                    throw UsageError("--android-fingerprint \(value) needs an --android-package before it", help: help)
                }
                let print: String
                do { print = try DomainFiles.normalizedFingerprint(value) } catch { throw invalid(name, error) }
                if !android[android.count - 1].fingerprints.contains(print) {
                    android[android.count - 1].fingerprints.append(print)
                }
            default: break
            }
        }
        if let team, !team.used { throw UsageError("--apple-team-id \(team.id) has no --bundle-id after it", help: help) }
        if let last = android.last, last.fingerprints.isEmpty {
            throw UsageError("--android-package \(last.packageName) has no --android-fingerprint after it", help: help)
        }
        // One statement per package: fingerprints of a package given twice are merged.
        var merged: [DomainFiles.AndroidApp] = []
        for app in android {
            if let i = merged.firstIndex(where: { $0.packageName == app.packageName }) {
                merged[i].fingerprints += app.fingerprints.filter { !merged[i].fingerprints.contains($0) }
            } else {
                merged.append(app)
            }
        }
        guard !apple.isEmpty || !merged.isEmpty else {
            throw UsageError(
                "give at least one platform: --apple-team-id with --bundle-id, or --android-package with "
                    + "--android-fingerprint", help: help)
        }

        let directory = (out as NSString).appendingPathComponent(".well-known")
        try AtomicFile.makeDirectory(directory, mode: 0o755)
        var written: [(kind: DomainFiles.Kind, path: String, url: String, summary: String)] = []
        if !apple.isEmpty {
            let kind = DomainFiles.Kind.appleAppSiteAssociation
            let path = (directory as NSString).appendingPathComponent(kind.rawValue)
            try AtomicFile.write(DomainFiles.appleAppSiteAssociation(apps: apple), to: path, mode: 0o644)
            written.append(
                (
                    kind, path, "https://\(domain)/.well-known/\(kind.rawValue)",
                    "webcredentials apps: \(apple.map(\.appID).joined(separator: ", "))"
                ))
        }
        if !merged.isEmpty {
            let kind = DomainFiles.Kind.assetLinks
            let path = (directory as NSString).appendingPathComponent(kind.rawValue)
            try AtomicFile.write(DomainFiles.assetLinks(domain: domain, apps: merged), to: path, mode: 0o644)
            let apps = merged.map {
                "\($0.packageName) (\($0.fingerprints.count) fingerprint\($0.fingerprints.count == 1 ? "" : "s"))"
            }
            written.append(
                (
                    kind, path, "https://\(domain)/.well-known/\(kind.rawValue)",
                    "site statement for https://\(domain); android_app: \(apps.joined(separator: ", "))"
                ))
        }

        if output.isJSON {
            output.json([
                "domain": domain,
                "files": written.map { ["kind": $0.kind.rawValue, "path": $0.path, "url": $0.url] as [String: Any?] },
            ])
            return
        }
        for w in written {
            output.line("Wrote \(w.path)")
            output.line("  \(w.summary)")
            output.line("  host it at \(w.url)")
        }
        output.line("Serve them over HTTPS with a valid certificate, as application/json, without redirects.")
        if !apple.isEmpty {
            output.line("iOS: add webcredentials:\(domain) to the app's Associated Domains.")
        }
        output.line("Check them with: rainwallet domain check --domain \(domain) \(written.map(\.path).joined(separator: " "))")
    }

    // MARK: check

    /// The largest file `check` reads (Apple's limit for the association file is 128 KB).
    static let readLimit = 1 << 20

    static func check(_ tokens: [String], output: Output) throws {
        let help = checkHelp
        let s = try scan(tokens, valued: ["--domain"], help: help)
        guard !s.positionals.isEmpty else { throw UsageError("give the PATH of at least one file to check", help: help) }
        var domain: String?
        if let text = try s.single("--domain", help: help) {
            do { domain = try DomainFiles.normalizedDomain(text) } catch { throw invalid("--domain", error) }
        }

        var results: [(path: String, kind: DomainFiles.Kind, problems: [String])] = []
        for path in s.positionals {
            let bytes: [UInt8]?
            do {
                bytes = try AtomicFile.read(path, limit: readLimit)
            } catch {
                results.append((path, .unknown, ["cannot read the file: \(error.message)"]))
                continue
            }
            guard let bytes else {
                results.append((path, .unknown, ["no such file"]))
                continue
            }
            let (kind, problems) = DomainFiles.problems(path: path, bytes: bytes, domain: domain)
            results.append((path, kind, problems))
        }

        if output.isJSON {
            output.json(
                results.map { r -> [String: Any?] in ["path": r.path, "kind": r.kind.rawValue, "problems": r.problems] })
        } else {
            for r in results {
                if r.problems.isEmpty {
                    output.line("\(r.path): ok (\(r.kind.rawValue))")
                } else {
                    for p in r.problems { output.line("\(r.path): \(p)") }
                }
            }
        }
        let count = results.reduce(0) { $0 + $1.problems.count }
        let bad = results.filter { !$0.problems.isEmpty }.count
        if count > 0 {
            throw RainError(
                .invalidArgument,
                "\(count) problem\(count == 1 ? "" : "s") found in \(bad) of \(results.count) file\(results.count == 1 ? "" : "s")"
            )
        }
    }
}
