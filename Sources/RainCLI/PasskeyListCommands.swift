import FoundationEssentials
import RainCommandLine
import RainCore
import RainWallet

/// `rainwallet passkey list` and `rainwallet passkey remove`: the account's passkeys, each with its
/// domain, kind and creation time; one removed once the user confirms it on the prompt.
extension PasskeyCommand {
    /// The JSON fields of one passkey, as `passkey list --json` prints it.
    static let passkeyJSONFields: [Command.JSONField] = [
        .init("credentialId", "base64url: what `passkey remove` takes"), .init("domain", "the passkey domain"),
        .init("kind", "\"platform\", \"security-key\", \"file\" or \"unknown\""), .init("createdAt", "RFC 3339"),
        .init("lastUsedAt", "RFC 3339, or null"),
    ]

    enum List: CLICommand {
        static let declaration = Command(
            name: "list", abstract: "list the account's passkeys: domain, kind, creation and last use",
            discussion: """
                Lists the passkeys of the session's account, oldest first, for every domain: each
                one's id (what `rainwallet passkey remove` takes), domain, kind (platform: this
                device's TPM or another platform authenticator; security-key: a USB, NFC or
                Bluetooth key or a phone; file: the development authenticator; unknown: registered
                before kinds were recorded), creation time and last login.
                """,
            json: .init(.array, passkeyJSONFields),
            exitStatuses: [.init(4, "no live session (RAIN_201)")])

        static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
            let account = try await context.provider.account()
            context.output.result(
                json: account.passkeys.map(PasskeyCommand.object), text: PasskeyCommand.lines(account.passkeys))
        }
    }

    enum Remove: CLICommand {
        static let declaration = Command(
            name: "remove", abstract: "remove one of the account's passkeys (asks the user on the prompt)",
            discussion: """
                Removes the passkey ID (as `rainwallet passkey list` shows it) from the account, for
                every device and app: it no longer logs in. The daemon asks on its prompt, which
                names the passkey's domain, kind and creation (type the code it shows); the removal
                is audited (passkey_removed). The account's last way to log in is never removed:
                add a backup email (`rainwallet contact add`) or another passkey first.
                """,
            arguments: [.init("ID", help: "the passkey's id (credentialId in `rainwallet passkey list --json`)")],
            json: .init(.array, passkeyJSONFields, note: "the passkeys left on the account"),
            exitStatuses: [
                .init(3, "no passkey of that id on the account, or it is the last way to log in (RAIN_102)"),
                .init(4, "no live session (RAIN_201)"),
                .init(5, "no prompt can be shown (RAIN_202)"),
                .init(8, "another prompt is open, or the app is locked out after refusals (RAIN_302)"),
                .init(9, "the prompt was dismissed, timed out or answered wrong (RAIN_401): nothing removed"),
            ])

        static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
            let id = parsed.argument("ID") ?? ""
            context.output.note("Removing passkey \(id): confirm on the rainwalletd prompt (type the code it shows)…")
            let account = try await context.provider.removePasskey(id: id)
            let left = PasskeyCommand.lines(account.passkeys)
            context.output.result(
                json: account.passkeys.map(PasskeyCommand.object), text: "Passkey \(id) removed.\n" + left)
        }
    }

    static func object(_ p: PasskeyInfo) -> [String: Any?] {
        [
            "credentialId": p.credentialID, "domain": p.rpID, "kind": p.kind.displayName, "createdAt": p.createdAt,
            "lastUsedAt": p.lastUsedAt,
        ]
    }

    /// One line per passkey, or a sentence for none.
    static func lines(_ passkeys: [PasskeyInfo]) -> String {
        guard !passkeys.isEmpty else { return "No passkeys on this account." }
        return passkeys.map { p in
            let used = p.lastUsedAt.map { RFC3339.string(from: $0) } ?? "never"
            return "\(p.credentialID)  \(p.rpID)  \(p.kind.displayName)  created \(RFC3339.string(from: p.createdAt))  "
                + "last used \(used)"
        }.joined(separator: "\n")
    }
}
