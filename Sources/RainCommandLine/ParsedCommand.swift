/// What a command line said, checked against the declarations: the command chosen, its options in
/// the order given, its positional arguments, and the values taken from the environment.
public struct ParsedCommand: Sendable {
    /// The commands from the root to the one chosen.
    public var path: [Command]
    /// True when `-h` or `--help` was given: print the chosen command's help instead of running it.
    public var isHelpRequested: Bool
    /// Every option and flag given, in order (flags with a nil value).
    public var occurrences: [Occurrence]
    /// Positional arguments by their value name.
    public var argumentValues: [String: [String]]
    /// Values read from the environment for options not given, by option name.
    public var environmentValues: [String: String]
    /// True when `--version` was given to a root with a ``Command/build``: print it instead of running.
    public var isVersionRequested = false

    /// One option given on the command line.
    public struct Occurrence: Sendable, Equatable {
        /// The option's shown name (`--email`), whichever spelling was typed.
        public var name: String
        /// Its value, nil for a flag.
        public var value: String?
        /// An occurrence.
        public init(name: String, value: String?) {
            self.name = name
            self.value = value
        }
    }

    /// Where a value came from.
    public enum Source: Sendable, Equatable {
        /// Given on the command line.
        case commandLine
        /// Read from the option's environment variable.
        case environment
        /// The option's declared default value.
        case defaultValue
    }

    /// The command chosen.
    public var command: Command { path.last ?? path[0] }

    /// The words that chose the command (`["code", "send"]`).
    public var commandNames: [String] { path.dropFirst().map(\.name) }

    /// The options that apply to the chosen command: its own and its ancestors' global ones.
    public var visibleOptions: [Command.Option] { Self.visibleOptions(path) }

    static func visibleOptions(_ path: [Command]) -> [Command.Option] {
        guard let last = path.last else { return [] }
        return path.dropLast().flatMap { $0.options.filter(\.isGlobal) } + last.options
    }

    /// The value of option `name`: the last one given, else the environment's, else its default.
    public func value(_ name: String) -> String? {
        if let given = occurrences.last(where: { $0.name == name })?.value { return given }
        if let env = environmentValues[name] { return env }
        if case .value(let v) = visibleOptions.first(where: { $0.names.contains(name) })?.defaultValue { return v }
        return nil
    }

    /// Every value given for option `name`, in order.
    public func values(_ name: String) -> [String] {
        occurrences.filter { $0.name == name }.compactMap(\.value)
    }

    /// Where the value of `name` comes from, nil when it has none.
    public func source(of name: String) -> Source? {
        if occurrences.contains(where: { $0.name == name }) { return .commandLine }
        if environmentValues[name] != nil { return .environment }
        if case .value = visibleOptions.first(where: { $0.names.contains(name) })?.defaultValue { return .defaultValue }
        return nil
    }

    /// True when flag `name` was given.
    public func flag(_ name: String) -> Bool {
        occurrences.contains { $0.name == name }
    }

    /// The positional argument declared as `valueName`.
    public func argument(_ valueName: String) -> String? {
        argumentValues[valueName]?.first
    }

    /// Every value of a repeating positional argument.
    public func arguments(_ valueName: String) -> [String] {
        argumentValues[valueName] ?? []
    }

    /// The value of an `.integer` option (checked while parsing).
    public func integer(_ name: String) -> Int? {
        value(name).flatMap { Int($0) }
    }

    /// The value of a `.seconds` option (checked while parsing), to the millisecond.
    public func seconds(_ name: String) -> Duration? {
        value(name).flatMap { Double($0) }.map { .milliseconds(Int64($0 * 1000)) }
    }
}
