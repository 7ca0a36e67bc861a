/// A manual page, written as roff for `man`: built from ``Command`` declarations
/// (``init(program:section:manual:)``) or section by section (a configuration file's page).
///
/// The text given is plain: roff's special characters are escaped here, and a `word` between
/// backquotes is set in bold.
public struct ManPage: Sendable {
    /// A piece of a section.
    public enum Block: Sendable, Equatable {
        /// A filled paragraph.
        case paragraph(String)
        /// A tagged paragraph: the tag (bold words, italic placeholders in capitals) then the text.
        case item(tag: String, text: String)
        /// A subsection heading.
        case subsection(String)
        /// Lines kept as they are (an example).
        case example(String)
    }

    /// The page's name (`rainwallet`).
    public var name: String
    /// The manual section (1, 5, 8).
    public var section: Int
    /// The header's date (`2026-12-02`).
    public var date: String
    /// The footer's source (`rainwallet 0.1.0`).
    public var source: String
    /// The header's manual (`User Commands`).
    public var manual: String
    /// The one-line summary of the NAME section.
    public var summary: String
    /// The sections after NAME, in order.
    public var sections: [(title: String, blocks: [Block])]

    /// An empty page.
    public init(name: String, section: Int, date: String, source: String, manual: String, summary: String) {
        self.name = name
        self.section = section
        self.date = date
        self.source = source
        self.manual = manual
        self.summary = summary
        self.sections = []
    }

    /// Adds a section.
    public mutating func add(_ title: String, _ blocks: [Block]) {
        sections.append((title, blocks))
    }

    /// The page of a program declared as `program`: synopsis, description, options, every command
    /// with its options, JSON output and exit statuses, the environment and the exit statuses.
    /// - Parameters:
    ///   - program: the root declaration (its ``Command/build`` gives the date and version).
    ///   - section: 1 for a user command, 8 for a daemon.
    ///   - manual: the header's manual name.
    public init(program: Command, section: Int, manual: String) {
        let build = program.build
        self.init(
            name: program.name, section: section, date: build?.day ?? "", source: "\(program.name) \(build?.version ?? "")",
            manual: manual, summary: Self.firstParagraph(program.abstract).filter { $0 != "`" }.trimmingSuffix("."))
        let formatter = HelpFormatter(root: program)
        var synopsis: [Block] = [.paragraph(Self.synopsis(formatter, [program]))]
        for sub in program.visibleSubcommands where program.isRunnableWithoutSubcommand {
            synopsis.append(.paragraph(Self.synopsis(formatter, [program, sub])))
        }
        add("SYNOPSIS", synopsis)
        add("DESCRIPTION", Self.paragraphs(program.abstract) + Self.paragraphs(program.discussion))
        var options = program.options + [Command.helpFlag]
        if build != nil { options.append(Command.versionFlag) }
        add("OPTIONS", options.map(Self.item))
        var commands: [Block] = []
        func visit(_ path: [Command]) {
            guard let command = path.last, !command.isHidden else { return }
            if path.count > 1 {
                commands.append(.subsection(path.map(\.name).joined(separator: " ")))
                commands.append(.paragraph(Self.synopsis(formatter, path)))
                commands += Self.paragraphs(command.abstract) + Self.paragraphs(command.discussion)
                commands += command.arguments.map { .item(tag: $0.valueName, text: $0.help) }
                commands += command.options.filter { !$0.isGlobal }.map(Self.item)
                if let json = command.json { commands.append(.example(formatter.jsonSection(json))) }
                if !command.exitStatuses.isEmpty {
                    commands.append(.paragraph("Exit status:"))
                    commands += command.exitStatuses.map { .item(tag: "\($0.code)", text: $0.meaning) }
                }
            }
            for sub in command.subcommands { visit(path + [sub]) }
        }
        visit([program])
        if !commands.isEmpty { add("COMMANDS", commands) }
        var environment: [Block] = []
        var variables: Set<String> = []
        func collect(_ command: Command) {
            for option in command.options {
                guard let variable = option.environment, variables.insert(variable).inserted else { continue }
                environment.append(.item(tag: variable, text: "the default of `\(option.name)`"))
            }
            command.subcommands.forEach(collect)
        }
        collect(program)
        if !environment.isEmpty { add("ENVIRONMENT", environment) }
        if !program.exitStatuses.isEmpty {
            add("EXIT STATUS", program.exitStatuses.map { .item(tag: "\($0.code)", text: $0.meaning) })
        }
    }

    static func synopsis(_ formatter: HelpFormatter, _ path: [Command]) -> String {
        let words = path.map(\.name).joined(separator: " ")
        let units = path.last.map { formatter.synopsisUnits(of: $0, isRoot: path.count == 1) } ?? []
        return "`\(words)` " + units.joined(separator: " ")
    }

