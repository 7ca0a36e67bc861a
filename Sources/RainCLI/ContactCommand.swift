import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainWallet

/// `rainwallet contact add|confirm`: attach a verified backup contact to the logged-in account.
enum ContactCommand: CLICommand {
    static let declaration = Command(name: "contact", abstract: "verify a backup contact for the account")
    static var subcommands: [any CLICommand.Type] { [ContactAddCommand.self, ContactConfirmCommand.self] }

    static func add(_ contact: RainWalletContact, provider: RainProvider, output: Output) async throws {
        let sent = try await provider.sendContactVerificationCode(to: contact)
        let shown = sent.contact?.value ?? contact.value
        output.result(
            json: ["sent": true, "contact": shown, "kind": contact.kindName, "expiresAt": sent.expiresAt],
            text: "Verification code sent to \(shown). Confirm it with: rainwallet contact confirm (it asks for the code)")
    }

    static func confirm(_ code: String, provider: RainProvider, output: Output) async throws {
        let account = try await provider.confirmContactVerification(code)
        if output.isJSON {
            output.json(CLI.accountObject(account))
        } else {
            output.line("Contact verified: it now logs in to this account.")
            CLI.accountLines(account).forEach(output.line)
        }
    }

    /// After a passkey sign-up on a terminal: asks for a backup email and verifies it (send,
    /// prompt for the code, confirm). An empty answer skips it. Elsewhere: a hint only.
    static func offerBackupEmail(provider: RainProvider, output: Output) async {
        let hint = "Add a backup email so you can still log in if this passkey is lost: rainwallet contact add --email ADDR"
        guard isatty(0) == 1, isatty(1) == 1, !output.isJSON else {
            output.note(hint)
            return
        }
        while true {
            guard let typed = CodeInput.typedLine(prompt: "Backup email (empty to skip): ")?.trimmingWhitespace(),
                !typed.isEmpty
            else {
                output.note(hint)
                return
            }
            do {
                try await add(.email(typed), provider: provider, output: output)
            } catch let error as RainError where error.code == .invalidArgument {
                output.note("That email address is not valid (\(error.message)). Try again.")
                continue
            } catch {
                output.note("The backup email could not be added (\(error)). \(hint)")
                return
            }
            break
        }
        while true {
            guard let typed = CodeInput.typedLine(prompt: "Enter the 6-digit verification code: "), !typed.isEmpty else {
                output.note("No code entered; confirm later with: rainwallet contact confirm")
                return
            }
            do {
                try await confirm(typed, provider: provider, output: output)
                return
            } catch let e as RainError where e == .invalidLoginCode && (e.details.attemptsRemaining ?? 0) > 0 {
                output.note("That code didn't work. Try again (\(e.details.attemptsRemaining ?? 0) attempts left).")
            } catch let e as RainError where e.details.reason == "malformed_code" {
                output.note("A verification code is 6 digits.")
            } catch {
                output.note("The backup email could not be verified (\(error)). \(hint)")
                return
            }
        }
    }
}

enum ContactAddCommand: CLICommand {
    static let declaration = Command(
        name: "add", abstract: "send a code that verifies a backup contact",
        discussion: """
            Sends a 6-digit code that verifies a backup contact for the logged-in account; confirm it
            with `rainwallet contact confirm` (it asks for the code). Sending again replaces the
            pending verification. Once verified, the contact logs in to this account and wallet. A
            second email is added beside the first. Accounts are never merged.
            """,
        options: contactOptions, exclusiveGroups: [contactGroup],
        json: .init(
            .object,
            [
                .init("sent", "true"), .init("contact", "the normalized contact"), .init("kind", "\"email\" or \"phone\""),
                .init("expiresAt", "RFC 3339: when the code expires"),
            ]),
        exitStatuses: [
            .init(4, "no session (RAIN_201)"),
            .init(8, "another account owns the contact (RAIN_302, reason contact_owned_by_another_account)"),
        ])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        try await ContactCommand.add(parsed.contact, provider: context.provider, output: context.output)
    }
}

enum ContactConfirmCommand: CLICommand {
    static let declaration = Command(
        name: "confirm", abstract: "confirm it: the contact joins the account",
        discussion: """
            Confirms the pending contact verification: the contact is attached to the account,
            verified. Run it without CODE: it asks for the code on a terminal, or reads one line from
            stdin (printf '%s\\n' CODE | rainwallet contact confirm); with no terminal and nothing on
            stdin it exits 64 at once. A CODE argument works but warns: every user of the machine can
            read a command line (ps). A wrong code keeps the verification: try again (3 attempts).
            """,
        arguments: [.init("CODE", help: "the 6-digit code (better left out: it is then asked for)", isOptional: true)],
        json: .init(
            .object, accountJSONFields, note: "the account, as `rainwallet account --json` prints it (without the wallet)"),
        exitStatuses: [.init(6, "the code is wrong (RAIN_203)"), .init(64, "no code typed, none on stdin")])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let code = try CodeInput.read(
            argument: parsed.argument("CODE"), command: "contact confirm", kind: "6-digit verification code")
        try await ContactCommand.confirm(code, provider: context.provider, output: context.output)
    }
}

extension CLI {
    /// The `account --json` object of an account (without its wallet).
    static func accountObject(_ a: Account) -> [String: Any?] {
        [
            "accountId": a.accountID, "walletId": a.walletID, "createdAt": a.createdAt,
            "contacts": a.contacts.map { ["kind": $0.kindName, "value": $0.value] as [String: Any?] },
            "needsBackupEmail": a.needsBackupEmail,
            "passkeys": a.passkeys.map(PasskeyCommand.object),
        ]
    }

    /// Human lines for an account: id, creation, contacts, passkeys and backup status.
    static func accountLines(_ a: Account) -> [String] {
        var lines = ["account:  \(a.accountID)", "created:  \(RFC3339.string(from: a.createdAt))"]
        for c in a.contacts { lines.append("contact:  \(c.kindName) \(c.value)") }
        for p in a.passkeys {
            let used = p.lastUsedAt.map { RFC3339.string(from: $0) } ?? "never"
            lines.append(
                "passkey:  \(p.rpID) (\(p.kind.displayName)), created \(RFC3339.string(from: p.createdAt)), last used \(used)")
        }
        if a.needsBackupEmail {
            lines.append("backup email: none — add one with rainwallet contact add --email ADDR")
        } else {
            lines.append("backup email: verified")
        }
        return lines
    }
}
