import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainSystem
import RainWallet

/// The JSON fields of a session, as `status --json` prints them.
let sessionJSONFields: [Command.JSONField] = [
    .init("authState", "the profile's auth state"),
    .init("sessionState", "\"active\", \"expired\" or null"),
    .init("expiresAt", "RFC 3339, or null"),
    .init("accountId", "the account, or null"),
    .init("walletId", "the wallet, or null"),
    .init("hasActiveSession", "true while the session is live"),
    .init("contact", "the contact logged in with, or null"),
    .init(
        "storageWarning",
        "\"session_not_persisted\" while the refreshed session could not be saved (free disk space), else null"),
    .init(
        "authorityLink",
        "the link to the authority: {\"state\": \"connected\", \"degraded\" (no answer, or refreshes fail) or "
            + "\"unreachable\" (no connection, a failed TLS handshake or device proof), \"lastError\": the failure's "
            + "message or null, \"since\": RFC 3339, \"revocationStream\": {\"state\": \"up\" or \"down\", "
            + "\"lastError\", \"since\"} or null (an embedded authority)}; null from a daemon that does not report it"),
    .init(
        "storage",
        "the daemon's keys: {\"state\": \"available\" or \"unavailable\" (the TPM cannot be reached, the keyring is "
            + "locked: the device's failure, not the authority's), \"lastError\", \"since\"}; null from a daemon "
            + "that does not report it"),
]

/// `--email ADDR` and `--phone NUMBER`, one of them required.
let contactOptions: [Command.Option] = [
    Command.Option("--email", value: "ADDR", help: "an email address"),
    Command.Option("--phone", value: "NUMBER", help: "a phone number in E.164, like +15551234567"),
]
let contactGroup = Command.ExclusiveGroup(["--email", "--phone"], isRequired: true)

extension ParsedCommand {
    /// The contact of `--email` or `--phone` (the parser made sure exactly one was given).
    var contact: RainWalletContact {
        get throws(UsageError) {
            if let email = value("--email") { return .email(email) }
            if let phone = value("--phone") { return .phone(phone) }
            throw UsageError("give --email ADDR or --phone NUMBER")
        }
    }
}

/// `rainwallet code send|confirm`.
enum CodeCommand: CLICommand {
    static let declaration = Command(name: "code", abstract: "send or confirm a login code")
    static var subcommands: [any CLICommand.Type] { [CodeSendCommand.self, CodeConfirmCommand.self] }
}

enum CodeSendCommand: CLICommand {
    static let declaration = Command(
        name: "send", abstract: "send a 6-digit login code",
        discussion: """
            Sends a 6-digit login code. Sending again replaces the pending code (Resend).
            Phone numbers are E.164, like +15551234567.
            """,
        options: contactOptions, exclusiveGroups: [contactGroup],
        json: .init(
            .object,
            [.init("sent", "true"), .init("contact", "the normalized contact"), .init("kind", "\"email\" or \"phone\"")]))

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let c = try parsed.contact
        try await context.provider.sendLoginCode(to: c)
        let shown = (try? c.normalized().value) ?? c.value
        context.output.result(
            json: ["sent": true, "contact": shown, "kind": c.kindName],
            text: "Code sent to \(shown). Confirm it with: rainwallet code confirm (it asks for the code)")
    }
}

enum CodeConfirmCommand: CLICommand {
    static let declaration = Command(
        name: "confirm", abstract: "confirm the code and log in",
        discussion: """
            Confirms the pending login code. Run it without CODE: it asks for the code on a terminal,
            or reads one line from stdin (printf '%s\\n' CODE | rainwallet code confirm); with no
            terminal and nothing on stdin it exits 64 at once. A CODE argument works but warns: every
            user of the machine can read a command line (ps). A wrong code keeps the challenge: try
            again (3 attempts).
            """,
        arguments: [.init("CODE", help: "the 6-digit code (better left out: it is then asked for)", isOptional: true)],
        json: .init(.object, sessionJSONFields + [.init("accountCreated", "true when the login created the account")]),
        exitStatuses: [.init(6, "the code is wrong (RAIN_203)"), .init(64, "no code typed, none on stdin")])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let code = try CodeInput.read(argument: parsed.argument("CODE"), command: "code confirm")
        try await confirm(code, context.provider, context.output)
    }

    static func confirm(_ code: String, _ provider: RainProvider, _ output: Output) async throws {
        let (session, created) = try await provider.confirmLoginCodeReturningSession(code)
        output.session(
            session, heading: created ? "Logged in. A new account and wallet were created." : "Logged in.",
            adding: ["accountCreated": created])
    }
}

