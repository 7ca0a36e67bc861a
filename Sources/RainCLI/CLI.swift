import Foundation
import RainCore
import RainWallet

/// The `rainwallet` command tree.
public enum CLI {
    static let mainHelp = """
        usage: rainwallet [--socket PATH] [--profile NAME] [--json] COMMAND

        Talks to rainwalletd, the RainWallet daemon.

        commands:
          code send --email ADDR | --phone NUMBER   send a 6-digit login code
          code confirm CODE                         confirm the code and log in
          login --email ADDR | --phone NUMBER       send a code, then prompt for it
          status                                    show the session of the profile
          watch                                     print session events as they happen
          refresh                                   refresh the session now
          account                                   show the account and wallet of the session
          export phrase [--yes]                     print the wallet's recovery phrase (needs allowExport)
          export key --chain CHAIN [--yes]          print a private key; CHAIN: ethereum or solana
          logout                                    end the session (wipes it, revokes it)
          info                                      show the daemon's version and capabilities
          dev outbox                                list codes delivered to the development outbox
          domain files|check                        write or check the passkey domain's association files
          passkey signup|login|add                  sign up, log in or add a passkey (software authenticator)
          contact add --email ADDR | --phone NUMBER send a code that verifies a backup contact
          contact confirm CODE                      confirm it: the contact joins the account

        global options:
          --socket PATH    daemon socket (also $RAINWALLET_SOCKET; default
                           $XDG_RUNTIME_DIR/rainwallet/rainwalletd.sock or /tmp/rainwallet-$UID/rainwalletd.sock)
          --profile NAME   profile (app) to act for (default "default")
          --json           machine-readable output (camelCase keys, RFC 3339 UTC times); a failure
                           ends stderr with a line {"error": {"code", "message", ...details}}, e.g.
                           "limit", "retryAfter" and "retryAfterSeconds" for a refused code send
          -h, --help       help for any command

        exit status: 0 ok, 64 usage, 2 daemon not reachable (RAIN_101), 3 invalid argument (RAIN_102),
        4 no session (RAIN_201), 5 unauthorized (RAIN_202), 6 invalid code (RAIN_203), 7 network (RAIN_301),
        8 refused (RAIN_302), 9 cancelled (RAIN_401), 10 unavailable (RAIN_404), 11 provider (RAIN_501),
        1 internal (RAIN_502).
        """

