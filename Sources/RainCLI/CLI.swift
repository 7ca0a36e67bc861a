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
          logout                                    end the session (wipes it, revokes it)
          info                                      show the daemon's version and capabilities
          dev outbox                                list codes delivered to the development outbox

        global options:
          --socket PATH    daemon socket (also $RAINWALLET_SOCKET; default
                           $XDG_RUNTIME_DIR/rainwallet/rainwalletd.sock or /tmp/rainwallet-$UID/rainwalletd.sock)
          --profile NAME   profile (app) to act for (default "default")
          --json           machine-readable output (camelCase keys, RFC 3339 UTC times)
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

        Shows the account behind the session: id, wallet id, creation time, contacts.
        With --json: {"accountId", "walletId", "createdAt", "contacts": [{"kind", "value"}]}.
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
        do {
            let socket = try args.option("--socket")
            let profile = try args.option("--profile") ?? ProfileName.defaultName
            let output = Output(isJSON: args.flag("--json"))
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
            if output.isJSON {
                output.json([
                    "accountId": a.accountID, "walletId": a.walletID, "createdAt": a.createdAt,
                    "contacts": a.contacts.map { ["kind": $0.kindName, "value": $0.value] as [String: Any?] },
                ])
            } else {
                output.line("account:  \(a.accountID)")
                output.line("wallet:   \(a.walletID)")
                output.line("created:  \(RFC3339.string(from: a.createdAt))")
                for c in a.contacts { output.line("contact:  \(c.kindName) \(c.value)") }
            }
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
