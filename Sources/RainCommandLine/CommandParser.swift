/// Parses a command line against a tree of ``Command`` declarations.
///
/// Options are `--name VALUE` or `--name=VALUE`, anywhere after the command word that declares
/// them (global options anywhere at all); a value never begins with `--`. `--` ends the options.
/// `-h` and `--help` anywhere ask for help. Every mistake is a ``UsageError`` that names the word
/// at fault and suggests the closest known one.
public struct CommandParser: Sendable {
    /// The root command (the program).
    public var root: Command
    /// Where environment fallbacks are read.
    public var environment: [String: String]

    /// A parser.
    /// - Parameters:
    ///   - root: the program's declaration.
    ///   - environment: the process environment, for options that fall back to a variable.
    public init(_ root: Command, environment: [String: String]) {
        self.root = root
        self.environment = environment
    }

    static let helpNames: Set<String> = ["-h", "--help"]

    static func isOptionWord(_ word: String) -> Bool { word.hasPrefix("-") && word != "-" }

    /// Parses `arguments` (without the program name).
    /// - Throws: ``UsageError`` for any mistake.
    public func parse(_ arguments: [String]) throws(UsageError) -> ParsedCommand {
        let (path, commandWords) = try resolvePath(arguments)
        do {
            return try parse(arguments, path: path, commandWords: commandWords)
        } catch {
            // Help wins over a mistake in the options: `code send --email --help` shows the help.
            guard arguments.prefix(while: { $0 != "--" }).contains(where: Self.helpNames.contains) else { throw error }
            return ParsedCommand(
                path: path, isHelpRequested: true, occurrences: [], argumentValues: [:], environmentValues: [:])
        }
    }

    func parse(_ arguments: [String], path: [Command], commandWords: Set<Int>) throws(UsageError) -> ParsedCommand {
        let formatter = HelpFormatter(root: root)
        func fail(_ message: String, word: String?) -> UsageError {
            UsageError(message, word: word, help: formatter.usageHint(for: path))
        }
        var parsed = ParsedCommand(
            path: path, isHelpRequested: false, occurrences: [], argumentValues: [:], environmentValues: [:])
        let options = parsed.visibleOptions
        var positionals: [String] = []
        var index = 0
        var isOptionsEnded = false
        while index < arguments.count {
            let word = arguments[index]
            defer { index += 1 }
            if commandWords.contains(index) { continue }
            if isOptionsEnded || !Self.isOptionWord(word) {
                positionals.append(word)
                continue
            }
            if word == "--" {
                isOptionsEnded = true
                continue
            }
            if Self.helpNames.contains(word) {
                parsed.isHelpRequested = true
                continue
            }
            if word == Command.versionFlag.name, isVersionAccepted(path) {
                parsed.isVersionRequested = true
                continue
            }
            let name: String
            var inline: String?
            if word.hasPrefix("--"), let eq = word.firstIndex(of: "=") {
                name = String(word[..<eq])
                inline = String(word[word.index(after: eq)...])
            } else {
                name = word
            }
            guard let option = options.first(where: { $0.names.contains(name) }) else {
                let known = options.flatMap(\.names) + ["--help"] + (isVersionAccepted(path) ? ["--version"] : [])
                var message = "unknown option \(name)"
                if let close = EditDistance.closest(to: name, among: known) { message += "; did you mean `\(close)`?" }
                throw fail(message, word: name)
            }
            if option.isFlag {
                if inline != nil { throw fail("\(option.name) takes no value", word: option.name) }
                parsed.occurrences.append(.init(name: option.name, value: nil))
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else if index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") {
                index += 1
                value = arguments[index]
            } else {
                throw fail("\(option.name) needs a value (\(option.valueName ?? "VALUE"))", word: option.name)
            }
            try check(value, of: option, fail: fail)
            parsed.occurrences.append(.init(name: option.name, value: value))
        }
        if parsed.isHelpRequested || parsed.isVersionRequested { return parsed }

        let command = parsed.command
        if !command.subcommands.isEmpty, !command.isRunnableWithoutSubcommand {
            let names = command.visibleSubcommands.map(\.name)
            throw fail(
                path.count == 1 ? "missing command" : "\(command.name) needs a subcommand: \(Self.list(names, "or"))",
                word: nil)
        }
        parsed.argumentValues = try assign(positionals, to: command.arguments, fail: fail)

        for option in options where parsed.source(of: option.name) == nil {
            guard let variable = option.environment, let value = environment[variable], !value.isEmpty else { continue }
            try check(value, of: option) { message, word in fail("$\(variable): \(message)", word: word) }
            parsed.environmentValues[option.name] = value
        }
        for option in options where option.isRequired && parsed.source(of: option.name) == nil {
            throw fail("\(option.synopsis) is required", word: option.name)
        }
        for group in command.exclusiveGroups {
            let given = group.names.filter { parsed.flag($0) }
            let shown = group.names.map { name in options.first { $0.name == name }?.synopsis ?? name }
            if given.count > 1 {
                throw fail("give either \(Self.list(given, "or")), not both", word: given.last)
            }
            if given.isEmpty, group.isRequired {
                throw fail("give \(Self.list(shown, "or"))", word: group.names.first)
            }
        }
        for option in options where parsed.flag(option.name) {
            for needed in option.requires where !parsed.flag(needed) {
                let shown = options.first { $0.name == needed }?.synopsis ?? needed
                throw fail("\(option.name) needs \(shown)", word: option.name)
            }
        }
        return parsed
    }

