/// A command-line usage mistake: an unknown command or option, a missing or malformed value.
/// Tools exit 64 (`EX_USAGE`) for it.
public struct UsageError: Error, Sendable, Equatable {
    /// What is wrong, naming the word at fault and, when one is close, the word meant
    /// ("unknown command `stauts`; did you mean `status`?").
    public var message: String
    /// The option or command word at fault (`--log-level` for a bad level), when there is one.
    public var word: String?
    /// What to print after the message: the usage of the command the mistake was made in.
    public var help: String?

    /// The exit status of every usage error (`EX_USAGE` of sysexits.h).
    public static let exitStatus: Int32 = 64

    /// A usage error.
    /// - Parameters:
    ///   - message: what is wrong.
    ///   - word: the option or command word at fault.
    ///   - help: the usage to print after it.
    public init(_ message: String, word: String? = nil, help: String? = nil) {
        self.message = message
        self.word = word
        self.help = help
    }
}
