import Foundation
import RainAccess
import RainCommandLine
import RainCore
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
        #expect(help.contains("\n  domain set|files|check"))
        #expect(help.contains("\n  passkey signup|login|add"))
        #expect(help.contains("also $RAINWALLET_SOCKET"))
        #expect(help.contains("  64  usage"))
        #expect(help.contains("  2   daemon not reachable (RAIN_101)"))
    }

    @Test("`rainwallet audit --json` documents every key of an entry's app, the script's hash of an interpreter included")
    func auditAppFieldsAreDocumented() throws {
        let identity = CallerIdentity(
            pid: 42, uid: 1000, executablePath: "/usr/bin/python3", executableSHA256: [UInt8](repeating: 0xab, count: 32),
            script: .init(path: "/home/u/tool.py", sha256: [UInt8](repeating: 0xcd, count: 32)),
            systemdUnit: "app-tool@1.service", flatpakAppID: "org.example.Tool")
        let encoded = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(AuditApp(identity)))
        let keys = try #require(encoded as? [String: Any]).keys.sorted()
        #expect(try #require(encoded as? [String: Any])["scriptHash"] as? String == "cdcdcdcdcdcd")
        let app = try #require(AuditCommand.declaration.json?.fields.first { $0.name == "app" })
        #expect(app.fields.map(\.name).sorted() == keys)
    }
}

/// What the CLI prints of a refusal: a message quoting an app's path (which any program of the
/// user chooses) must not redraw or reorder the user's screen.
@Suite("Error presentation")
struct ErrorPresentationTests {
    @Test("a daemon's message with ESC, a newline and U+202E is printed with them escaped, none of them raw")
    func hiddenCharactersAreEscaped() {
        let message = "app /tmp/evil\u{1B}[2J\nforged\u{202E}gpj.sh is not approved"
        let (text, status) = ErrorPresentation.present(RainError(.unauthorized, message))
        #expect(status == 5)
        #expect(!text.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{202E}" || $0 == "\n" }, "\(text)")
        #expect(text == #"error: RAIN_202: app /tmp/evil\u{1B}[2J\nforged\u{202E}gpj.sh is not approved"#, "\(text)")
        #expect(ErrorPresentation.present(RainError(.unauthorized, "plain text")).text == "error: RAIN_202: plain text")
    }
}
