import Testing

@testable import RainCommandLine

/// A small tool declared the way `rainwallet` declares its commands.
let tool = Command(
    name: "tool", abstract: "A tool.",
    options: [
        Command.Option("--socket", value: "PATH", help: "socket", environment: "TOOL_SOCKET", isGlobal: true),
        Command.Option("--profile", value: "NAME", help: "profile", default: .value("default"), isGlobal: true),
        .flag("--json", help: "JSON output", isGlobal: true),
    ],
    subcommands: [
        Command(
            name: "status", abstract: "show the status",
            json: .init(.object, [.init("state", "the state"), .init("wallet", "the wallet", fields: [.init("id", "its id")])]),
            exitStatuses: [.init(4, "no session")]),
        Command(
            name: "code", abstract: "codes",
            subcommands: [
                Command(
                    name: "send", abstract: "send a code",
                    options: [
                        Command.Option("--email", value: "ADDR", help: "an email"),
                        Command.Option("--phone", value: "NUMBER", help: "a phone"),
                    ],
                    exclusiveGroups: [.init(["--email", "--phone"], isRequired: true)]),
                Command(name: "confirm", abstract: "confirm a code", arguments: [.init("CODE", help: "the code")]),
            ]),
        Command(
            name: "check", abstract: "check files",
            arguments: [.init("PATH", help: "a file", isRepeating: true)],
            options: [
                Command.Option("--retries", value: "N", help: "retries", kind: .integer(1...5)),
                Command.Option("--timeout", value: "SECONDS", help: "timeout", kind: .seconds(0.5...60)),
                Command.Option("--level", value: "LEVEL", help: "level", kind: .choice(["debug", "info"])),
                Command.Option("--ca", value: "PEM", help: "CA", requires: ["--retries"]),
                Command.Option("--tag", value: "TAG", help: "tags", isRepeating: true),
            ]),
        Command(
            name: "serve", abstract: "serve",
            options: [Command.Option("--listen", value: "ADDR", help: "address", isRequired: true)]),
    ])

func parse(_ arguments: [String], environment: [String: String] = [:]) throws(UsageError) -> ParsedCommand {
    try CommandParser(tool, environment: environment).parse(arguments)
}

func usageError(_ arguments: [String]) -> UsageError? {
    do {
        _ = try parse(arguments)
        return nil
    } catch {
        return error
    }
}

@Suite struct CommandParserTests {
    @Test func chooseSubcommandsWithGlobalOptionsAnywhere() throws {
        let p = try parse(["--socket", "/s", "code", "send", "--json", "--email=a@example.com"])
        #expect(p.commandNames == ["code", "send"])
        #expect(p.value("--socket") == "/s")
        #expect(p.flag("--json"))
        #expect(p.value("--email") == "a@example.com")
        #expect(p.value("--phone") == nil)
        let after = try parse(["status", "--profile", "work"])
        #expect(after.commandNames == ["status"])
        #expect(after.value("--profile") == "work")
    }

    @Test func defaultsAndEnvironmentFallback() throws {
        let bare = try parse(["status"], environment: ["TOOL_SOCKET": "/env.sock"])
        #expect(bare.value("--profile") == "default")
        #expect(bare.source(of: "--profile") == .defaultValue)
        #expect(bare.value("--socket") == "/env.sock")
        #expect(bare.source(of: "--socket") == .environment)
        // The command line wins over the environment; an empty variable counts as unset.
        #expect(try parse(["--socket", "/cli", "status"], environment: ["TOOL_SOCKET": "/env"]).value("--socket") == "/cli")
        #expect(try parse(["status"], environment: ["TOOL_SOCKET": ""]).value("--socket") == nil)
    }

    @Test func positionalArgumentsAndRepeats() throws {
        let p = try parse(["check", "a", "--tag", "x", "b", "--tag=y", "--", "--c"])
        #expect(p.arguments("PATH") == ["a", "b", "--c"])
        #expect(p.values("--tag") == ["x", "y"])
        #expect(p.occurrences.map(\.name) == ["--tag", "--tag"])
        #expect(try parse(["code", "confirm", "123456"]).argument("CODE") == "123456")
    }

    @Test func typedValues() throws {
        let p = try parse(["check", "f", "--retries", "3", "--timeout", "1.5", "--level", "info"])
        #expect(p.integer("--retries") == 3)
        #expect(p.seconds("--timeout") == .milliseconds(1500))
        #expect(p.value("--level") == "info")
    }

    @Test func helpAnywhereNeedsNothingElse() throws {
        #expect(try parse(["--help"]).isHelpRequested)
        #expect(try parse(["code", "-h"]).commandNames == ["code"])
        let send = try parse(["code", "send", "--help"])
        #expect(send.isHelpRequested)
        #expect(send.commandNames == ["code", "send"])
        #expect(try parse(["serve", "--help"]).isHelpRequested)  // --listen is required, but not for help
        // Help wins over a mistake in the options, not over an unknown command.
        #expect(try parse(["code", "send", "--bogus", "--email", "--help"]).isHelpRequested)
        #expect(usageError(["stauts", "--help"])?.word == "stauts")
    }

    @Test func unknownCommandSuggestsTheClosest() {
        let error = usageError(["stauts"])
        #expect(error?.message == "unknown command `stauts`; did you mean `status`?")
        #expect(error?.word == "stauts")
        #expect(UsageError.exitStatus == 64)
        let nested = usageError(["code", "sned"])
        #expect(nested?.message == "unknown command `sned` for `tool code`; did you mean `send`?")
        let far = usageError(["frobnicate"])
        #expect(far?.message == "unknown command `frobnicate`; the commands are status, code, check and serve")
        #expect(far?.help?.contains("usage: tool") == true)
    }