    static let codeSendHelp = """
        usage: rainwallet code send --email ADDR | --phone NUMBER

        Sends a 6-digit login code. Sending again replaces the pending code (Resend).
        Phone numbers are E.164, like +15551234567.
        """
    static let codeConfirmHelp = """
        usage: rainwallet code confirm CODE

        Confirms the pending login code. A wrong code keeps the challenge: try again (3 attempts).
        """
    static let loginHelp = """
        usage: rainwallet login --email ADDR | --phone NUMBER

        Sends a login code, then reads it: prompts on a terminal, or reads one line from stdin.
        """
    static let statusHelp = """
        usage: rainwallet status [--json]

        Shows the profile's session. With --json: {"authState", "sessionState": "active"|"expired"|null,
        "expiresAt": RFC 3339|null, "accountId": …|null, "walletId", "hasActiveSession", "contact"}.
        """
    static let watchHelp = """
        usage: rainwallet watch [--json]

        Prints the current state, then one line per event until interrupted.
        With --json: one JSON object per line with "type", "sequence", "authState", and for
        expiry a "reason".
        """
    static let refreshHelp = """
        usage: rainwallet refresh [--json]

        Refreshes the session now (the daemon also refreshes it automatically ahead of expiry).
        Exit 4 (RAIN_201) when there is no session or it ended; 7 (RAIN_301) when the authority
        could not be reached (the session stays usable until it expires).
        """
    static let accountHelp = """
        usage: rainwallet account [--json]

        Shows the account behind the session: id, creation time, contacts, passkeys (domain,
        creation, last use), backup status, and its wallet: id, Ethereum address (EIP-55) and
        Solana address (base58).
        With --json: {"accountId", "walletId", "createdAt", "contacts": [{"kind", "value"}],
        "needsBackupEmail", "passkeys": [{"credentialId", "domain", "createdAt", "lastUsedAt"}],
        "wallet": {"id", "ethereumAddress", "solanaAddress", "createdAt"} or null when the account
        has no wallet}.
        """
    static let exportPhraseHelp = """
        usage: rainwallet export phrase [--yes] [--json]

        Prints the wallet's 12-word recovery phrase on one line. Anyone who has it owns the wallet:
        write it down and keep it offline.

        On a terminal it first asks you to type YES. It refuses to print to anything but a terminal
        (a pipe or a file) unless --yes is given. Needs a live session (exit 4) and
        "allowExport": true for the profile in the daemon's config file (exit 5 otherwise).
        With --json: {"words": [...]}.
        """
    static let exportKeyHelp = """
        usage: rainwallet export key --chain ethereum|solana [--yes] [--json]

        Prints one chain's private key: Ethereum as 0x + 64 lowercase hex digits, Solana as the
        64-byte keypair (seed, then public key) in base58. Anyone who has it owns that account.

        On a terminal it first asks you to type YES. It refuses to print to anything but a terminal
        (a pipe or a file) unless --yes is given. Needs a live session (exit 4) and
        "allowExport": true for the profile in the daemon's config file (exit 5 otherwise).
        With --json: {"chain", "privateKey"}.
        """
    static let logoutHelp = """
        usage: rainwallet logout

        Ends the session: the daemon wipes it from storage and revokes it at the authority.
        """
    static let infoHelp = """
        usage: rainwallet info [--json]

        Shows the daemon version, protocol version and capabilities.
        """
    static let devOutboxHelp = """
        usage: rainwallet dev outbox [--json]

        Lists code deliveries of the development outbox, newest last.
        With --json: an array of {"contact", "code", "sentAt", "kind", "appId"}.
        """

    /// Runs the CLI; returns the exit status.
    public static func main(_ arguments: [String]) async -> Int32 {
        var args = Arguments(arguments, help: mainHelp)
        var isJSON = false
        do {
            let socket = try args.option("--socket")
            let profile = try args.option("--profile") ?? ProfileName.defaultName
            let output = Output(isJSON: args.flag("--json"))
            isJSON = output.isJSON
            guard args.rest.contains(where: { !$0.hasPrefix("-") }) else {
                if args.wantsHelp {
                    print(mainHelp)
                    return 0
                }
                throw UsageError(args.rest.first.map { "unknown option \($0)" } ?? "missing command", help: mainHelp)
            }
            do {
                try ProfileName.validate(profile)
            } catch {
                throw UsageError("--profile: \(error.message)")
            }
            let provider = RainProvider(RainWalletConfig(profile: profile, socketPath: socket))
            try await dispatch(&args, provider: provider, output: output)
            return 0
        } catch {
            let (text, status) = ErrorPresentation.present(error)
            StandardErrorSink().write(text)
            // stdout may already hold a result (domain check); the error's JSON goes on stderr, last line.
            if isJSON, let rain = error as? RainError {
                StandardErrorSink().write(Output.render(ErrorPresentation.jsonObject(rain)))
            }
            return status
        }
    }

    static func showHelp(_ args: Arguments, _ text: String) -> Bool {
        if args.wantsHelp {
            print(text)
            return true
        }
        return false
    }

