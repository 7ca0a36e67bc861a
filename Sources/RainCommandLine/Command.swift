/// A command of a command-line tool, declared once as data: its name, help, positional arguments,
/// options and flags, subcommands, the JSON it prints with `--json` and its exit statuses.
///
/// Help text (``HelpFormatter``) and usage errors (``CommandParser``) are generated from it, and so
/// can shell completion and man pages: nothing here is a preformatted string of help.
/// Modelled on swift-argument-parser's `CommandConfiguration`.
public struct Command: Sendable {
    /// The word that selects the command (`status`), or the program name for the root.
    public var name: String
    /// A one-line summary, shown in the parent's command list and under the usage line.
    public var abstract: String
    /// Paragraphs shown after the abstract in the command's own help.
    public var discussion: String
    /// Positional arguments, in order.
    public var arguments: [Argument]
    /// Options and flags.
    public var options: [Option]
    /// Sets of options of which at most one may be given (at least one when required).
    public var exclusiveGroups: [ExclusiveGroup]
    /// Subcommands; a command with subcommands and without `isRunnableWithoutSubcommand` needs one.
    public var subcommands: [Command]
    /// True when the command itself runs when no subcommand word follows it (`rainwalletd`).
    public var isRunnableWithoutSubcommand: Bool
    /// True when the parent's command list shows this command's subcommands on one line
    /// (`domain files|check`) rather than a line each (`code send …`, `code confirm CODE`).
    public var listsSubcommandsTogether: Bool
    /// What `--json` prints, or nil when the command has no JSON output of its own.
    public var json: JSONOutput?
    /// The exit statuses the command documents, besides 0 and the table of the root.
    public var exitStatuses: [ExitStatus]
    /// True for a command left out of help, completion and man pages (a packaging aid such as `man`).
    public var isHidden: Bool
    /// The program's build, on the root only: when set, `--version` prints it (``BuildInfo/text(program:)``).
    public var build: BuildInfo?

    /// Declares a command.
    public init(
        name: String, abstract: String, discussion: String = "", arguments: [Argument] = [], options: [Option] = [],
        exclusiveGroups: [ExclusiveGroup] = [], subcommands: [Command] = [], isRunnableWithoutSubcommand: Bool = false,
        listsSubcommandsTogether: Bool = false, json: JSONOutput? = nil, exitStatuses: [ExitStatus] = [],
        isHidden: Bool = false
    ) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.arguments = arguments
        self.options = options
        self.exclusiveGroups = exclusiveGroups
        self.subcommands = subcommands
        self.isRunnableWithoutSubcommand = isRunnableWithoutSubcommand
        self.listsSubcommandsTogether = listsSubcommandsTogether
        self.json = json
        self.exitStatuses = exitStatuses
        self.isHidden = isHidden
        self.build = nil
    }

    /// The subcommands help, completion and man pages show.
    public var visibleSubcommands: [Command] { subcommands.filter { !$0.isHidden } }

    /// The `--version` flag of a root with a ``build``.
    public static let versionFlag = Option.flag("--version", help: "print the version, commit, build date and Swift version")

    /// The `-h, --help` flag every command accepts.
    public static let helpFlag = Option.flag("-h", "--help", help: "show this help")

    /// The subcommand called `name`, if any.
    public func subcommand(named name: String) -> Command? {
        subcommands.first { $0.name == name }
    }

    /// The option with the name `name` (`--json` or `-h`), if declared.
    public func option(named name: String) -> Option? {
        options.first { $0.names.contains(name) }
    }
}

extension Command {
    /// A positional argument.
    public struct Argument: Sendable, Equatable {
        /// The placeholder in usage and help (`CODE`, `PATH`).
        public var valueName: String
        /// One line for the help.
        public var help: String
        /// True when the argument may be left out.
        public var isOptional: Bool
        /// True when it takes every remaining positional word (`PATH...`); must be the last one.
        public var isRepeating: Bool
        /// What a shell should complete it with.
        public var kind: ValueKind

        /// Declares a positional argument.
        public init(
            _ valueName: String, help: String, isOptional: Bool = false, isRepeating: Bool = false, kind: ValueKind = .string
        ) {
            self.valueName = valueName
            self.help = help
            self.isOptional = isOptional
            self.isRepeating = isRepeating
            self.kind = kind
        }
    }

