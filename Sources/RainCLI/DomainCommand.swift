import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainSystem

/// `rainwallet domain set`: the profile's passkey domain, moved once the user confirms it.
/// `rainwallet domain files` and `rainwallet domain check`: the association files a passkey domain
/// hosts (these two need no daemon).
enum DomainCommand: CLICommand {
    static let declaration = Command(
        name: "domain", abstract: "move a profile's passkey domain, or write or check its association files",
        listsSubcommandsTogether: true)
    static var subcommands: [any CLICommand.Type] { [SetDomain.self, Files.self, Check.self] }

    enum SetDomain: CLICommand {
        static let declaration = Command(
            name: "set", abstract: "move the profile to another passkey domain (asks the user on the prompt)",
            discussion: """
                Moves the profile to the passkey domain DOMAIN, for an app whose passkeys move to a new
                domain; a profile without a domain gets it at once. A move is asked on the daemon's
                prompt (type the code it shows) and is audited (passkey_domain_changed). Only the app
                that owns the profile may ask: run it as that app, or call
                RainProvider.changePasskeyDomain(to:) from it. The session stays. The account keeps
                the passkeys made for the old domain, but they no longer log in on this profile
                (RAIN_102 passkey_other_domain): log in with a code, or add a passkey for DOMAIN with
                `rainwallet passkey add`. A domain set in the daemon's config
                (profiles.NAME.passkeyDomain) is moved there instead.
                """,
            arguments: [
                .init("DOMAIN", help: "the new passkey domain: a host name like example.com (no scheme, port or path)")
            ],
            json: .init(
                .object,
                [
                    .init("profile", "the profile"), .init("passkeyDomain", "its passkey domain now"),
                    .init("previousDomain", "the one before, or null when it had none"),
                ]),
            exitStatuses: [
                .init(3, "an invalid domain, or one the daemon's config sets (RAIN_102)"),
                .init(5, "this app does not own the profile, or no prompt can be shown (RAIN_202)"),
                .init(8, "another prompt is open, or the app is locked out after refusals (RAIN_302)"),
                .init(9, "the prompt was dismissed, timed out or answered wrong (RAIN_401): nothing changed"),
            ])