    static func dispatch(_ args: inout Arguments, provider: RainProvider, output: Output) async throws {
        let command = try args.positional("command")
        switch command {
        case "help":
            print(mainHelp)
        case "code":
            let sub = args.rest.first(where: { !$0.hasPrefix("-") })
            switch sub {
            case "send":
                _ = try args.positional("subcommand")
                if showHelp(args, codeSendHelp) { return }
                try await codeSend(&args, provider, output, help: codeSendHelp)
            case "confirm":
                _ = try args.positional("subcommand")
                if showHelp(args, codeConfirmHelp) { return }
                let code = try Arguments(args.rest, help: codeConfirmHelp).positionalOnly("CODE")
                try await confirm(code, provider, output)
            default:
                if showHelp(args, "usage: rainwallet code send|confirm\n\n\(codeSendHelp)\n\n\(codeConfirmHelp)") { return }
                throw UsageError("code needs a subcommand: send or confirm", help: codeSendHelp + "\n\n" + codeConfirmHelp)
            }
        case "login":
            if showHelp(args, loginHelp) { return }
            try await login(&args, provider, output)
        case "status":
            if showHelp(args, statusHelp) { return }
            try args.finish()
            // A profile's stored session loads on first use: wait for it (up to 5 s) so status is settled.
            try await provider.awaitSessionRestore()
            let s = try await provider.currentSession()
            if output.isJSON { output.json(s.jsonObject) } else { s.humanLines.forEach(output.line) }
        case "watch":
            if showHelp(args, watchHelp) { return }
            try args.finish()
            try await watch(provider, output)
        case "refresh":
            if showHelp(args, refreshHelp) { return }
            try args.finish()
            let s = try await provider.refreshSession()
            if output.isJSON { output.json(s.jsonObject) } else {
                output.line("Session refreshed.")
                s.humanLines.forEach(output.line)
            }
        case "account":
            if showHelp(args, accountHelp) { return }
            try args.finish()
            let a = try await provider.account()
            let wallet = try await walletSummary(provider)
            if output.isJSON {
                var object = accountObject(a)
                object["wallet"] = wallet.map { w -> Any? in
                    [
                        "id": w.walletID, "ethereumAddress": w.ethereumAddress, "solanaAddress": w.solanaAddress,
                        "createdAt": w.createdAt,
                    ]
                }
                output.json(object)
            } else {
                accountLines(a).forEach(output.line)
                if let wallet {
                    output.line("wallet:   \(wallet.walletID)")
                    output.line("ethereum: \(wallet.ethereumAddress)")
                    output.line("solana:   \(wallet.solanaAddress)")
                } else {
                    output.line("wallet:   unavailable")
                }
            }
        case "export":
            try await export(&args, provider, output)
        case "logout":
            if showHelp(args, logoutHelp) { return }
            try args.finish()
            let r = try await provider.logout()
            if output.isJSON {
                output.json(["hadSession": r.hadSession, "revokedAtAuthority": r.revokedAtAuthority])
            } else if !r.hadSession {
                output.line("There was no session to end.")
            } else {
                output.line(
                    r.revokedAtAuthority
                        ? "Logged out." : "Logged out on this device (the authority could not be reached to revoke the session).")
            }
        case "info":
            if showHelp(args, infoHelp) { return }
            try args.finish()
            let info = try await provider.daemonInfo()
            if output.isJSON {
                output.json([
                    "daemonVersion": info.daemonVersion, "protocolVersion": Int(info.protocolVersion),
                    "capabilities": info.capabilities, "maxFrameBytes": Int(info.maxFrameBytes),
                ])
            } else {
                output.line("rainwalletd \(info.daemonVersion), protocol \(info.protocolVersion)")
                output.line("capabilities: \(info.capabilities.joined(separator: ", "))")
            }
        case "passkey":
            try await PasskeyCommand.run(&args, provider: provider, output: output)
        case "contact":
            try await ContactCommand.run(&args, provider: provider, output: output)
        case "domain":
            try DomainCommand.run(&args, output: output)
        case "dev":
            let sub = args.rest.first(where: { !$0.hasPrefix("-") })
            guard sub == "outbox" else {
                if showHelp(args, devOutboxHelp) { return }
                throw UsageError("dev needs a subcommand: outbox", help: devOutboxHelp)
            }
            _ = try args.positional("subcommand")
            if showHelp(args, devOutboxHelp) { return }
            try args.finish()
            let entries = try await provider.devOutbox()
            if output.isJSON {
                output.json(
                    entries.map { e -> [String: Any?] in
                        ["contact": e.contact?.value, "kind": e.contact?.kindName, "code": e.code, "sentAt": e.sentAt, "appId": e.appID]
                    })
            } else if entries.isEmpty {
                output.line("The outbox is empty.")
            } else {
                for e in entries {
                    output.line("\(RFC3339.string(from: e.sentAt))  \(e.appID)  \(e.contact?.value ?? "?")  \(e.code)")
                }
            }
        default:
            throw UsageError("unknown command \(command)", help: mainHelp)
        }
    }

