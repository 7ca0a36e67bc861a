import FoundationEssentials
import Glibc
import RainCommandLine
import RainCore
import RainWallet

/// `rainwallet export phrase|key`: print the wallet's secrets, behind a confirmation.
enum ExportCommand: CLICommand {
    static let declaration = Command(name: "export", abstract: "print the wallet's recovery phrase or a private key")
    static var subcommands: [any CLICommand.Type] { [ExportPhraseCommand.self, ExportKeyCommand.self] }

    static let yes = Command.Option.flag("--yes", help: "print without asking (needed when stdin or stdout is not a terminal)")

    static let confirmation = """
        On a terminal it first asks you to type YES. It refuses to print to anything but a terminal
        (a pipe or a file) unless --yes is given. Needs a live session (exit 4) and
        "allowExport": true for the profile in the daemon's config file (exit 5 otherwise).
        """

    static let exitStatuses: [Command.ExitStatus] = [
        .init(4, "no live session (RAIN_201)"),
        .init(5, "the profile does not allow export (RAIN_202)"),
        .init(9, "the answer was not YES (RAIN_401)"),
        .init(64, "not a terminal and no --yes"),
    ]

    /// Secrets are printed only to a terminal after the user types YES, or anywhere with `--yes`.
    /// - Throws: a usage error (64) when stdin or stdout is not a terminal and `--yes` was not
    ///   given; RAIN_401 when the user does not type YES.
    static func confirmExport(_ what: String, isConfirmed: Bool) throws {
        if isConfirmed { return }
        guard isatty(1) == 1 else {
            throw UsageError("refusing to print the \(what) to a non-terminal; pass --yes to do it anyway", word: "--yes")
        }
        guard isatty(0) == 1 else {
            throw UsageError("confirming needs a terminal on stdin; pass --yes to skip the question", word: "--yes")
        }
        StandardError.write("Type YES to print your \(what): ")
        guard readLine(strippingNewline: true)?.trimmingWhitespace() == "YES" else {
            throw RainError(.userCancelled, "nothing was printed: the answer was not YES")
        }
    }
}

enum ExportPhraseCommand: CLICommand {
    static let declaration = Command(
        name: "phrase", abstract: "print the wallet's recovery phrase (needs allowExport)",
        discussion: """
            Prints the wallet's 12-word recovery phrase on one line. Anyone who has it owns the wallet:
            write it down and keep it offline.

            \(ExportCommand.confirmation)
            """,
        options: [ExportCommand.yes],
        json: .init(.object, [.init("words", "the 12 words, in order")]),
        exitStatuses: ExportCommand.exitStatuses)

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        try ExportCommand.confirmExport("recovery phrase", isConfirmed: parsed.flag("--yes"))
        let words = try await context.provider.exportRecoveryPhrase()
        context.output.result(json: ["words": words], text: words.joined(separator: " "))
    }
}

enum ExportKeyCommand: CLICommand {
    static let declaration = Command(
        name: "key", abstract: "print a private key; CHAIN: ethereum or solana",
        discussion: """
            Prints one chain's private key: Ethereum as 0x + 64 lowercase hex digits, Solana as the
            64-byte keypair (seed, then public key) in base58. Anyone who has it owns that account.

            \(ExportCommand.confirmation)
            """,
        options: [
            Command.Option(
                "--chain", value: "CHAIN", help: "ethereum or solana",
                kind: .choice(RainChain.allCases.map(\.rawValue), isCaseSensitive: false), isRequired: true),
            ExportCommand.yes,
        ],
        json: .init(.object, [.init("chain", "ethereum or solana"), .init("privateKey", "the key")]),
        exitStatuses: ExportCommand.exitStatuses)

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        let name = parsed.value("--chain") ?? ""
        guard let chain = RainChain(rawValue: name.lowercased()) else {
            throw UsageError("unknown chain \(name): give ethereum or solana", word: "--chain")
        }
        try ExportCommand.confirmExport("private key", isConfirmed: parsed.flag("--yes"))
        let key = try await context.provider.exportPrivateKey(chain: chain)
        context.output.result(json: ["chain": chain.rawValue, "privateKey": key], text: key)
    }
}