/// `rainwallet login`: send a code, then read it.
enum LoginCommand: CLICommand {
    static let declaration = Command(
        name: "login", abstract: "send a code, then prompt for it",
        discussion: "Sends a login code, then reads it: prompts on a terminal, or reads one line from stdin.",
        options: contactOptions, exclusiveGroups: [contactGroup],
        json: .init(.object, sessionJSONFields + [.init("accountCreated", "true when the login created the account")]))

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let (provider, output) = (context.provider, context.output)
        let c = try parsed.contact
        let shown = (try? c.normalized().value) ?? c.value
        output.note("Sending a login code to \(shown)…")
        try await provider.sendLoginCode(to: c)
        let interactive = isatty(0) == 1
        while true {
            guard let typed = CodeInput.typedLine(prompt: "Enter the 6-digit code: "), !typed.isEmpty else {
                throw UsageError("no code was entered; confirm later with: rainwallet code confirm", help: "")
            }
            do {
                try await CodeConfirmCommand.confirm(typed, provider, output)
                return
            } catch let e as RainError where interactive && e == .invalidLoginCode && (e.details.attemptsRemaining ?? 0) > 0 {
                output.note("That code didn't work. Check it and try again (\(e.details.attemptsRemaining ?? 0) attempts left).")
            } catch let e as RainError where interactive && e.details.reason == "malformed_code" {
                output.note("A login code is 6 digits.")
            }
        }
    }
}

/// `rainwallet status`.
enum StatusCommand: CLICommand {
    static let declaration = Command(
        name: "status", abstract: "show the session of the profile",
        discussion: "Shows the profile's session.",
        json: .init(
            .object,
            sessionJSONFields + [
                .init("storageProvider", "the daemon's key provider: tpm2, secret-service or file"),
                .init("ptraceScope", Self.ptraceScopeField),
                .init(
                    "prompt", "where the next confirmation prompt appears, or null from a daemon that does not say",
                    fields: [
                        .init("terminal", "the registered terminal (rainwallet prompt here), or null"),
                        .init("hasDisplay", "true when the daemon has a display (used when no terminal is registered)"),
                        .init(
                            "multiplexer",
                            "a terminal multiplexer holding the terminal's other end, which can read the screen, or null",
                            fields: [.init("command", "tmux, screen, …"), .init("pid", "its pid")]),
                        .init(
                            "confirmationKeys",
                            "the security keys whose touch follows every typed code (rainwallet prompt add-key), oldest first"),
                    ]),
                .init("auditAnchor", Self.auditAnchorField),
            ]))

    /// What `auditAnchor` holds in `--json`.
    static let auditAnchorField =
        "with a remote authority, the daemon's own uid only: matched, mismatch (see audit --verify) or unchecked"

    /// The line about the audit log against its anchor at the remote authority.
    static func auditLine(_ info: DaemonInfo) -> String? {
        let prefix = "audit:          "
        switch info.auditAnchor {
        case "": return nil
        case "matched": return prefix + "the log held its anchor at the authority when the daemon started"
        case "mismatch":
            return prefix
                + "the log does NOT hold its anchor at the authority: it was cut or rewritten (rainwallet audit --verify)"
        case "unchecked":
            return prefix + "not checked against its anchor yet: the authority has not answered since the daemon started"
        default: return prefix + info.auditAnchor
        }
    }

    /// What `ptraceScope` holds in `--json`.
    static let ptraceScopeField =
        "whether programs of the user may read each other's memory: none (no Yama LSM), or kernel.yama.ptrace_scope 0 to 3"

    /// The line about what programs of the user may do to each other, as the daemon read it.
    static func memoryLine(_ info: DaemonInfo) -> String? {
        info.ptraceScope.isEmpty ? nil : "memory:         " + PtraceScope(wireValue: info.ptraceScope).explanation
    }

    /// The `prompt` object of `--json`.
    static func promptObject(_ place: RainPromptPlace) -> [String: Any?] {
        [
            "terminal": place.terminal.isEmpty ? nil : place.terminal, "hasDisplay": place.hasDisplay,
            "multiplexer": place.multiplexer.isEmpty
                ? nil : ["command": place.multiplexer, "pid": Int(place.multiplexerPID)] as [String: Any?],
            "confirmationKeys": place.confirmationKeys,
        ]
    }