    static func contact(_ args: inout Arguments, help: String) throws -> RainWalletContact {
        let email = try args.option("--email")
        let phone = try args.option("--phone")
        try args.finish()
        switch (email, phone) {
        case (let e?, nil): return .email(e)
        case (nil, let p?): return .phone(p)
        case (nil, nil): throw UsageError("give --email ADDR or --phone NUMBER", help: help)
        default: throw UsageError("give either --email or --phone, not both", help: help)
        }
    }

    static func codeSend(_ args: inout Arguments, _ provider: RainProvider, _ output: Output, help: String) async throws {
        let c = try contact(&args, help: help)
        try await provider.sendLoginCode(to: c)
        let shown = (try? c.normalized().value) ?? c.value
        if output.isJSON {
            output.json(["sent": true, "contact": shown, "kind": c.kindName])
        } else {
            output.line("Code sent to \(shown). Confirm it with: rainwallet code confirm CODE")
        }
    }

    static func confirm(_ code: String, _ provider: RainProvider, _ output: Output) async throws {
        let (session, created) = try await provider.confirmLoginCodeReturningSession(code)
        if output.isJSON {
            var o = session.jsonObject
            o["accountCreated"] = created
            output.json(o)
        } else {
            output.line(created ? "Logged in. A new account and wallet were created." : "Logged in.")
            session.humanLines.forEach(output.line)
        }
    }

    static func login(_ args: inout Arguments, _ provider: RainProvider, _ output: Output) async throws {
        let c = try contact(&args, help: loginHelp)
        let shown = (try? c.normalized().value) ?? c.value
        output.note("Sending a login code to \(shown)…")
        try await provider.sendLoginCode(to: c)
        let interactive = isatty(0) == 1
        while true {
            if interactive {
                FileHandle.standardError.write(Data("Enter the 6-digit code: ".utf8))
            }
            guard let typed = readLine(strippingNewline: true), !typed.isEmpty else {
                throw UsageError("no code was entered; confirm later with: rainwallet code confirm CODE")
            }
            do {
                try await confirm(typed, provider, output)
                return
            } catch let e as RainError where interactive && e == .invalidLoginCode && (e.details.attemptsRemaining ?? 0) > 0 {
                output.note("That code didn't work. Check it and try again (\(e.details.attemptsRemaining ?? 0) attempts left).")
            } catch let e as RainError where interactive && e.details.reason == "malformed_code" {
                output.note("A login code is 6 digits.")
            }
        }
    }

    /// What `account` shows of the wallet.
    struct WalletSummary {
        var walletID: String
        var ethereumAddress: String
        var solanaAddress: String
        var createdAt: Date
    }

    /// The session's wallet, or nil when the account has none (RAIN_404): the account still shows.
    static func walletSummary(_ provider: RainProvider) async throws(RainError) -> WalletSummary? {
        do {
            let w = try await provider.getWallet()
            return WalletSummary(
                walletID: w.walletID, ethereumAddress: w.ethereumAddress, solanaAddress: w.solanaAddress,
                createdAt: w.createdAt)
        } catch {
            if error.code == .unavailable { return nil }
            throw error
        }
    }

