import Foundation
import RainCore
import RainSoftAuthenticator
import RainWallet

/// `rainwallet passkey signup|login|add`: passkey ceremonies with the software authenticator
/// (development use; its keys lie in a 0600 file in clear).
enum PasskeyCommand {
    static let help = """
        usage: rainwallet passkey signup|login|add [--authenticator FILE] [--domain DOMAIN] [--json]

        Runs a passkey ceremony with the software authenticator (development only: its keys are
        kept in clear in FILE, mode 0600).
          signup   create a brand-new account and wallet with a new passkey, and log in
                   (refused while a session is live: log out first)
          login    log in with a passkey of the domain (replaces a code session; refused over a
                   passkey session)
          add      add a passkey to the logged-in account

        options:
          --authenticator FILE   the software authenticator's key file (default
                                 $XDG_STATE_HOME/rainwallet/authenticator.json, else
                                 ~/.local/state/rainwallet/authenticator.json)
          --domain DOMAIN        the passkey domain (RainWalletConfig.passkeyDomain); default: the
                                 profile's domain in the daemon (exit 3, RAIN_102, when it has none)

        After a sign-up on a terminal (stdin and stdout), it asks for a backup email and runs its
        verification (sends a code, prompts for it, confirms it); an empty answer skips it.
        Elsewhere it prints a hint: rainwallet contact add --email ADDR.

        With --json: the session after the ceremony, as `rainwallet status --json` prints it.
        Exit 9 (RAIN_401) when the authenticator has no passkey for the domain or was dismissed.
        """

    static func run(_ args: inout Arguments, provider: RainProvider, output: Output) async throws {
        let sub = args.rest.first(where: { !$0.hasPrefix("-") })
        guard let sub, ["signup", "login", "add"].contains(sub) else {
            if CLI.showHelp(args, help) { return }
            throw UsageError("passkey needs a subcommand: signup, login or add", help: help)
        }
        _ = try args.positional("subcommand")
        if CLI.showHelp(args, help) { return }
        var local = Arguments(args.rest, help: help)
        let file = try local.option("--authenticator") ?? defaultAuthenticatorPath()
        let requestedDomain = try local.option("--domain")
        try local.finish()
        args = Arguments([], help: help)

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
        try AtomicFile.makeDirectory((file as NSString).deletingLastPathComponent)
        let authenticator = SoftAuthenticator(path: file)
        let wallet = RainProvider(
            RainWalletConfig(passkeyDomain: domain, profile: provider.config.profile, socketPath: provider.config.socketPath))

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
        if output.isJSON { output.json(session.jsonObject) } else { session.humanLines.forEach(output.line) }
        if sub == "signup" { await ContactCommand.offerBackupEmail(provider: wallet, output: output) }
    }

    /// `$XDG_STATE_HOME/rainwallet/authenticator.json`, else `~/.local/state/rainwallet/authenticator.json`.
    static func defaultAuthenticatorPath(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> String
    {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return "\(state)/rainwallet/authenticator.json"
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return "\(home)/.local/state/rainwallet/authenticator.json"
    }
}