    @Test func unknownOptionSuggestsTheClosest() {
        let error = usageError(["code", "send", "--emial", "a@example.com"])
        #expect(error?.message == "unknown option --emial; did you mean `--email`?")
        #expect(error?.word == "--emial")
        #expect(error?.help?.contains("usage: tool code send") == true)
        // Global options are suggested in subcommands too.
        #expect(usageError(["status", "--jsno"])?.message == "unknown option --jsno; did you mean `--json`?")
        #expect(usageError(["status", "--frobnicate"])?.message == "unknown option --frobnicate")
        // Before the command: the unknown option is the mistake, not the word after it.
        let early = usageError(["--sokcet", "/tmp/x", "status"])
        #expect(early?.message == "unknown option --sokcet; did you mean `--socket`?")
        #expect(early?.word == "--sokcet")
        #expect(usageError(["--sokcet=/tmp/x", "status"])?.word == "--sokcet")
    }

    @Test(
        "usage errors name the word at fault",
        arguments: [
            (["code"], "code needs a subcommand: send or confirm", nil),
            ([], "missing command", nil),
            (["status", "--socket"], "--socket needs a value (PATH)", "--socket"),
            (["status", "--socket", "--json"], "--socket needs a value (PATH)", "--socket"),
            (["status", "--json=1"], "--json takes no value", "--json"),
            (["status", "extra"], "unexpected argument extra", "extra"),
            (["code", "confirm"], "missing CODE", "CODE"),
            (["code", "send"], "give --email ADDR or --phone NUMBER", "--email"),
            (["code", "send", "--email", "a", "--phone", "1"], "give either --email or --phone, not both", "--phone"),
            (["check", "f", "--retries", "9"], "--retries must be a whole number from 1 to 5", "--retries"),
            (["check", "f", "--timeout", "x"], "--timeout must be a number of seconds from 0.5 to 60.0", "--timeout"),
            (["check", "f", "--level", "debgu"], "--level must be debug or info, not `debgu`; did you mean `debug`?", "--level"),
            (["check", "f", "--ca", "x"], "--ca needs --retries N", "--ca"),
            (["check"], "missing PATH", "PATH"),
            (["serve"], "--listen ADDR is required", "--listen"),
        ] as [([String], String, String?)])
    func usageErrors(arguments: [String], message: String, word: String?) {
        let error = usageError(arguments)
        #expect(error?.message == message, "\(arguments)")
        #expect(error?.word == word, "\(arguments)")
    }

    @Test func editDistance() {
        #expect(EditDistance.distance("stauts", "status") == 1)
        #expect(EditDistance.distance("", "abc") == 3)
        #expect(EditDistance.distance("kitten", "sitting") == 3)
        #expect(EditDistance.closest(to: "stat", among: ["status", "start"]) == "start")
        #expect(EditDistance.closest(to: "refr", among: ["refresh", "status"]) == "refresh")
        #expect(EditDistance.closest(to: "xyz", among: ["status", "login"]) == nil)
    }
}

@Suite struct HelpFormatterTests {
    let formatter = HelpFormatter(root: tool)

    @Test func rootHelpListsCommandsAndGlobalOptions() throws {
        let help = formatter.help(for: [tool])
        #expect(help.hasPrefix("usage: tool [--socket PATH] [--profile NAME] [--json] COMMAND\n\nA tool."))
        #expect(help.contains("\ncommands:\n  status "))
        #expect(help.contains("\n  code send --email ADDR | --phone NUMBER  send a code\n"))
        #expect(help.contains("\n  code confirm CODE"))
        #expect(help.contains("global options:\n"))
        #expect(help.contains("--socket PATH"))
        #expect(help.contains("also $TOOL_SOCKET"))
        #expect(help.contains("default \"default\""))
        #expect(help.contains("-h, --help"))
    }

    @Test func commandHelpComesFromTheDeclaration() throws {
        let path = try #require(formatter.path(to: ["status"]))
        let help = formatter.help(for: path)
        #expect(help.hasPrefix("usage: tool status [--json]\n\nshow the status"))
        #expect(help.contains("with --json: one object:\n  state"))
        #expect(help.contains("\n    id "))  // nested fields are indented under their parent
        #expect(help.contains("exit status:\n  4  no session"))
        #expect(help.contains("global options: [--socket PATH] [--profile NAME] [--json]"))
        let check = formatter.help(for: try #require(formatter.path(to: ["check"])))
        // Wrapped at 100 columns, continuation lines indented.
        #expect(
            check.hasPrefix("usage: tool check [--retries N] [--timeout SECONDS] [--level LEVEL] [--ca PEM] [--tag TAG]...\n"))
        #expect(check.contains("\n                  PATH...\n"))
        #expect(check.contains("arguments:\n  PATH"))
        #expect(check.contains("repeatable"))
        #expect(check.contains("needs --retries"))
        #expect(formatter.usage(for: try #require(formatter.path(to: ["code"]))) == "usage: tool code send|confirm")
        #expect(formatter.path(to: ["nope"]) == nil)
    }

    @Test func longUsageLinesWrap() {
        var many = Command(name: "wide", abstract: "wide")
        many.options = (1...12).map { Command.Option("--option-\($0)", value: "VALUE", help: "") }
        let usage = HelpFormatter(root: many).usage(for: [many])
        #expect(usage.split(separator: "\n").count > 1)
        #expect(usage.split(separator: "\n").allSatisfy { $0.count <= 100 })
    }
}