    /// `export phrase` and `export key --chain …`.
    static func export(_ args: inout Arguments, _ provider: RainProvider, _ output: Output) async throws {
        let sub = args.rest.first(where: { !$0.hasPrefix("-") })
        switch sub {
        case "phrase":
            _ = try args.positional("subcommand")
            if showHelp(args, exportPhraseHelp) { return }
            let isConfirmed = args.flag("--yes")
            try args.finish()
            try confirmExport("recovery phrase", isConfirmed: isConfirmed, help: exportPhraseHelp)
            let words = try await provider.exportRecoveryPhrase()
            if output.isJSON { output.json(["words": words]) } else { output.line(words.joined(separator: " ")) }
        case "key":
            _ = try args.positional("subcommand")
            if showHelp(args, exportKeyHelp) { return }
            let isConfirmed = args.flag("--yes")
            guard let name = try args.option("--chain") else {
                throw UsageError("give --chain ethereum or --chain solana", help: exportKeyHelp)
            }
            guard let chain = RainChain(rawValue: name.lowercased()) else {
                throw UsageError("unknown chain \(name): give ethereum or solana", help: exportKeyHelp)
            }
            try args.finish()
            try confirmExport("private key", isConfirmed: isConfirmed, help: exportKeyHelp)
            let key = try await provider.exportPrivateKey(chain: chain)
            if output.isJSON { output.json(["chain": chain.rawValue, "privateKey": key]) } else { output.line(key) }
        default:
            if showHelp(args, "usage: rainwallet export phrase|key\n\n\(exportPhraseHelp)\n\n\(exportKeyHelp)") { return }
            throw UsageError("export needs a subcommand: phrase or key", help: exportPhraseHelp + "\n\n" + exportKeyHelp)
        }
    }

    /// Secrets are printed only to a terminal after the user types YES, or anywhere with `--yes`.
    /// - Throws: a usage error (64) when stdin or stdout is not a terminal and `--yes` was not
    ///   given; RAIN_401 when the user does not type YES.
    static func confirmExport(_ what: String, isConfirmed: Bool, help: String) throws {
        if isConfirmed { return }
        guard isatty(1) == 1 else {
            throw UsageError("refusing to print the \(what) to a non-terminal; pass --yes to do it anyway", help: help)
        }
        guard isatty(0) == 1 else {
            throw UsageError("confirming needs a terminal on stdin; pass --yes to skip the question", help: help)
        }
        FileHandle.standardError.write(Data("Type YES to print your \(what): ".utf8))
        guard readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces) == "YES" else {
            throw RainError(.userCancelled, "nothing was printed: the answer was not YES")
        }
    }

    static func watch(_ provider: RainProvider, _ output: Output) async throws {
        for try await event in try provider.events() {
            if output.isJSON {
                var o: [String: Any?] = [
                    "type": event.kind.rawValue, "sequence": Int(event.sequence),
                ]
                for (k, v) in event.state.jsonObject { o[k] = v }
                if let r = event.expiryReason { o["reason"] = r.rawValue }
                output.json(o)
            } else {
                var text = "#\(event.sequence) \(event.kind.rawValue): \(event.state.authState.rawValue)"
                if let at = event.state.expiresAt { text += ", expires \(RFC3339.string(from: at))" }
                if case .expired = event.state.sessionState { text += ", session expired" }
                if let r = event.expiryReason { text += " (reason: \(r.rawValue))" }
                output.line(text)
            }
        }
        throw RainError(.notInitialized, "the daemon ended the event stream")
    }
}

extension Arguments {
    /// The single positional argument of a command, refusing anything else.
    func positionalOnly(_ what: String) throws(UsageError) -> String {
        var copy = self
        let v = try copy.positional(what)
        try copy.finish()
        return v
    }
}
