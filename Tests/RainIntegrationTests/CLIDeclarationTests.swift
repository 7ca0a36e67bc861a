import RainCommandLine
import Testing

@testable import RainCLI

/// The `rainwallet` declaration tree, without a daemon: every command has help, typos get suggestions.
@Suite("rainwallet command declarations")
struct CLIDeclarationTests {
    let formatter = HelpFormatter(root: CLI.commandTree)

    func parse(_ arguments: [String], environment: [String: String] = [:]) throws(UsageError) -> ParsedCommand {
        try CommandParser(CLI.commandTree, environment: environment).parse(arguments)
    }

    /// Every path of the tree, root first.
    func allPaths(_ path: [Command]) -> [[Command]] {
        guard let last = path.last else { return [] }
        return [path] + last.subcommands.flatMap { allPaths(path + [$0]) }
    }

    @Test func everyCommandHasAnAbstractAndItsUsage() {
        let paths = allPaths([CLI.commandTree])
        #expect(paths.count > 25)
        for path in paths {
            let names = path.map(\.name).joined(separator: " ")
            #expect(!(path.last?.abstract.isEmpty ?? true), "\(names)")
            #expect(formatter.help(for: path).hasPrefix("usage: \(names)"), "\(names)")
            // Each leaf declaration has a command type that runs it.
            if path.last?.subcommands.isEmpty == true {
                #expect(CLI.find(path.dropFirst().map(\.name)[...]) != nil, "\(names)")
            }
        }
    }

    @Test func typosSuggestTheClosestCommandOrOption() {
        let command = #expect(throws: UsageError.self) { try parse(["stauts"]) }
        #expect(command?.message == "unknown command `stauts`; did you mean `status`?")
        #expect(command?.word == "stauts")
        let nested = #expect(throws: UsageError.self) { try parse(["export", "phrse"]) }
        #expect(nested?.message == "unknown command `phrse` for `rainwallet export`; did you mean `phrase`?")
        let option = #expect(throws: UsageError.self) { try parse(["code", "send", "--emial", "a@example.com"]) }
        #expect(option?.message == "unknown option --emial; did you mean `--email`?")
        let chain = #expect(throws: UsageError.self) { try parse(["export", "key", "--chain", "etherum"]) }
        #expect(chain?.message.contains("did you mean `ethereum`?") == true)
        #expect(ErrorPresentation.present(UsageError("x")).status == 64)
    }

    @Test func globalOptionsDefaultsAndEnvironment() throws {
        let p = try parse(["status"], environment: ["RAINWALLET_SOCKET": "/run/x.sock"])
        #expect(p.value("--socket") == "/run/x.sock")
        #expect(p.value("--profile") == "default")
        #expect(try parse(["--json", "domain", "check", "a", "b"]).arguments("PATH") == ["a", "b"])
        #expect(try parse(["export", "key", "--chain", "Solana", "--yes"]).value("--chain") == "Solana")
    }

    @Test func mainHelpListsTheCommandsAndTheExitTable() {
        let help = formatter.help(for: [CLI.commandTree])
        #expect(help.contains("\n  code send --email ADDR | --phone NUMBER"))
        #expect(help.contains("\n  domain files|check"))
        #expect(help.contains("\n  passkey signup|login|add"))
        #expect(help.contains("also $RAINWALLET_SOCKET"))
        #expect(help.contains("  64  usage"))
        #expect(help.contains("  2   daemon not reachable (RAIN_101)"))
    }
}
