import Testing

@testable import RainCommandLine

/// `tool` with a build (for `--version`) and a hidden command.
let documentedTool: Command = {
    var root = tool
    root.subcommands.append(Command(name: "secret", abstract: "hidden", isHidden: true))
    root.subcommands.append(
        Command(
            name: "completion", abstract: "a script",
            arguments: [.init("SHELL", help: "the shell", kind: .choice(["bash", "zsh", "fish"]))]))
    root.build = BuildInfo(version: "1.2.3", commit: "abc123", date: "2026-12-02T05:00:00Z", swiftVersion: "6.3.1")
    return root
}()

@Suite struct DocumentationTests {
    func parse(_ arguments: [String], _ root: Command = documentedTool) throws(UsageError) -> ParsedCommand {
        try CommandParser(root, environment: [:]).parse(arguments)
    }

    @Test func versionIsAcceptedOnTheRootOfABuildOnly() throws {
        #expect(try parse(["--version"]).isVersionRequested)
        #expect(try parse(["--socket", "/s", "--version"]).isVersionRequested)
        // Without a build there is no --version; below the root neither.
        #expect(throws: UsageError.self) { try parse(["--version"], tool) }
        #expect(throws: UsageError.self) { try parse(["status", "--version"]) }
        #expect(
            documentedTool.build?.text(program: "tool")
                == "tool 1.2.3\ncommit: abc123\ncommit date: 2026-12-02T05:00:00Z\nswift: 6.3.1")
        let help = HelpFormatter(root: documentedTool).help(for: [documentedTool])
        #expect(help.contains("--version"))
        #expect(!HelpFormatter(root: tool).help(for: [tool]).contains("--version"))
    }

    @Test func hiddenCommandsRunButAreNotShown() throws {
        #expect(try parse(["secret"]).commandNames == ["secret"])
        let help = HelpFormatter(root: documentedTool).help(for: [documentedTool])
        #expect(!help.contains("secret"))
        let error = #expect(throws: UsageError.self) { try parse(["secre"]) }
        #expect(error?.message.contains("secret") == false, "\(error?.message ?? "")")
        for shell in CompletionScript.Shell.allCases {
            #expect(!CompletionScript(root: documentedTool).script(for: shell).contains("secret"), "\(shell)")
        }
        #expect(!ManPage(program: documentedTool, section: 1, manual: "M").roff.contains("secret"))
    }

    @Test func choiceArgumentsAreChecked() throws {
        #expect(try parse(["completion", "zsh"]).argument("SHELL") == "zsh")
        let error = #expect(throws: UsageError.self) { try parse(["completion", "bsh"]) }
        #expect(error?.message == "SHELL must be bash, zsh or fish, not `bsh`; did you mean `bash`?")
    }

    @Test func completionScriptsListEveryCommandAndOption() {
        let scripts = CompletionScript(root: documentedTool)
        let bash = scripts.script(for: .bash)
        #expect(bash.contains("complete -F _tool tool"))
        #expect(bash.contains("'code') subs='send confirm'"))
        #expect(bash.contains("'code send') subs=''; opts='--socket --profile --json --email --phone -h --help'"))
        #expect(bash.contains("'') subs='status code check serve completion'"))
        #expect(bash.contains("'check|--level') kind='debug info'"))
        #expect(bash.contains("'completion') subs=''") && bash.contains("args='bash zsh fish'"))
        let zsh = scripts.script(for: .zsh)
        #expect(zsh.hasPrefix("#compdef tool\n"))
        #expect(zsh.contains("'send:send a code'"))
        let fish = scripts.script(for: .fish)
        #expect(fish.contains("complete -c tool -n '__tool_is \\'code\\'' -f -a 'send' -d 'send a code'"))
        #expect(fish.contains("complete -c tool -n '__tool_is \\'check\\'' -l level -x -a 'debug info' -d 'level'"))
        #expect(fish.contains("-l version"))
    }

    @Test("an abstract wrapped over several lines is whole on the NAME line")
    func manPageNameLineIsWhole() {
        var root = documentedTool
        root.abstract = "Runs the tool, with its helper unless --remote names\nanother one (see `tool help`).\n\nMore."
        let roff = ManPage(program: root, section: 8, manual: "Tool Manual").roff
        #expect(
            roff.contains(
                ".SH NAME\ntool \\- Runs the tool, with its helper unless \\-\\-remote names another one (see tool help)\n"))
    }

    @Test func manPageIsEscapedRoff() {
        var root = documentedTool
        root.discussion = "Runs `tool status`.\n\n.dangerous line,\nback\\slash and a-dash."
        let roff = ManPage(program: root, section: 1, manual: "Tool Manual").roff
        #expect(roff.contains(".TH \"TOOL\" 1 \"2026\\-12\\-02\" \"tool 1.2.3\" \"Tool Manual\""))
        #expect(roff.contains(".SH NAME\ntool \\- A tool"))
        #expect(roff.contains("\\fBtool status\\fR"))
        // No line of text starts a request; backslashes and minus signs are escaped.
        #expect(roff.contains("\n\\&.dangerous line, back\\eslash and a\\-dash.\n"))
        #expect(roff.contains(".SS \"tool code send\""))
        #expect(roff.contains("\\fB\\-\\-email\\fR \\fIADDR\\fR"))
        #expect(roff.contains(".SH \"ENVIRONMENT\"\n.TP\n\\&\\fITOOL_SOCKET\\fR"))
        for line in roff.split(separator: "\n") where !line.hasPrefix(".") {
            #expect(line.hasPrefix("\\&") || line.hasPrefix("tool "), "\(line)")
        }
    }
}