    /// The line about where the next prompt appears, and who else can read it there.
    static func promptLine(_ place: RainPromptPlace) -> String {
        let label = "prompts:        "
        guard !place.terminal.isEmpty else {
            return label
                + (place.hasDisplay ? "the display" : "none: run `rainwallet prompt here` in a terminal kept for prompts")
        }
        guard !place.multiplexer.isEmpty else { return label + "terminal \(place.terminal)" }
        return label + "terminal \(place.terminal); \(place.multiplexer) (pid \(place.multiplexerPID)) holds its other end "
            + "and can read the screen, the prompt's code included"
    }

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        // A profile's stored session loads on first use: wait for it (up to 5 s) so status is settled.
        try await context.provider.awaitSessionRestore()
        let s = try await context.provider.currentSession()
        let info = try await context.provider.daemonInfo()
        // A daemon without per-app access, or older than Prompt/Get, says nothing of its prompt.
        let place = try? await context.provider.promptPlace()
        context.output.session(
            s,
            adding: [
                "storageProvider": info.storageProvider.isEmpty ? nil : info.storageProvider,
                "ptraceScope": info.ptraceScope.isEmpty ? nil : info.ptraceScope,
                "prompt": place.map(promptObject),
                "auditAnchor": info.auditAnchor.isEmpty ? nil : info.auditAnchor,
            ])
        guard !context.output.isJSON else { return }
        if let memory = memoryLine(info) { context.output.line(memory) }
        if let place { context.output.line(promptLine(place)) }
        if let place, !place.confirmationKeys.isEmpty {
            context.output.line(
                "touch:          after the code, a touch of "
                    + place.confirmationKeys.joined(separator: " or ") + " (rainwallet prompt add-key)")
        }
        if let audit = auditLine(info) { context.output.line(audit) }
    }
}

/// `rainwallet watch`.
enum WatchCommand: CLICommand {
    static let declaration = Command(
        name: "watch", abstract: "print session events as they happen",
        discussion: "Prints the current state, then one line per event until interrupted.",
        json: .init(
            .lines,
            [.init("type", "the event"), .init("sequence", "its number")] + sessionJSONFields
                + [.init("reason", "why the session expired, for expiry")]))

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let output = context.output
        for try await event in try context.provider.events() {
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

/// `rainwallet refresh`.
enum RefreshCommand: CLICommand {
    static let declaration = Command(
        name: "refresh", abstract: "refresh the session now",
        discussion: "Refreshes the session now (the daemon also refreshes it automatically ahead of expiry).",
        json: .init(.object, sessionJSONFields),
        exitStatuses: [
            .init(4, "there is no session or it ended (RAIN_201)"),
            .init(7, "the authority could not be reached; the session stays usable until it expires (RAIN_301)"),
        ])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let s = try await context.provider.refreshSession()
        context.output.session(s, heading: "Session refreshed.")
    }
}

/// The JSON fields of an account, as `account --json` prints them (without the wallet).
let accountJSONFields: [Command.JSONField] = [
    .init("accountId", "the account"),
    .init("walletId", "its wallet, or null"),
    .init("createdAt", "RFC 3339"),
    .init("contacts", "its verified contacts", fields: [.init("kind", "\"email\" or \"phone\""), .init("value", "the contact")]),
    .init("needsBackupEmail", "true when no verified email backs up its passkeys"),
    .init("passkeys", "its passkeys", fields: PasskeyCommand.passkeyJSONFields),
]

/// `rainwallet account`.
enum AccountCommand: CLICommand {
    static let declaration = Command(
        name: "account", abstract: "show the account and wallet of the session",
        discussion: """
            Shows the account behind the session: id, creation time, contacts, passkeys (domain,
            creation, last use), backup status, and its wallet: id, Ethereum address (EIP-55) and
            Solana address (base58).
            """,
        json: .init(
            .object,
            accountJSONFields + [
                .init(
                    "wallet", "the wallet, or null when the account has none",
                    fields: [
                        .init("id", "the wallet"), .init("ethereumAddress", "EIP-55"), .init("solanaAddress", "base58"),
                        .init("createdAt", "RFC 3339"),
                    ])
            ]))

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let output = context.output
        let a = try await context.provider.account()
        let wallet = try await walletSummary(context.provider)
        if output.isJSON {
            var object = CLI.accountObject(a)
            object["wallet"] = wallet.map { w -> Any? in
                [
                    "id": w.walletID, "ethereumAddress": w.ethereumAddress, "solanaAddress": w.solanaAddress,
                    "createdAt": w.createdAt,
                ]
            }
            output.json(object)
        } else {
            CLI.accountLines(a).forEach(output.line)
            if let wallet {
                output.line("wallet:   \(wallet.walletID)")
                output.line("ethereum: \(wallet.ethereumAddress)")
                output.line("solana:   \(wallet.solanaAddress)")
            } else {
                output.line("wallet:   unavailable")
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
        } catch let error as RainError where error.code == .unavailable {
            return nil
        } catch {
            throw RainError.wrapping(error, context: "read the wallet")
        }
    }
}

/// `rainwallet logout`.
enum LogoutCommand: CLICommand {
    static let declaration = Command(
        name: "logout", abstract: "end the session (wipes it, revokes it)",
        discussion: "Ends the session: the daemon wipes it from storage and revokes it at the authority.",
        json: .init(
            .object,
            [
                .init("hadSession", "false when there was no session to end"),
                .init("revokedAtAuthority", "false when the authority could not be reached to revoke it"),
            ]))

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let output = context.output
        let r = try await context.provider.logout()
        if output.isJSON {
            output.json(["hadSession": r.hadSession, "revokedAtAuthority": r.revokedAtAuthority])
        } else if !r.hadSession {
            output.line("There was no session to end.")
        } else {
            output.line(
                r.revokedAtAuthority
                    ? "Logged out." : "Logged out on this device (the authority could not be reached to revoke the session).")
        }
    }
}

