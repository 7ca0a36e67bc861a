import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainSoftAuthenticator
import RainSystem
import RainWallet

/// `rainwallet passkey signup|login|add`: passkey ceremonies with a security key or the platform
/// authenticator (both run by the daemon), or with the software authenticator (development use;
/// its keys lie in a 0600 file in clear).
enum PasskeyCommand: CLICommand {
    static let declaration = Command(
        name: "passkey", abstract: "sign up, log in, add, list or remove passkeys",
        discussion: """
            Runs a passkey ceremony. With --authenticator security-key or platform the daemon runs
            the authenticator itself: a security key blinks until touched (every plugged key blinks;
            the first touched is used) and its PIN, when it has one, is typed on the daemon's prompt.
            With file (the default) the software authenticator runs here (development only: its keys
            are kept in clear in the --key-file, mode 0600).
            """,
        listsSubcommandsTogether: true)
    static var subcommands: [any CLICommand.Type] { [Signup.self, Login.self, Add.self, List.self, Remove.self] }

    /// The authenticators `--authenticator` names.
    static let authenticators = ["security-key", "platform", "file"]

    static let options: [Command.Option] = [
        Command.Option(
            "--authenticator", value: "KIND",
            help: """
                security-key, platform (both run by the daemon) or file (the software
                authenticator); a path is taken as --key-file, with file
                """, default: .value("file")),
        Command.Option(
            "--key-file", value: "FILE", help: "the software authenticator's key file (--authenticator file)", kind: .file,
            default: .computed(
                "$XDG_STATE_HOME/rainwallet/authenticator.json, else ~/.local/state/rainwallet/authenticator.json")),
        Command.Option(
            "--domain", value: "DOMAIN",
            help: """
                the passkey domain (RainWalletConfig.passkeyDomain); default: the
                profile's domain in the daemon (exit 3, RAIN_102, when it has none)
                """),
    ]

    static let json = Command.JSONOutput(
        .object, sessionJSONFields, note: "the session after the ceremony, as `rainwallet status --json` prints it")
    static let exitStatuses: [Command.ExitStatus] = [
        .init(3, "no passkey domain given or configured (RAIN_102)"),
        .init(
            9,
            "the authenticator has no passkey for the domain, was dismissed, or no security key was touched in time (RAIN_401)"),
    ]

    static func declaration(_ name: String, _ abstract: String, _ discussion: String) -> Command {
        Command(name: name, abstract: abstract, discussion: discussion, options: options, json: json, exitStatuses: exitStatuses)
    }

    enum Signup: CLICommand {
        static let declaration = PasskeyCommand.declaration(
            "signup", "create a new account and wallet with a new passkey, and log in",
            """
            Creates a brand-new account and wallet with a new passkey, and logs in (refused while a
            session is live: log out first).

            After a sign-up on a terminal (stdin and stdout), it asks for a backup email and runs its
            verification (sends a code, prompts for it, confirms it); an empty answer skips it.
            Elsewhere it prints a hint: rainwallet contact add --email ADDR.
            """)
        static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
            try await PasskeyCommand.run("signup", parsed, context)
        }
    }

    enum Login: CLICommand {
        static let declaration = PasskeyCommand.declaration(
            "login", "log in with a passkey of the domain",
            "Logs in with a passkey of the domain (replaces a code session; refused over a passkey session).")
        static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
            try await PasskeyCommand.run("login", parsed, context)
        }
    }

    enum Add: CLICommand {
        static let declaration = PasskeyCommand.declaration(
            "add", "add a passkey to the logged-in account", "Adds a passkey to the logged-in account.")
        static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
            try await PasskeyCommand.run("add", parsed, context)
        }
    }

    static func run(_ sub: String, _ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let (provider, output) = (context.provider, context.output)
        let kind = parsed.value("--authenticator") ?? "file"
        // Before --key-file, --authenticator named the key file: a path still does.
        let isFile = kind == "file" || !authenticators.contains(kind)
        let file = parsed.value("--key-file") ?? (authenticators.contains(kind) ? nil : kind) ?? defaultAuthenticatorPath()
        let requestedDomain = parsed.value("--domain")

        let domain: String
        if let requestedDomain {
            domain = requestedDomain
        } else if let profileDomain = try await provider.profilePasskeyDomain() {
            domain = profileDomain
        } else {
            throw RainError.invalid(
                "profile \(provider.config.profile) has no passkey domain: pass --domain or set \"passkeyDomain\" in the daemon's config",
                field: "passkeyDomain", reason: "no_passkey_domain")
        }
        let wallet = RainProvider(
            RainWalletConfig(
                passkeyDomain: domain, profile: provider.config.profile, socketPath: provider.config.socketPath,
                daemonUID: provider.config.daemonUID))
        let session: SessionSnapshot
        if !isFile {
            let builtIn: BuiltInAuthenticator = kind == "platform" ? .platform : .securityKey
            if builtIn == .securityKey, !output.isJSON {
                output.line("Touch your security key when it blinks (a PIN, if it has one, is asked on the wallet's prompt).")
            } else if !output.isJSON {
                output.line(
                    "Confirm on the wallet's prompt (type the code it shows), then type the PIN of this device's passkeys there.")
            }
            session = try await runBuiltIn(sub, builtIn, wallet: wallet, domain: domain, output: output)
        } else {
            try AtomicFile.makeDirectory(PathText.deletingLastComponent(file))
            session = try await runFile(sub, SoftAuthenticator(path: file), wallet: wallet, domain: domain, output: output)
        }
        output.session(session)
        if sub == "signup" { await ContactCommand.offerBackupEmail(provider: wallet, output: output) }
    }

    /// A ceremony the daemon runs with its own authenticator.
    static func runBuiltIn(
        _ sub: String, _ authenticator: BuiltInAuthenticator, wallet: RainProvider, domain: String, output: Output
    ) async throws -> SessionSnapshot {
        switch sub {
        case "signup":
            let session = try await wallet.signUpWithPasskey(authenticator: authenticator)
            if !output.isJSON { output.line("Signed up with a new passkey for \(domain): new account and wallet.") }
            return session
        case "login":
            let session = try await wallet.loginWithPasskey(authenticator: authenticator)
            if !output.isJSON { output.line("Logged in with a passkey for \(domain).") }
            return session
        default:
            try await wallet.addPasskey(authenticator: authenticator)
            if !output.isJSON { output.line("Added a passkey for \(domain) to the account.") }
            return try await wallet.currentSession()
        }
    }

    /// A ceremony with the software authenticator, run here.
    static func runFile(
        _ sub: String, _ authenticator: SoftAuthenticator, wallet: RainProvider, domain: String, output: Output
    ) async throws -> SessionSnapshot {
        let session: SessionSnapshot
        switch sub {
        case "signup":
            session = try await wallet.signUpWithPasskey(anchor: authenticator)
            if !output.isJSON { output.line("Signed up with a new passkey for \(domain): new account and wallet.") }
        case "login":
            session = try await wallet.loginWithPasskey(anchor: authenticator)
            if !output.isJSON { output.line("Logged in with a passkey for \(domain).") }
        default:
            try await wallet.addPasskey(anchor: authenticator)
            session = try await wallet.currentSession()
            if !output.isJSON { output.line("Added a passkey for \(domain) to the account.") }
        }
        return session
    }

    /// `$XDG_STATE_HOME/rainwallet/authenticator.json`, else `~/.local/state/rainwallet/authenticator.json`.
    static func defaultAuthenticatorPath(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> String
    {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return "\(state)/rainwallet/authenticator.json"
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
        return "\(home)/.local/state/rainwallet/authenticator.json"
    }
}
