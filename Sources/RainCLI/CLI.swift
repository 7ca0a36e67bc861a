import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainWallet

/// The `rainwallet` command tree.
public enum CLI: CLICommand {
    static let declaration = Command(
        name: "rainwallet",
        abstract: "Talks to rainwalletd, the RainWallet daemon.",
        options: [
            Command.Option(
                "--socket", value: "PATH", help: "daemon socket",
                kind: .file,
                default: .computed(RainPaths.defaultSocketDescription),
                environment: "RAINWALLET_SOCKET", isGlobal: true),
            Command.Option(
                "--daemon-uid", value: "UID",
                help: """
                    the uid the daemon must run as: a daemon of any other uid is refused
                    (RAIN_101), so no other user can pose as it; name another user's daemon
                    only on purpose (its config allows your uid)
                    """,
                default: .computed("your own uid"), environment: RainPaths.daemonUIDVariable, isGlobal: true),
            Command.Option(
                "--profile", value: "NAME", help: "profile (app) to act for", default: .value(ProfileName.defaultName),
                isGlobal: true),
            .flag(
                "--json",
                help: """
                    machine-readable output (camelCase keys, RFC 3339 UTC times); a failure
                    ends stderr with a line {"error": {"code", "message", ...details}}, e.g.
                    "limit", "retryAfter" and "retryAfterSeconds" for a refused code send
                    """, isGlobal: true),
        ],
        exitStatuses: ErrorPresentation.exitStatuses)

    static var subcommands: [any CLICommand.Type] {
        [
            CodeCommand.self, LoginCommand.self, StatusCommand.self, WatchCommand.self, RefreshCommand.self,
            AccountCommand.self, ExportCommand.self, SignCommand.self, LogoutCommand.self, InfoCommand.self, DevCommand.self,
            DomainCommand.self, PasskeyCommand.self, ContactCommand.self, AppsCommand.self, SettingsCommand.self,
            PromptCommand.self, StorageCommand.self, AuditCommand.self, CompletionCommand.self, HelpCommand.self,
            ManCommand.self,
        ]
    }

    /// The whole declaration tree, built once.
    static let commandTree = tree

    /// Runs the CLI; returns the exit status.
    /// - Parameters:
    ///   - arguments: the arguments, without the program name.
    ///   - version, commit, date, swiftVersion: what `--version` prints, from the file the
    ///     BuildInfoPlugin generates into the `rainwallet` target (see `BuildInfo`).
    public static func main(
        _ arguments: [String], version: String = "unknown", commit: String = "unknown", date: String = "unknown",
        swiftVersion: String = "unknown"
    ) async -> Int32 {
        let build = BuildInfo(version: version, commit: commit, date: date, swiftVersion: swiftVersion)
        return await main(arguments, environment: ProcessInfo.processInfo.environment, build: build)
    }

    static func main(_ arguments: [String], environment: [String: String], build: BuildInfo? = nil) async -> Int32 {
        var tree = commandTree
        tree.build = build
        let formatter = HelpFormatter(root: tree)
        // Known before parsing, so that a usage error ends with the JSON error line too.
        var isJSON = arguments.prefix { $0 != "--" }.contains("--json")
        var usageHint: String?
        do {
            let parsed = try CommandParser(tree, environment: environment).parse(arguments)
            usageHint = formatter.usageHint(for: parsed.path)
            if parsed.isHelpRequested {
                print(formatter.help(for: parsed.path))
                return 0
            }
            if parsed.isVersionRequested, let build {
                print(build.text(program: tree.name))
                return 0
            }
            let output = Output(isJSON: parsed.flag("--json"))
            isJSON = output.isJSON
            let profile = parsed.value("--profile") ?? ProfileName.defaultName
            do {
                try ProfileName.validate(profile)
            } catch {
                throw UsageError("--profile: \(error.message)", word: "--profile")
            }
            var daemonUID: UInt32?
            if let text = parsed.value("--daemon-uid") {
                do throws(RainError) {
                    daemonUID = try RainPaths.parseUID(text, source: "--daemon-uid")
                } catch {
                    throw UsageError(error.message, word: "--daemon-uid")
                }
            }
            let provider = RainProvider(
                RainWalletConfig(profile: profile, socketPath: parsed.value("--socket"), daemonUID: daemonUID))
            guard let command = find(parsed.commandNames[...]) else {
                throw UsageError("unknown command \(parsed.commandNames.joined(separator: " "))")
            }
            try await command.run(parsed, CLIContext(provider: provider, output: output, formatter: formatter))
            return 0
        } catch {
            var error = error
            if var usage = error as? UsageError, usage.help == nil {
                usage.help = usageHint
                error = usage
            }
            let (text, status) = ErrorPresentation.present(error)
            StandardErrorSink().write(text)
            // stdout may already hold a result (domain check); the error's JSON goes on stderr, last line.
            if isJSON, let rain = error as? RainError {
                StandardErrorSink().write(Output.render(ErrorPresentation.jsonObject(rain)))
            } else if isJSON, let usage = error as? UsageError {
                StandardErrorSink().write(Output.render(ErrorPresentation.jsonObject(usage)))
            }
            return status
        }
    }
}

/// `rainwallet help [COMMAND]...`: the help of the program or of a command.
enum HelpCommand: CLICommand {
    static let declaration = Command(
        name: "help", abstract: "show the help of rainwallet or of a command",
        arguments: [.init("COMMAND", help: "the command words, like `code send`", isOptional: true, isRepeating: true)])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        // The words name a command as they would on the command line: a typo gets a suggestion.
        let path = try CommandParser(context.formatter.root, environment: [:])
            .parse(parsed.arguments("COMMAND") + ["--help"]).path
        print(context.formatter.help(for: path))
    }
}