    /// An option (`--socket PATH`) or, without a value name, a flag (`--json`).
    public struct Option: Sendable, Equatable {
        /// Its spellings; the first is the one shown (`--help`, `-h`).
        public var names: [String]
        /// The value's placeholder (`PATH`), or nil for a flag.
        public var valueName: String?
        /// One or more lines for the help.
        public var help: String
        /// What the value must be; checked while parsing.
        public var kind: ValueKind
        /// The value used when the option is not given.
        public var defaultValue: Default?
        /// An environment variable read when the option is not given (empty counts as unset).
        public var environment: String?
        /// True when the option may be given several times, each value kept in order.
        public var isRepeating: Bool
        /// True when leaving it out is a usage error.
        public var isRequired: Bool
        /// Options that must be given with this one.
        public var requires: [String]
        /// True when the option applies to every subcommand too and may be written anywhere.
        public var isGlobal: Bool

        /// Declares an option that takes a value.
        public init(
            _ names: String..., value valueName: String, help: String, kind: ValueKind = .string,
            default defaultValue: Default? = nil,
            environment: String? = nil, isRepeating: Bool = false, isRequired: Bool = false, requires: [String] = [],
            isGlobal: Bool = false
        ) {
            self.init(
                names: names, valueName: valueName, help: help, kind: kind, defaultValue: defaultValue, environment: environment,
                isRepeating: isRepeating, isRequired: isRequired, requires: requires, isGlobal: isGlobal)
        }

        /// Declares a flag: present or not.
        public static func flag(_ names: String..., help: String, isGlobal: Bool = false) -> Option {
            Option(
                names: names, valueName: nil, help: help, kind: .string, defaultValue: nil, environment: nil, isRepeating: false,
                isRequired: false, requires: [], isGlobal: isGlobal)
        }

        private init(
            names: [String], valueName: String?, help: String, kind: ValueKind, defaultValue: Default?, environment: String?,
            isRepeating: Bool, isRequired: Bool, requires: [String], isGlobal: Bool
        ) {
            self.names = names
            self.valueName = valueName
            self.help = help
            self.kind = kind
            self.defaultValue = defaultValue
            self.environment = environment
            self.isRepeating = isRepeating
            self.isRequired = isRequired
            self.requires = requires
            self.isGlobal = isGlobal
        }

        /// The name shown in usage and errors.
        public var name: String { names.first ?? "" }
        /// True for a flag (no value).
        public var isFlag: Bool { valueName == nil }
        /// `--socket PATH`, or `--json` for a flag.
        public var synopsis: String { valueName.map { "\(name) \($0)" } ?? name }
    }

    /// What an option's or argument's value must be.
    public enum ValueKind: Sendable, Equatable {
        /// Any text.
        case string
        /// A file path.
        case file
        /// A directory path.
        case directory
        /// One of a fixed list of words.
        case choice([String], isCaseSensitive: Bool = true)
        /// A whole number in the range.
        case integer(ClosedRange<Int>)
        /// A number of seconds (fractions allowed) in the range.
        case seconds(ClosedRange<Double>)
    }

    /// An option's default when it is not given.
    public enum Default: Sendable, Equatable {
        /// This value, used by the parser.
        case value(String)
        /// A default the command computes itself (from the environment, say), described for help.
        case computed(String)
    }

    /// Options of which at most one may be given.
    public struct ExclusiveGroup: Sendable, Equatable {
        /// The options' names.
        public var names: [String]
        /// True when exactly one of them must be given.
        public var isRequired: Bool
        /// Declares a group.
        public init(_ names: [String], isRequired: Bool) {
            self.names = names
            self.isRequired = isRequired
        }
    }

    /// What a command prints with `--json`.
    public struct JSONOutput: Sendable, Equatable {
        /// How the values are laid out.
        public enum Shape: Sendable, Equatable {
            /// One object.
            case object
            /// One array of objects.
            case array
            /// One object per line, as events happen.
            case lines
        }
        /// The layout.
        public var shape: Shape
        /// The keys of each object.
        public var fields: [JSONField]
        /// A note after the fields.
        public var note: String
        /// The flag that asks for it.
        public var flag: String
        /// Declares the output.
        public init(_ shape: Shape, _ fields: [JSONField], note: String = "", flag: String = "--json") {
            self.shape = shape
            self.fields = fields
            self.note = note
            self.flag = flag
        }
    }

    /// One key of a JSON object a command prints.
    public struct JSONField: Sendable, Equatable {
        /// The key (camelCase).
        public var name: String
        /// What the value is.
        public var help: String
        /// The keys of a nested object or of an array's objects.
        public var fields: [JSONField]
        /// Declares a key.
        public init(_ name: String, _ help: String, fields: [JSONField] = []) {
            self.name = name
            self.help = help
            self.fields = fields
        }
    }

    /// A documented exit status.
    public struct ExitStatus: Sendable, Equatable {
        /// The status.
        public var code: Int32
        /// When it happens.
        public var meaning: String
        /// Declares one.
        public init(_ code: Int32, _ meaning: String) {
            self.code = code
            self.meaning = meaning
        }
    }
}