    static func item(_ option: Command.Option) -> Block {
        let names = option.names.sorted { $0.count < $1.count }.map { "`\($0)`" }.joined(separator: ", ")
        var notes = option.notes
        if case .choice(let words, _) = option.kind { notes.append("one of \(words.joined(separator: ", "))") }
        let help = option.help.split(separator: "\n").joined(separator: " ")
        let text = notes.isEmpty ? help : "\(help) (\(notes.joined(separator: "; ")))"
        return .item(tag: option.valueName.map { "\(names) \($0)" } ?? names, text: text)
    }

    /// Paragraphs split at blank lines, lines within one joined.
    public static func paragraphs(_ text: String) -> [Block] {
        text.split(separator: "\n\n").map { $0.split(separator: "\n").joined(separator: " ") }.filter { !$0.isEmpty }
            .map { .paragraph($0) }
    }

    static func firstLine(_ s: String) -> String { s.split(separator: "\n").first.map(String.init) ?? "" }

    /// The text up to the first blank line, its lines joined: an abstract wrapped in the source is
    /// one sentence on the NAME line, never cut at the wrap (its backquotes are dropped there: the
    /// NAME line is plain text for whatis and apropos).
    static func firstParagraph(_ s: String) -> String {
        (s.split(separator: "\n\n").first ?? "").split(separator: "\n").map { line in
            String(line.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
        }.joined(separator: " ")
    }

    // MARK: roff

    /// The page as roff (man macros).
    public var roff: String {
        var out = [
            ".\\\" Generated from the program's declarations; do not edit.",
            ".TH \(Self.quoted(name.uppercased())) \(section) \(Self.quoted(date)) \(Self.quoted(source)) \(Self.quoted(manual))",
            // Left-aligned and unhyphenated: long paths and option names never make a badly adjusted line.
            ".ad l", ".nh",
            ".SH NAME", "\(Self.escape(name)) \\- \(Self.escape(summary))",
        ]
        for (title, blocks) in sections {
            out.append(".SH \(Self.quoted(title))")
            for block in blocks {
                switch block {
                case .paragraph(let text):
                    out.append(".PP")
                    out.append(contentsOf: Self.lines(text))
                case .item(let tag, let text):
                    out.append(".TP")
                    out.append(Self.tag(tag))
                    out.append(contentsOf: Self.lines(text.isEmpty ? "\\&" : text))
                case .subsection(let title):
                    out.append(".SS \(Self.quoted(title))")
                case .example(let text):
                    out.append(contentsOf: [".PP", ".nf", ".RS 4"])
                    out.append(
                        contentsOf: text.split(separator: "\n", omittingEmptySubsequences: false).map {
                            "\\&" + Self.escape(String($0))
                        })
                    out.append(contentsOf: [".RE", ".fi"])
                }
            }
        }
        return out.joined(separator: "\n") + "\n"
    }

    /// A text's lines, escaped, each safe at the start of a roff line; backquoted words in bold.
    static func lines(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: true).map { line in
            let trimmed = line.drop { $0 == " " }
            return "\\&" + bold(escape(String(trimmed)))
        }
    }

    /// `--email ADDR`: option names in bold, placeholders (capitals) in italics.
    static func tag(_ tag: String) -> String {
        "\\&"
            + tag.split(separator: " ").map { word -> String in
                let w = String(word)
                if w.hasPrefix("`") { return bold(escape(w)) }
                let letters = w.filter { $0.isLetter }
                if !letters.isEmpty, letters.allSatisfy({ $0.isUppercase }) { return "\\fI\(escape(w))\\fR" }
                return "\\fB\(escape(w))\\fR"
            }.joined(separator: " ")
    }

    /// Backquoted spans in bold (after escaping).
    static func bold(_ s: String) -> String {
        var out = ""
        var isOpen = false
        for c in s {
            if c == "`" {
                out += isOpen ? "\\fR" : "\\fB"
                isOpen.toggle()
            } else {
                out.append(c)
            }
        }
        if isOpen { out += "\\fR" }
        return out
    }

    /// Backslashes and minus signs escaped (`\e`, `\-`).
    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            case "\u{2026}": out += "..."
            default:
                if c.isASCII {
                    out.append(c)
                } else {
                    out += c.unicodeScalars.map { "\\[u" + hex($0.value) + "]" }.joined()
                }
            }
        }
        return out
    }

    /// At least four upper-case hex digits, as groff's `\[uXXXX]` wants them.
    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// A macro argument in double quotes (a quote inside doubled).
    static func quoted(_ s: String) -> String { "\"" + escape(s).replacing("\"", with: "\"\"") + "\"" }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
