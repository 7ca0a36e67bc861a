/// An interpreter the caller identity knows: its executable runs whatever script it is given, so
/// an identity of the executable alone would let any script use what one script was allowed. The
/// identity of an interpreter is its executable plus its script (path and SHA-256).
///
/// The script is the first argument after the executable. Options before it are accepted only
/// when they cannot make the interpreter run other code (`python3 -u`, `bash -e`, `perl -w`: the
/// flags a `#!` line usually carries); any other option (`-c`, `-m`, `-e`, `-i`, `-r`, `-X`, …), a
/// `-` (standard input) or no script at all leaves the caller unapprovable, since nothing on the
/// command line says which code runs.
struct InterpreterRule: Sendable {
    /// The family (`python`, `shell`, `node`, …).
    let family: String
    /// Single-letter flags that take no value and run no other code.
    let harmlessFlags: Set<Character>
    /// Long options that take no value and run no other code.
    let harmlessLongOptions: Set<String>

    /// What the command line says the interpreter runs.
    enum ScriptArgument: Equatable {
        /// This script file (as given: absolute, or relative to the process's working directory).
        case script(String)
        /// Nothing on the command line names the code that runs; the reason says why.
        case unknown(String)
    }

    static let python = InterpreterRule(family: "python", harmlessFlags: Set("bBdEIOPqRsSuv"), harmlessLongOptions: [])
    static let shell = InterpreterRule(
        family: "shell", harmlessFlags: Set("abBCefhmnpuvx"), harmlessLongOptions: ["--norc", "--noprofile", "--posix"])
    static let node = InterpreterRule(
        family: "node", harmlessFlags: [],
        harmlessLongOptions: ["--no-warnings", "--no-deprecation", "--enable-source-maps", "--trace-warnings"])
    static let perl = InterpreterRule(family: "perl", harmlessFlags: Set("wWTtXU"), harmlessLongOptions: [])
    static let ruby = InterpreterRule(family: "ruby", harmlessFlags: Set("wWvd"), harmlessLongOptions: [])
    static let other = InterpreterRule(family: "other", harmlessFlags: [], harmlessLongOptions: [])

    /// Names with an optional version suffix (`python3`, `python3.11`, `lua5.4`, `perl5.36`).
    private static let versionedNames: [(String, InterpreterRule)] = [
        ("python", .python), ("pypy", .python), ("node", .node), ("nodejs", .node), ("perl", .perl), ("ruby", .ruby),
        ("php", .other), ("lua", .other), ("luajit", .other), ("tclsh", .other), ("wish", .other), ("Rscript", .other),
    ]
    /// Names without a version.
    private static let exactNames: [String: InterpreterRule] = [
        "sh": .shell, "bash": .shell, "dash": .shell, "zsh": .shell, "ksh": .shell, "ksh93": .shell, "mksh": .shell,
        "yash": .shell, "fish": .shell, "deno": .other, "bun": .other,
    ]

    /// The rule for an executable, from its file name; nil when it is not an interpreter this knows.
    static func matching(executablePath: String) -> InterpreterRule? {
        let name = executablePath.split(separator: "/").last.map(String.init) ?? executablePath
        if let rule = exactNames[name] { return rule }
        for (prefix, rule) in versionedNames where name.hasPrefix(prefix) {
            let suffix = name.dropFirst(prefix.count)
            if suffix.allSatisfy({ $0.isNumber || $0 == "." || $0 == "-" }) { return rule }
        }
        return nil
    }

    /// The script in `arguments` (`/proc/PID/cmdline`, the executable first).
    func script(in arguments: [String]) -> ScriptArgument {
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" {
                return index < arguments.count ? .script(arguments[index]) : .unknown("no script after --")
            }
            if argument == "-" { return .unknown("the program comes from standard input (-)") }
            if argument.hasPrefix("--") {
                guard harmlessLongOptions.contains(argument) else {
                    return .unknown("option \(argument) before the script can run other code")
                }
                continue
            }
            if argument.count > 1, argument.hasPrefix("-") || (family == "shell" && argument.hasPrefix("+")) {
                guard argument.dropFirst().allSatisfy({ harmlessFlags.contains($0) }) else {
                    return .unknown("option \(argument) before the script can run other code (inline code, a module, input)")
                }
                continue
            }
            return .script(argument)
        }
        return .unknown("no script file on the command line (inline code, a module or standard input)")
    }
}

extension CallerIdentity {
    /// Whether an app path (`appPath`, as approvals keep it) names a script: an interpreter's
    /// executable, a space, the script its command line claimed. Such an identity cannot be
    /// verified from outside.
    public static func isScript(appPath: String) -> Bool {
        guard let space = appPath.firstIndex(of: " ") else { return false }
        return InterpreterRule.matching(executablePath: String(appPath[..<space])) != nil
    }
}
