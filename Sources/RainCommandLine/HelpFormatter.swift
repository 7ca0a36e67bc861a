/// Generates help and usage text from ``Command`` declarations.
public struct HelpFormatter: Sendable {
    /// The root command (the program).
    public var root: Command
    /// Lines are wrapped before this column where they can be.
    public var width = 100

    /// A formatter for the tree under `root`.
    public init(root: Command) {
        self.root = root
    }

    /// The command at `names` under the root (`["code", "send"]`), as a path from the root.
    public func path(to names: [String]) -> [Command]? {
        var path = [root]
        for name in names {
            guard let next = path.last?.subcommand(named: name) else { return nil }
            path.append(next)
        }
        return path
    }

    // MARK: usage

    /// The usage line(s) of the last command of `path`: `usage: rainwallet code send --email ADDR | --phone NUMBER`.
    public func usage(for path: [Command]) -> String {
        guard let command = path.last else { return "" }
        let prefix = path.map(\.name).joined(separator: " ")
        var lines = [wrap(prefix: "usage: \(prefix)", units: synopsisUnits(of: command, isRoot: path.count == 1))]
        if command.isRunnableWithoutSubcommand {
            for sub in command.visibleSubcommands {
                let units = [sub.name] + synopsisUnits(of: sub, isRoot: false)
                lines.append(wrap(prefix: "       \(prefix)", units: units))
            }
        }
        return lines.joined(separator: "\n")
    }

    /// What follows a usage error: the usage and where to read more.
    public func usageHint(for path: [Command]) -> String {
        let names = path.map(\.name).joined(separator: " ")
        return "\(usage(for: path))\n\nSee `\(names) --help`."
    }

    /// The words after the command's name in its usage, each kept on one line when wrapping.
    func synopsisUnits(of command: Command, isRoot: Bool) -> [String] {
        var units: [String] = []
        let grouped = Set(command.exclusiveGroups.flatMap(\.names))
        for group in command.exclusiveGroups {
            let text = group.names.map { name in command.option(named: name)?.synopsis ?? name }.joined(separator: " | ")
            units.append(group.isRequired ? text : "[\(text)]")
        }
        for option in command.options where !grouped.contains(option.name) && !(option.isGlobal && !isRoot) {
            if option.isRequired {
                units.append(option.synopsis)
            } else {
                units.append("[\(option.synopsis)]" + (option.isRepeating ? "..." : ""))
            }
        }
        for argument in command.arguments {
            var text = argument.valueName
            if argument.isRepeating { text += "..." }
            units.append(argument.isOptional ? "[\(text)]" : text)
        }
        if let json = command.json, !units.contains("[\(json.flag)]") {
            units.append("[\(json.flag)]")
        }
        if !command.subcommands.isEmpty {
            if command.isRunnableWithoutSubcommand {
                return units
            }
            units.append(isRoot ? "COMMAND" : command.visibleSubcommands.map(\.name).joined(separator: "|"))
        }
        return units
    }