    /// The commands named at the front of `arguments`, and the indices of the words that named them.
    func resolvePath(_ arguments: [String]) throws(UsageError) -> ([Command], Set<Int>) {
        var path = [root]
        var words: Set<Int> = []
        var unknownOption: UsageError?
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            if word == "--" { break }
            if Self.isOptionWord(word) {
                let name = word.hasPrefix("--") ? String(word.prefix { $0 != "=" }) : word
                // An option no command on the way declares is the mistake to report, not the word
                // after it (`--sokcet /tmp/x status` names `--sokcet`, not `/tmp/x`).
                // It is reported if a word after it fails as a command; otherwise the option pass
                // reports it, where `--help` still wins.
                if unknownOption == nil, !Self.helpNames.contains(name), !(name == "--version" && isVersionAccepted(path)),
                    let current = path.last,
                    !Self.isDeclared(name, below: current),
                    !ParsedCommand.visibleOptions(path).contains(where: { $0.names.contains(name) })
                {
                    let known = ParsedCommand.visibleOptions(path).flatMap(\.names) + ["--help"]
                    var message = "unknown option \(name)"
                    if let close = EditDistance.closest(to: name, among: known) { message += "; did you mean `\(close)`?" }
                    unknownOption = UsageError(message, word: name, help: HelpFormatter(root: root).usageHint(for: path))
                }
                // Skip the value of a known option so it is not taken for a command.
                let option = ParsedCommand.visibleOptions(path).first { $0.names.contains(word) }
                if let option, !option.isFlag, index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") {
                    index += 1
                }
                index += 1
                continue
            }
            guard let current = path.last, !current.subcommands.isEmpty else { break }
            if let next = current.subcommand(named: word) {
                path.append(next)
                words.insert(index)
                index += 1
                continue
            }
            if current.isRunnableWithoutSubcommand, !current.arguments.isEmpty { break }
            if let unknownOption { throw unknownOption }
            let names = current.visibleSubcommands.map(\.name)
            var message = "unknown command `\(word)`"
            if path.count > 1 { message += " for `\(path.map(\.name).joined(separator: " "))`" }
            if let close = EditDistance.closest(to: word, among: names) {
                message += "; did you mean `\(close)`?"
            } else {
                message += "; the commands are \(Self.list(names, "and"))"
            }
            throw UsageError(message, word: word, help: HelpFormatter(root: root).usageHint(for: path))
        }
        return (path, words)
    }

    /// Whether `--version` is an option at the end of `path`: the root, when it has a build.
    func isVersionAccepted(_ path: [Command]) -> Bool { path.count == 1 && root.build != nil }

    /// Whether `command` or any command below it declares the option `name`.
    static func isDeclared(_ name: String, below command: Command) -> Bool {
        command.options.contains { $0.names.contains(name) }
            || command.subcommands.contains { isDeclared(name, below: $0) }
    }

    func check(_ value: String, of option: Command.Option, fail: (String, String?) -> UsageError) throws(UsageError) {
        let name = option.name
        switch option.kind {
        case .string, .file, .directory:
            return
        case .choice(let choices, let isCaseSensitive):
            let typed = isCaseSensitive ? value : value.lowercased()
            guard !choices.contains(typed) else { return }
            var message = "\(name) must be \(Self.list(choices, "or")), not `\(value)`"
            if let close = EditDistance.closest(to: typed, among: choices) { message += "; did you mean `\(close)`?" }
            throw fail(message, name)
        case .integer(let range):
            guard let v = Int(value), range.contains(v) else {
                throw fail("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)", name)
            }
        case .seconds(let range):
            guard let v = Double(value), range.contains(v) else {
                throw fail("\(name) must be a number of seconds from \(range.lowerBound) to \(range.upperBound)", name)
            }
        }
    }

    func assign(
        _ positionals: [String], to declared: [Command.Argument], fail: (String, String?) -> UsageError
    ) throws(UsageError) -> [String: [String]] {
        var values: [String: [String]] = [:]
        var rest = positionals[...]
        for argument in declared {
            if argument.isRepeating {
                values[argument.valueName] = Array(rest)
                rest = []
            } else if let first = rest.first {
                values[argument.valueName] = [first]
                rest = rest.dropFirst()
            }
            if values[argument.valueName, default: []].isEmpty, !argument.isOptional {
                throw fail("missing \(argument.valueName)", argument.valueName)
            }
            if case .choice(let choices, let isCaseSensitive) = argument.kind {
                for value in values[argument.valueName, default: []] {
                    let typed = isCaseSensitive ? value : value.lowercased()
                    guard !choices.contains(typed) else { continue }
                    var message = "\(argument.valueName) must be \(Self.list(choices, "or")), not `\(value)`"
                    if let close = EditDistance.closest(to: typed, among: choices) { message += "; did you mean `\(close)`?" }
                    throw fail(message, value)
                }
            }
        }
        if let extra = rest.first { throw fail("unexpected argument \(extra)", extra) }
        return values
    }

    /// `a`, `a or b`, `a, b or c`.
    static func list(_ words: [String], _ conjunction: String) -> String {
        guard let last = words.last else { return "" }
        if words.count == 1 { return last }
        return words.dropLast().joined(separator: ", ") + " \(conjunction) " + last
    }
}
