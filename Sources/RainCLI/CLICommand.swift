import FoundationEssentials
import RainCommandLine
import RainWallet

/// A `rainwallet` command: its declaration and what it does, written together.
///
/// A group (`code`) lists its subcommands' types; the declaration tree the parser and the help
/// read is built from them (``tree``), so a command is added in one place.
protocol CLICommand {
    /// The command's declaration, without its subcommands.
    static var declaration: Command { get }
    /// The subcommands' types, in the order the help lists them.
    static var subcommands: [any CLICommand.Type] { get }
    /// Runs the command (never called for a group: the parser asks for a subcommand).
    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws
}

extension CLICommand {
    static var subcommands: [any CLICommand.Type] { [] }

    static func run(_ parsed: ParsedCommand, _ context: CLIContext) async throws {
        throw UsageError("\(declaration.name) needs a subcommand")
    }

    /// The declaration with its subcommands.
    static var tree: Command {
        var command = declaration
        command.subcommands = subcommands.map { $0.tree }
        return command
    }

    /// The command type named by `names` under this one.
    static func find(_ names: ArraySlice<String>) -> (any CLICommand.Type)? {
        guard let first = names.first else { return self }
        return subcommands.first { $0.declaration.name == first }?.find(names.dropFirst())
    }
}

/// What a running command needs: the client, the output, and the help of the command tree.
struct CLIContext: Sendable {
    var provider: RainProvider
    var output: Output
    var formatter: HelpFormatter
}