/// `rainwallet info`.
enum InfoCommand: CLICommand {
    static let declaration = Command(
        name: "info", abstract: "show the daemon's version and capabilities",
        discussion: "Shows the daemon version, protocol version and capabilities.",
        json: .init(
            .object,
            [
                .init("daemonVersion", "the daemon's version"), .init("protocolVersion", "a number"),
                .init("capabilities", "an array of names"), .init("maxFrameBytes", "the largest frame the daemon takes"),
                .init("storageProvider", "the key provider in use: tpm2, secret-service or file"),
                .init("ptraceScope", StatusCommand.ptraceScopeField),
                .init("authorityLink", "the link to the authority, as status --json has it, or null"),
                .init("storage", "the daemon's keys, as status --json has it, or null"),
            ]))

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let output = context.output
        let info = try await context.provider.daemonInfo()
        if output.isJSON {
            output.json([
                "daemonVersion": info.daemonVersion, "protocolVersion": Int(info.protocolVersion),
                "capabilities": info.capabilities, "maxFrameBytes": Int(info.maxFrameBytes),
                "storageProvider": info.storageProvider.isEmpty ? nil : info.storageProvider,
                "ptraceScope": info.ptraceScope.isEmpty ? nil : info.ptraceScope,
                "authorityLink": info.authorityLink.map(\.jsonObject), "storage": info.storage.map(\.jsonObject),
            ])
        } else {
            output.line("rainwalletd \(info.daemonVersion), protocol \(info.protocolVersion)")
            output.line("capabilities: \(info.capabilities.joined(separator: ", "))")
            if !info.storageProvider.isEmpty { output.line("key provider: \(info.storageProvider)") }
            if let memory = StatusCommand.memoryLine(info) { output.line(memory) }
            for line in (info.authorityLink?.lines ?? []) + (info.storage.map { [$0.line] } ?? []) { output.line(line) }
        }
    }
}

/// `rainwallet dev outbox`.
enum DevCommand: CLICommand {
    static let declaration = Command(name: "dev", abstract: "development tools")
    static var subcommands: [any CLICommand.Type] { [DevOutboxCommand.self] }
}

enum DevOutboxCommand: CLICommand {
    static let declaration = Command(
        name: "outbox", abstract: "list codes delivered to the development outbox",
        discussion: "Lists code deliveries of the development outbox, newest last.",
        json: .init(
            .array,
            [
                .init("contact", "the contact"), .init("code", "the code"), .init("sentAt", "RFC 3339"),
                .init("kind", "\"email\" or \"phone\""), .init("appId", "the profile it was sent for"),
            ]))

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let output = context.output
        let entries = try await context.provider.devOutbox()
        if output.isJSON {
            output.json(
                entries.map { e -> [String: Any?] in
                    [
                        "contact": e.contact?.value, "kind": e.contact?.kindName, "code": e.code, "sentAt": e.sentAt,
                        "appId": e.appID,
                    ]
                })
        } else if entries.isEmpty {
            output.line("The outbox is empty.")
        } else {
            for e in entries {
                output.line("\(RFC3339.string(from: e.sentAt))  \(e.appID)  \(e.contact?.value ?? "?")  \(e.code)")
            }
        }
    }
}