    func wrap(prefix: String, units: [String]) -> String {
        var lines: [String] = []
        var line = prefix
        let indent = String(repeating: " ", count: min(prefix.count + 1, 40))
        for unit in units {
            if line.count + 1 + unit.count > width, line.count > indent.count {
                lines.append(line)
                line = indent + unit
            } else {
                line += " " + unit
            }
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }

    // MARK: help

    /// The full help of the last command of `path`.
    public func help(for path: [Command]) -> String {
        guard let command = path.last else { return "" }
        var sections = [usage(for: path), command.abstract]
        if !command.discussion.isEmpty { sections.append(command.discussion) }
        if !command.subcommands.isEmpty {
            let rows = commandRows(command.visibleSubcommands, prefix: [])
            sections.append("commands:\n" + table(rows))
        }
        if !command.arguments.isEmpty {
            sections.append("arguments:\n" + table(command.arguments.map { ($0.valueName, $0.help) }))
        }
        let own = command.options.filter { !$0.isGlobal || path.count == 1 }
        let help = Command.helpFlag
        if path.count == 1 {
            let version = command.build == nil ? [] : [Command.versionFlag]
            sections.append(
                (own.contains(where: \.isGlobal) ? "global options:\n" : "options:\n") + optionTable(own + [help] + version))
        } else {
            sections.append("options:\n" + optionTable(own + [help]))
            let globals = path.dropLast().flatMap { $0.options.filter(\.isGlobal) }
            if !globals.isEmpty {
                let rootName = path[0].name
                sections.append(
                    "global options: " + globals.map { "[\($0.synopsis)]" }.joined(separator: " ") + " (see `\(rootName) --help`)"
                )
            }
        }
        if let json = command.json { sections.append(jsonSection(json)) }
        if !command.exitStatuses.isEmpty {
            sections.append("exit status:\n" + table(command.exitStatuses.map { ("\($0.code)", $0.meaning) }))
        }
        return sections.joined(separator: "\n\n")
    }

    /// Rows of a command list: a leaf is one row with its synopsis, a group a row per subcommand
    /// (or one row `domain files|check` when it lists them together).
    func commandRows(_ commands: [Command], prefix: [String]) -> [(String, String)] {
        var rows: [(String, String)] = []
        for command in commands where !command.isHidden {
            let words = prefix + [command.name]
            if command.subcommands.isEmpty || command.isRunnableWithoutSubcommand {
                var units = synopsisUnits(of: command, isRoot: false).filter { $0 != "[\(command.json?.flag ?? "")]" }
                if units.joined(separator: " ").count > 44 {
                    // A long synopsis is in the command's own help: list what it needs, then "[options]".
                    units = units.filter { !$0.hasPrefix("[") } + ["[options]"]
                }
                rows.append(((words + units).joined(separator: " "), command.abstract))
            } else if command.listsSubcommandsTogether {
                let names = command.visibleSubcommands.map(\.name).joined(separator: "|")
                rows.append(((words + [names]).joined(separator: " "), command.abstract))
            } else {
                rows += commandRows(command.visibleSubcommands, prefix: words)
            }
        }
        return rows
    }

    func optionTable(_ options: [Command.Option]) -> String {
        table(
            options.map { option in
                let names = option.names.sorted { $0.count < $1.count }.joined(separator: ", ")
                let left = option.valueName.map { "\(names) \($0)" } ?? names
                let notes = option.notes
                let note = "(\(notes.joined(separator: "; ")))"
                // Long notes (a computed default path) go on a line of their own.
                let isLong = option.help.contains("\n") || option.help.count + note.count > width - 44
                let text = notes.isEmpty ? option.help : option.help + (isLong ? "\n" : " ") + note
                return (left, text)
            })
    }

    func jsonSection(_ json: Command.JSONOutput) -> String {
        let head: String
        switch json.shape {
        case .object: head = "with \(json.flag): one object"
        case .array: head = "with \(json.flag): an array of objects"
        case .lines: head = "with \(json.flag): one object per line"
        }
        var rows: [(String, String)] = []
        func add(_ fields: [Command.JSONField], depth: Int) {
            for field in fields {
                rows.append((String(repeating: "  ", count: depth) + field.name, field.help))
                add(field.fields, depth: depth + 1)
            }
        }
        add(json.fields, depth: 0)
        var text = head + (rows.isEmpty ? "" : ":\n" + table(rows))
        if !json.note.isEmpty { text += "\n" + json.note }
        return text
    }

    /// Two columns, the second aligned (at most at column 40) and its extra lines indented under it.
    func table(_ rows: [(String, String)]) -> String {
        let column = min(38, rows.map(\.0.count).max() ?? 0)
        return rows.map { left, right in
            let pad = String(repeating: " ", count: max(1, column - left.count + 1))
            let indent = String(repeating: " ", count: column + 4)
            let body = right.split(separator: "\n", omittingEmptySubsequences: false).enumerated().map { i, line in
                i == 0 ? String(line) : indent + line
            }.joined(separator: "\n")
            return right.isEmpty ? "  \(left)" : "  \(left)\(pad) \(body)"
        }.joined(separator: "\n")
    }
}

extension Command.Option {
    /// What help and the man pages say about an option besides its text: its environment
    /// variable, default, and whether it is required, repeatable or needs another option.
    var notes: [String] {
        var notes: [String] = []
        if let variable = environment { notes.append("also $\(variable)") }
        switch defaultValue {
        case .value(let v)?: notes.append("default \"\(v)\"")
        case .computed(let text)?: notes.append("default \(text)")
        case nil: break
        }
        if isRequired { notes.append("required") }
        if isRepeating { notes.append("repeatable") }
        if !requires.isEmpty { notes.append("needs \(requires.joined(separator: ", "))") }
        return notes
    }
}
