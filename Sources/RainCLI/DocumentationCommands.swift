import RainCommandLine

/// `rainwallet completion SHELL`: a completion script generated from the command declarations.
enum CompletionCommand: CLICommand {
    static let declaration = Command(
        name: "completion", abstract: "print the shell completion script for bash, zsh or fish",
        discussion: """
            Generated from the same declarations as this help: every command, subcommand and option.
            Try it in the running shell with `source <(rainwallet completion bash)` (zsh: the same after
            compinit; fish: `rainwallet completion fish | source`), or install it where the shell looks:
            /usr/share/bash-completion/completions/rainwallet, a directory of $fpath as _rainwallet,
            /usr/share/fish/vendor_completions.d/rainwallet.fish.
            """,
        arguments: [
            .init("SHELL", help: "bash, zsh or fish", kind: .choice(CompletionScript.Shell.allCases.map(\.rawValue)))
        ])

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        // The parser checked SHELL against the choices.
        guard let shell = CompletionScript.Shell(rawValue: parsed.argument("SHELL") ?? "") else {
            throw UsageError("SHELL must be bash, zsh or fish", word: "SHELL")
        }
        print(CompletionScript(root: context.formatter.root).script(for: shell), terminator: "")
    }
}

/// `rainwallet man`: rainwallet(1) as roff, generated from the declarations. Hidden: scripts/gen-man
/// runs it (with `rainwalletd man` for rainwalletd(8) and rainwallet-config(5)).
enum ManCommand: CLICommand {
    static let declaration = Command(
        name: "man", abstract: "print the rainwallet(1) man page as roff (for packaging: scripts/gen-man)", isHidden: true)

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        var page = ManPage(program: context.formatter.root, section: 1, manual: "RainWallet Manual")
        page.add(
            "FILES",
            [
                .item(
                    tag: "$XDG_RUNTIME_DIR/rainwallet/rainwalletd.sock",
                    text: "the daemon's socket (the default of `--socket`)")
            ])
        page.add("SEE ALSO", [.paragraph("rainwalletd(8), rainwallet-config(5)")])
        print(page.roff, terminator: "")
    }
}
