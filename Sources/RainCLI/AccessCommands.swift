import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainSystem
import RainWallet

/// `rainwallet apps list|approve|revoke`: which programs may use which profile.
enum AppsCommand: CLICommand {
    static let declaration = Command(
        name: "apps", abstract: "list, approve or revoke the apps that may use a profile",
        discussion: """
            Each profile belongs to the apps the user approved: the first app to use it, approved on
            the daemon's prompt, and any approved later. Another program gets RAIN_202
            app_not_approved. Approving and revoking ask the user on the prompt (typing the code it
            shows), so a program cannot approve itself by running this command.
            """)
    static var subcommands: [any CLICommand.Type] { [AppsListCommand.self, AppsApproveCommand.self, AppsRevokeCommand.self] }

    static let entryFields: [Command.JSONField] = [
        .init("profile", "the profile"), .init("path", "the program (and script)"),
        .init("sha256", "its content's SHA-256 (hex), or null for any content (policy)"),
        .init("approvedAt", "when (RFC 3339 UTC), or null for a policy entry"),
        .init("source", "prompt, first-use or policy"), .init("owner", "true for the profile's first app"),
        .init("script", "true for a script: not verifiable, asked on each connection unless the policy names it"),
    ]

    static func json(_ e: RainAppEntry) -> [String: Any?] {
        [
            "profile": e.profile, "path": e.path, "sha256": e.contentHash.isEmpty ? nil : e.contentHash,
            "approvedAt": e.approvedAt.isEmpty ? nil : e.approvedAt, "source": e.source, "owner": e.isOwner,
            "script": e.isScript,
        ]
    }

    static let exitStatuses: [Command.ExitStatus] = [
        .init(5, "not approved, or no prompt can be shown (RAIN_202)"),
        .init(8, "another prompt is open, or the app is locked out after refusals (RAIN_302)"),
        .init(9, "the prompt was dismissed, timed out or answered wrong (RAIN_401)"),
    ]
}

enum AppsListCommand: CLICommand {
    static let declaration = Command(
        name: "list", abstract: "the approved apps of every profile",
        json: .init(.array, AppsCommand.entryFields))

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let apps = try await context.provider.listApps()
        if context.output.isJSON {
            context.output.json(apps.map(AppsCommand.json))
            return
        }
        if apps.isEmpty {
            context.output.line("No app is approved yet: the first app to use a profile is asked about.")
            return
        }
        for e in apps {
            let hash = e.contentHash.isEmpty ? "any content" : "sha256 \(e.contentHash.prefix(12))…"
            let when = e.approvedAt.isEmpty ? "" : ", \(e.approvedAt)"
            let kind = e.isScript ? "script, not verifiable: " : ""
            context.output.line("\(e.profile): \(kind)\(e.path) (\(hash), \(e.source)\(when)\(e.isOwner ? ", owner" : ""))")
        }
    }
}

enum AppsApproveCommand: CLICommand {
    static let declaration = Command(
        name: "approve", abstract: "approve PROGRAM for the profile (asks the user on the prompt)",
        discussion: """
            Approves the program's content as it is now: after an update the new version is asked
            about again. For a script, give the interpreter and the script:
            rainwallet apps approve /usr/bin/python3 /home/me/tool.py
            """,
        arguments: [
            Command.Argument("PROGRAM", help: "the program's absolute path", kind: .file),
            Command.Argument("SCRIPT", help: "for an interpreter: the script's absolute path", isOptional: true, kind: .file),
        ],
        json: .init(.object, AppsCommand.entryFields),
        exitStatuses: AppsCommand.exitStatuses)

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let path = try absolute(parsed.argument("PROGRAM") ?? "", "PROGRAM")
        let script = try parsed.argument("SCRIPT").map { try absolute($0, "SCRIPT") }
        context.output.note("Confirm on the rainwalletd prompt (type the code it shows)…")
        let entry = try await context.provider.approveApp(path: path, script: script)
        context.output.result(
            json: entry.map(AppsCommand.json) ?? [:],
            text: "Approved \(entry?.path ?? path) for profile \(entry?.profile ?? "").")
    }

    static func absolute(_ path: String, _ word: String) throws -> String {
        guard path.hasPrefix("/") else {
            throw UsageError("\(word) must be an absolute path (\(path)); e.g. $(command -v \(path))", word: word)
        }
        return path
    }
}

enum AppsRevokeCommand: CLICommand {
    static let declaration = Command(
        name: "revoke", abstract: "remove PROGRAM's approval of the profile (asks the user on the prompt)",
        arguments: [Command.Argument("PROGRAM", help: "the path as `rainwallet apps list` shows it")],
        json: .init(.object, [.init("revoked", "true")]),
        exitStatuses: AppsCommand.exitStatuses)

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let path = parsed.argument("PROGRAM") ?? ""
        context.output.note("Confirm on the rainwalletd prompt (type the code it shows)…")
        try await context.provider.revokeApp(path: path)
        context.output.result(json: ["revoked": true], text: "Revoked \(path).")
    }
}