        static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
            let (provider, output) = (context.provider, context.output)
            let domain = parsed.argument("DOMAIN") ?? ""
            let profile = provider.config.profile
            let current = try await provider.profilePasskeyDomain()
            if let current, current != domain {
                output.note(
                    "Moving profile \(profile) from passkey domain \(current) to \(domain): confirm on the rainwalletd "
                        + "prompt (type the code it shows)…")
            }
            let previous = try await provider.changePasskeyDomain(to: domain)
            let text: String
            if let previous, previous != domain {
                text = """
                    Profile \(profile) now uses passkey domain \(domain) (was \(previous)). The session stays; passkeys \
                    made for \(previous) stay on the account but no longer log in here: add one for \(domain) with \
                    `rainwallet passkey add`.
                    """
            } else if previous == nil {
                text = "Profile \(profile) now uses passkey domain \(domain)."
            } else {
                text = "Profile \(profile) already uses passkey domain \(domain)."
            }
            let json: [String: Any?] = ["profile": profile, "passkeyDomain": domain, "previousDomain": previous]
            output.result(json: json, text: text)
        }
    }

    enum Files: CLICommand {
        static let declaration = Command(
            name: "files", abstract: "write the association files of a passkey domain",
            discussion: """
                Writes the files that let apps use the passkeys of DOMAIN; host them over HTTPS:
                  DIR/.well-known/apple-app-site-association   (with iOS apps)
                      {"webcredentials": {"apps": ["TEAMID.BUNDLE", ...]}}
                  DIR/.well-known/assetlinks.json              (with Android apps)
                      a site statement for https://DOMAIN granting get_login_creds, and per package an
                      android_app statement granting handle_all_urls and get_login_creds

                Give at least one platform. Each --bundle-id pairs with the --apple-team-id before it; each
                --android-fingerprint belongs to the --android-package before it. List the fingerprint of every
                certificate that signs the app (debug, upload and Play App Signing).

                Files are replaced atomically, mode 0644.
                """,
            options: [
                Command.Option(
                    "--domain", value: "DOMAIN",
                    help: """
                        the passkey domain: a host name like example.com (no scheme, port
                        or path); the daemon also checks it against the Public Suffix List
                        """, isRequired: true),
                Command.Option("--out", value: "DIR", help: "where .well-known/ is written", kind: .directory, isRequired: true),
                Command.Option(
                    "--apple-team-id", value: "TEAMID", help: "10 uppercase letters or digits", isRepeating: true),
                Command.Option(
                    "--bundle-id", value: "BUNDLE", help: "reverse-DNS, like com.example.app (after its --apple-team-id)",
                    isRepeating: true),
                Command.Option(
                    "--android-package", value: "PACKAGE", help: "Java package rules, like com.example.app", isRepeating: true),
                Command.Option(
                    "--android-fingerprint", value: "SHA256",
                    help: """
                        SHA-256 of a signing certificate, 32 hex bytes: AB:CD:…; lowercase
                        and the 64 digits without colons are accepted, written as AB:CD:…
                        (after its --android-package)
                        """, isRepeating: true),
            ],
            json: .init(
                .object,
                [
                    .init("domain", "the normalized domain"),
                    .init(
                        "files", "the files written",
                        fields: [
                            .init("kind", "the file's name"), .init("path", "where it was written"),
                            .init("url", "where to host it"),
                        ]),
                ]),
            exitStatuses: [.init(3, "an invalid value (RAIN_102)"), .init(64, "a usage mistake")])

        static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
            try DomainCommand.files(parsed, output: context.output)
        }
    }

    enum Check: CLICommand {
        static let declaration = Command(
            name: "check", abstract: "check association files",
            discussion: """
                Checks apple-app-site-association and assetlinks.json files (the kind comes from the file
                name, else from the content): valid JSON; webcredentials.apps non-empty, each TEAMID.BUNDLE;
                assetlinks.json with a site statement granting get_login_creds to an https site without a
                path (https://DOMAIN exactly with --domain) and android_app statements granting both
                handle_all_urls and get_login_creds, with a package name and fingerprints of 32 uppercase hex
                bytes separated by colons.

                Prints "PATH: ok (KIND)" for a good file and one line "PATH: PROBLEM" per problem found.
                """,
            arguments: [.init("PATH", help: "a file to check", isRepeating: true, kind: .file)],
            options: [Command.Option("--domain", value: "DOMAIN", help: "the passkey domain the site statement must name")],
            json: .init(
                .array,
                [
                    .init("path", "the file"),
                    .init("kind", "apple-app-site-association, assetlinks.json or unknown"),
                    .init("problems", "an array of problems, empty when the file is fine"),
                ]),
            exitStatuses: [
                .init(0, "every file is fine"),
                .init(
                    3,
                    "a problem was found, including a file that cannot be read (RAIN_102, with a count of the problems on stderr)"
                ),
                .init(64, "a usage mistake"),
            ])

        static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
            try DomainCommand.check(parsed, output: context.output)
        }
    }

    // MARK: arguments

    /// The value of an option that may be given once.
    static func single(_ name: String, _ parsed: ParsedCommand) throws(UsageError) -> String? {
        let values = parsed.values(name)
        if values.count > 1 { throw UsageError("\(name) given more than once", word: name) }
        return values.first
    }

    /// A value check turned into RAIN_102 (exit 3) naming the option.
    static func invalid(_ option: String, _ problem: DomainFiles.InputProblem) -> RainError {
        RainError(.invalidArgument, "\(option): \(problem.message)")
    }

    // MARK: files

    static func files(_ parsed: ParsedCommand, output: Output) throws {
        guard let domainText = try single("--domain", parsed) else { throw UsageError("give --domain DOMAIN", word: "--domain") }
        guard let out = try single("--out", parsed), !out.isEmpty else { throw UsageError("give --out DIR", word: "--out") }
        let domain: String
        do { domain = try DomainFiles.normalizedDomain(domainText) } catch { throw invalid("--domain", error) }

        var apple: [DomainFiles.AppleApp] = []
        var android: [DomainFiles.AndroidApp] = []
        var team: (id: String, used: Bool)?
        for case let (name, value?) in parsed.occurrences.map({ ($0.name, $0.value) }) {
            switch name {
            case "--apple-team-id":
                if let team, !team.used { throw UsageError("--apple-team-id \(team.id) has no --bundle-id after it") }
                do { try DomainFiles.validateTeamID(value) } catch { throw invalid(name, error) }
                team = (value, false)
            case "--bundle-id":
                guard let current = team else {
                    throw UsageError("--bundle-id \(value) needs an --apple-team-id before it")
                }
                do { try DomainFiles.validateBundleID(value) } catch { throw invalid(name, error) }
                team = (current.id, true)
                let app = DomainFiles.AppleApp(teamID: current.id, bundleID: value)
                if !apple.contains(app) { apple.append(app) }
            case "--android-package":
                if let last = android.last, last.fingerprints.isEmpty {
                    throw UsageError("--android-package \(last.packageName) has no --android-fingerprint after it")
                }
                do { try DomainFiles.validatePackageName(value) } catch { throw invalid(name, error) }
                android.append(DomainFiles.AndroidApp(packageName: value, fingerprints: []))
            case "--android-fingerprint":
                guard !android.isEmpty else {
                    throw UsageError("--android-fingerprint \(value) needs an --android-package before it")
                }
                let print: String
                do { print = try DomainFiles.normalizedFingerprint(value) } catch { throw invalid(name, error) }
                if !android[android.count - 1].fingerprints.contains(print) {
                    android[android.count - 1].fingerprints.append(print)
                }
            default: break
            }
        }
        if let team, !team.used { throw UsageError("--apple-team-id \(team.id) has no --bundle-id after it") }
        if let last = android.last, last.fingerprints.isEmpty {
            throw UsageError("--android-package \(last.packageName) has no --android-fingerprint after it")
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
                    + "--android-fingerprint")
        }

        let directory = PathText.joined(out, ".well-known")
        try AtomicFile.makeDirectory(directory, mode: 0o755)
        var written: [(kind: DomainFiles.Kind, path: String, url: String, summary: String)] = []
        if !apple.isEmpty {
            let kind = DomainFiles.Kind.appleAppSiteAssociation
            let path = PathText.joined(directory, kind.rawValue)
            try AtomicFile.write(DomainFiles.appleAppSiteAssociation(apps: apple), to: path, mode: 0o644)
            written.append(
                (
                    kind, path, "https://\(domain)/.well-known/\(kind.rawValue)",
                    "webcredentials apps: \(apple.map(\.appID).joined(separator: ", "))"
                ))
        }
        if !merged.isEmpty {
            let kind = DomainFiles.Kind.assetLinks
            let path = PathText.joined(directory, kind.rawValue)
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

    static func check(_ parsed: ParsedCommand, output: Output) throws {
        let paths = parsed.arguments("PATH")
        guard !paths.isEmpty else { throw UsageError("give the PATH of at least one file to check") }
        var domain: String?
        if let text = try single("--domain", parsed) {
            do { domain = try DomainFiles.normalizedDomain(text) } catch { throw invalid("--domain", error) }
        }

        var results: [(path: String, kind: DomainFiles.Kind, problems: [String])] = []
        for path in paths {
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