/// `rainwallet settings [confirm]`: the security settings waiting for the user's confirmation.
enum SettingsCommand: CLICommand {
    static let declaration = Command(
        name: "settings", abstract: "show the security settings waiting for confirmation",
        discussion: """
            The security settings of the config (allowExport, allowedUIDs, codeSender, storage,
            access.pinentry, access.apps) take effect only once the user confirms them on the
            daemon's prompt, or come from root's /etc/rainwallet/policy.json. Until then rainwalletd
            runs on the last confirmed ones. Confirmed changes apply at the next start.
            """,
        isRunnableWithoutSubcommand: true,
        json: .init(
            .object,
            [
                .init("confirmedDigest", "SHA-256 of the settings the daemon runs with"),
                .init("requestedDigest", "SHA-256 of the config's settings"),
                .init(
                    "pending", "the changes waiting",
                    fields: [
                        .init("key", "the setting"), .init("confirmed", "its value now"), .init("requested", "the config's"),
                    ]),
                .init("fixedByPolicy", "the settings policy.json fixes"),
            ]))
    static var subcommands: [any CLICommand.Type] { [SettingsConfirmCommand.self] }

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let status = try await context.provider.settingsStatus()
        if context.output.isJSON {
            context.output.json([
                "confirmedDigest": status.confirmedDigest, "requestedDigest": status.requestedDigest,
                "pending": status.pending.map {
                    ["key": $0.key, "confirmed": $0.confirmed, "requested": $0.requested] as [String: Any?]
                },
                "fixedByPolicy": status.fixedByPolicy,
            ])
            return
        }
        if status.pending.isEmpty {
            context.output.line("No settings change waits for confirmation.")
        } else {
            // The prompt names this digest when the changes do not fit on it.
            let digest = RainSettingsStatus.shortDigest(status.requestedDigest)
            context.output.line("Waiting for confirmation, digest \(digest) (run `rainwallet settings confirm`):")
            for c in status.pending {
                context.output.line("  \(c.key): \(c.confirmed ?? "(not set)") → \(c.requested ?? "(not set)")")
            }
        }
        if !status.fixedByPolicy.isEmpty {
            context.output.line("Fixed by the machine's policy: \(status.fixedByPolicy.joined(separator: ", "))")
        }
    }
}

enum SettingsConfirmCommand: CLICommand {
    static let declaration = Command(
        name: "confirm", abstract: "confirm the waiting settings on the daemon's prompt",
        json: .init(.object, [.init("confirmedDigest", "SHA-256 of the settings now confirmed")]),
        exitStatuses: AppsCommand.exitStatuses)

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let status = try await context.provider.settingsStatus()
        context.output.note("Confirm on the rainwalletd prompt (type the code it shows)…")
        let digest = try await context.provider.confirmSettings(requestedDigest: status.requestedDigest)
        context.output.result(
            json: ["confirmedDigest": digest],
            text: "Confirmed; restart rainwalletd to apply them (systemctl --user restart rainwalletd).")
    }
}

/// `rainwallet prompt here`: show the daemon's prompts on this terminal.
enum PromptCommand: CLICommand {
    static let declaration = Command(
        name: "prompt", abstract: "choose where rainwalletd asks the user")
    static var subcommands: [any CLICommand.Type] {
        [PromptHereCommand.self, PromptAddKeyCommand.self, PromptRemoveKeysCommand.self]
    }
}

/// `rainwallet prompt remove-keys`: confirmations are the typed code alone again.
enum PromptRemoveKeysCommand: CLICommand {
    static let declaration = Command(
        name: "remove-keys", abstract: "stop asking a touch of a security key after the confirmation code",
        discussion: """
            Removes every confirmation key added with `rainwallet prompt add-key`. It is confirmed
            like any confirmation: the code on the prompt, then a touch of a registered key.
            """,
        json: .init(.object, [.init("removed", "how many keys were removed")]),
        exitStatuses: AppsCommand.exitStatuses + [.init(10, "no registered key is plugged in (RAIN_404)")])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        context.output.note(
            "Confirm on the rainwalletd prompt (type the code it shows), then touch your confirmation key when it blinks…")
        let removed = try await context.provider.removeConfirmationKeys()
        context.output.result(
            json: ["removed": removed],
            text: removed == 0
                ? "No confirmation key was registered." : "Removed \(removed) confirmation key(s): the typed code alone confirms."
        )
    }
}

/// `rainwallet prompt add-key`: a security key's touch after every typed code.
enum PromptAddKeyCommand: CLICommand {
    static let declaration = Command(
        name: "add-key", abstract: "require a touch of a security key after every typed confirmation code",
        discussion: """
            Confirm on the prompt (type the code it shows), then touch the security key to register
            when it blinks (its PIN, if it has one, is asked on the prompt). From then on every
            confirmation (an export, a signature, an app approval, a settings change) asks, after
            the code, a touch of a registered key: a program that reads the screen can learn the
            code, it cannot press the key. Once a key is registered, adding another one also
            takes a touch of a registered key.
            """,
        json: .init(
            .object, [.init("name", "the key's product name"), .init("keyCount", "how many confirmation keys are registered")]),
        exitStatuses: AppsCommand.exitStatuses + [
            .init(10, "no security key is plugged in (RAIN_404)")
        ])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        context.output.note(
            "Confirm on the rainwalletd prompt (type the code it shows), then touch your security key when it blinks…")
        let added = try await context.provider.addConfirmationKey()
        let name = added.name.isEmpty ? "The security key" : added.name
        context.output.result(
            json: ["name": added.name, "keyCount": added.keyCount],
            text: "\(name) is a confirmation key (\(added.keyCount) registered): touch it after each confirmation code.")
    }
}

enum PromptHereCommand: CLICommand {
    static let declaration = Command(
        name: "here", abstract: "show the daemon's prompts on this terminal from now on",
        discussion: """
            For a machine without a display: run it in a terminal you keep for that (a tmux pane).
            It is confirmed on the current prompt place, or on the display. With neither, the very
            first registration is trusted and audited, and asks you to choose a place secret (at
            least 8 characters); once a place has existed, a new one is confirmed by that secret
            (5 wrong tries lock it for 10 minutes) and takes over after a 10-minute wait, which
            this command waits out. A prompt is never shown on the terminal of the app that asks.
            """,
        json: .init(.object, [.init("terminal", "the terminal registered")]),
        exitStatuses: AppsCommand.exitStatuses + [.init(64, "stdin is not a terminal")])

    /// Secrets asked for before giving up (a typo, two entries that differ).
    static let secretAttempts = 3

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        guard isatty(0) == 1, let name = ttyname(0) else {
            throw UsageError("stdin is not a terminal: run `rainwallet prompt here` in the terminal that should show prompts")
        }
        let path = String(cString: name)
        var secret: String?
        var attempts = 0
        while true {
            do throws(RainError) {
                let terminal = try await context.provider.registerPrompt(terminal: path, secret: secret)
                context.output.result(
                    json: ["terminal": terminal], text: "rainwalletd's prompts appear on \(terminal) from now on.")
                return
            } catch {
                let reason = error.details.reason
                attempts += 1
                let mayAskAgain = attempts <= secretAttempts
                switch reason {
                case "prompt_secret_to_choose" where mayAskAgain, "prompt_secret_too_short" where mayAskAgain:
                    if reason == "prompt_secret_too_short" { context.output.note(error.message) }
                    secret = try chooseSecret()
                case "prompt_secret_required" where mayAskAgain, "prompt_secret_wrong" where mayAskAgain:
                    if reason == "prompt_secret_wrong" { context.output.note(error.message) }
                    secret = try enterSecret()
                case "prompt_move_waiting":
                    let wait = Duration.milliseconds(Int64(error.details.retryAfterMilliseconds ?? 1000))
                    let at = Date().addingTimeInterval(TimeInterval(wait.components.seconds) + 1)
                    context.output.note(
                        "The place secret is right. The prompts move here after a wait (until \(DateText.localClockTime(at))), "
                            + "so that a stolen secret leaves time to notice in `rainwallet audit`; keep this running.")
                    try await Task.sleep(for: wait + .milliseconds(500))
                    attempts = 0
                default:
                    throw error
                }
            }
        }
    }

    static func chooseSecret() throws -> String {
        let prompt = "Choose a place secret (at least 8 characters; it confirms a new prompt place if this one is ever gone): "
        guard let first = PassphraseInput.hiddenTerminalLine(prompt: prompt), !first.isEmpty else {
            throw UsageError("no place secret was entered", help: "")
        }
        guard PassphraseInput.hiddenTerminalLine(prompt: "The same place secret again: ") == first else {
            throw UsageError("the two place secrets differ: run `rainwallet prompt here` again", help: "")
        }
        return first
    }

    static func enterSecret() throws -> String {
        guard
            let secret = PassphraseInput.hiddenTerminalLine(
                prompt: "The prompt place registered before is gone. Enter the place secret: "),
            !secret.isEmpty
        else {
            throw UsageError("no place secret was entered", help: "")
        }
        return secret
    }
}
