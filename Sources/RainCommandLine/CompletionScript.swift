/// Generates shell completion scripts (bash, zsh, fish) from ``Command`` declarations, the same
/// declarations help and usage errors come from: a command or option added there completes at once.
///
/// Each script finds the command path typed so far (skipping options and their values, as the
/// parser does), then offers that command's subcommands, its options (with the global ones of the
/// commands above it), or an option's value: a choice's words, files or directories.
public struct CompletionScript: Sendable {
    /// The shells a script is generated for.
    public enum Shell: String, Sendable, CaseIterable {
        /// GNU bash (`complete -F`).
        case bash
        /// zsh (`#compdef`, `compadd`).
        case zsh
        /// fish (`complete -c`).
        case fish
    }

    /// The root command (the program).
    public var root: Command

    /// A generator for the tree under `root`.
    public init(root: Command) {
        self.root = root
    }

    /// The completion script for `shell`.
    public func script(for shell: Shell) -> String {
        switch shell {
        case .bash: bash()
        case .zsh: zsh()
        case .fish: fish()
        }
    }

    // MARK: the tree, flattened

    /// One command the user can reach: its path and what completes after it.
    struct Node {
        /// The command words after the program name, joined by spaces (`code send`); empty for the root.
        var key: String
        var command: Command
        /// The subcommands' names.
        var subcommands: [String]
        /// Every option accepted here, all spellings, `--help` and (on the root) `--version` included.
        var options: [Command.Option]
    }

    var nodes: [Node] {
        var nodes: [Node] = []
        func visit(_ path: [Command]) {
            guard let command = path.last, !command.isHidden else { return }
            var options = ParsedCommand.visibleOptions(path) + [Command.helpFlag]
            if path.count == 1, command.build != nil { options.append(Command.versionFlag) }
            let key = path.dropFirst().map(\.name).joined(separator: " ")
            nodes.append(Node(key: key, command: command, subcommands: command.visibleSubcommands.map(\.name), options: options))
            for sub in command.subcommands { visit(path + [sub]) }
        }
        visit([root])
        return nodes
    }

    /// A name usable in a shell function name (`rainwallet` → `rainwallet`, `my-tool` → `my_tool`).
    var functionName: String {
        String(root.name.map { $0.isLetter || $0.isNumber ? $0 : "_" })
    }

    /// Single-quoted for sh-like shells.
    static func quoted(_ s: String) -> String { "'" + s.replacing("'", with: "'\\''") + "'" }

    /// The kind that completes the positional arguments of `command`, if any says how.
    static func argumentKind(_ command: Command) -> Command.ValueKind? {
        command.arguments.first { $0.kind != .string }?.kind
    }

    // MARK: bash

    func bash() -> String {
        let f = "_\(functionName)"
        var spec: [String] = []
        for node in nodes {
            let valued = node.options.filter { !$0.isFlag }.flatMap(\.names)
            var line = "        \(Self.quoted(node.key))) subs=\(Self.quoted(node.subcommands.joined(separator: " ")))"
            line += "; opts=\(Self.quoted(node.options.flatMap(\.names).joined(separator: " ")))"
            line += "; valued=\(Self.quoted(valued.joined(separator: " ")))"
            line += "; args=\(Self.quoted(Self.argumentKind(node.command).map(bashWords) ?? "")) ;;"
            spec.append(line)
        }
        return """
            # bash completion for \(root.name), generated from its command declarations by
            # `\(root.name) completion bash`: do not edit. Install it as
            # /usr/share/bash-completion/completions/\(root.name), or source it from ~/.bashrc.

            \(specAndKindFunctions(f, clearing: "subs='' opts='' valued='' args=''", spec: spec))

            # Completes a value of kind $1: :file, :directory, or a list of words.
            \(f)_value() {
                case "$1" in
                    :file) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
                    :directory) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -d -- "$cur") ;;
                    :*) COMPREPLY=() ;;
                    *) mapfile -t COMPREPLY < <(compgen -W "$1" -- "$cur") ;;
                esac
            }

            \(f)() {
                local cur="${COMP_WORDS[COMP_CWORD]}" cmdpath='' subs opts valued args kind word value_of=''
                local i=1
                COMPREPLY=()
                while ((i < COMP_CWORD)); do
                    word="${COMP_WORDS[i]}"
                    \(f)_spec "$cmdpath"
                    if [[ $word == -* ]]; then
                        if [[ " $valued " == *" $word "* ]]; then
                            if ((i + 1 == COMP_CWORD)); then value_of="$word"; fi
                            ((i++))
                        fi
                    elif [[ " $subs " == *" $word "* ]]; then
                        cmdpath="${cmdpath:+$cmdpath }$word"
                    fi
                    ((i++))
                done
                \(f)_spec "$cmdpath"
                if [[ -n $value_of ]]; then
                    \(f)_kind "$cmdpath" "$value_of"
                    \(f)_value "$kind"
                elif [[ $cur == -* ]]; then
                    mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
                elif [[ -n $subs ]]; then
                    mapfile -t COMPREPLY < <(compgen -W "$subs" -- "$cur")
                elif [[ -n $args ]]; then
                    \(f)_value "$args"
                fi
            }

            complete -F \(f) \(root.name)

            """
    }

    /// The shell functions `<f>_spec`, which sets subs, opts, valued and args for a command path
    /// (from `spec`, the case arms, after `clearing` resets them), and `<f>_kind`, which sets the
    /// kind of an option's value: bash and zsh write them alike.
    func specAndKindFunctions(_ f: String, clearing: String, spec: [String]) -> String {
        var kinds: [String] = []
        for node in nodes {
            for option in node.options where !option.isFlag {
                let patterns = option.names.map { Self.quoted("\(node.key)|\($0)") }.joined(separator: "|")
                kinds.append("        \(patterns)) kind=\(Self.quoted(bashWords(option.kind))) ;;")
            }
        }
        return """
            # Sets subs, opts, valued and args for the command path $1 (words joined by spaces).
            \(f)_spec() {
                \(clearing)
                case "$1" in
            \(spec.joined(separator: "\n"))
                esac
            }

            # Sets kind for the value of option $2 of the command path $1.
            \(f)_kind() {
                kind=''
                case "$1|$2" in
            \(kinds.joined(separator: "\n"))
                esac
            }
            """
    }

    /// The bash spelling of a kind: `:file`, `:directory`, the choices, or `:none`.
    func bashWords(_ kind: Command.ValueKind) -> String {
        switch kind {
        case .file: ":file"
        case .directory: ":directory"
        case .choice(let words, _): words.joined(separator: " ")
        case .string, .integer, .seconds: ":none"
        }
    }

    // MARK: zsh

    func zsh() -> String {
        let f = "_\(functionName)"
        var spec: [String] = []
        for node in nodes {
            let valued = node.options.filter { !$0.isFlag }.flatMap(\.names)
            let subs = node.subcommands.map { name in
                let abstract = node.command.subcommand(named: name)?.abstract ?? ""
                return name + ":" + (abstract.split(separator: "\n").first.map(String.init) ?? "")
            }
            var line = "        \(Self.quoted(node.key))) subs=(\(subs.map(Self.quoted).joined(separator: " ")))"
            line += "; opts=(\(node.options.flatMap(\.names).joined(separator: " ")))"
            line += "; valued=(\(valued.joined(separator: " ")))"
            line += "; args=\(Self.quoted(Self.argumentKind(node.command).map(bashWords) ?? "")) ;;"
            spec.append(line)
        }
        return """
            #compdef \(root.name)
            # zsh completion for \(root.name), generated from its command declarations by
            # `\(root.name) completion zsh`: do not edit. Install it as _\(root.name) in a directory
            # of $fpath (/usr/share/zsh/vendor-completions), or source it after compinit.

            \(specAndKindFunctions(f, clearing: "subs=() opts=() valued=() args=''", spec: spec))

            # Completes a value of kind $1: :file, :directory, or a list of words.
            \(f)_value() {
                case "$1" in
                    :file) _files ;;
                    :directory) _files -/ ;;
                    :*) return 1 ;;
                    *) compadd -- ${=1} ;;
                esac
            }

            \(f)() {
                local cmdpath='' kind word value_of='' args
                local -a subs opts valued
                local -i i=2
                while (( i < CURRENT )); do
                    word=${words[i]}
                    \(f)_spec "$cmdpath"
                    if [[ $word == -* ]]; then
                        if (( ${valued[(Ie)$word]} )); then
                            if (( i + 1 == CURRENT )); then value_of=$word; fi
                            (( i++ ))
                        fi
                    elif (( ${subs[(I)$word:*]} )); then
                        cmdpath=${cmdpath:+$cmdpath }$word
                    fi
                    (( i++ ))
                done
                \(f)_spec "$cmdpath"
                if [[ -n $value_of ]]; then
                    \(f)_kind "$cmdpath" "$value_of"
                    \(f)_value "$kind"
                elif [[ ${words[CURRENT]} == -* ]]; then
                    compadd -- $opts
                elif (( ${#subs} )); then
                    _describe -t commands 'command' subs
                elif [[ -n $args ]]; then
                    \(f)_value "$args"
                fi
            }

            if [[ ${funcstack[1]} == \(f) ]]; then
                \(f) "$@"
            else
                compdef \(f) \(root.name)
            fi

            """
    }

    // MARK: fish

    func fish() -> String {
        let f = "__\(functionName)"
        var specs: [String] = []
        var lines: [String] = []
        for node in nodes {
            let valued = node.options.filter { !$0.isFlag }.flatMap(\.names)
            specs.append("        case \(Self.fishQuoted(node.key))")
            specs.append("            set subs \(node.subcommands.map(Self.fishQuoted).joined(separator: " "))")
            specs.append("            set valued \(valued.map(Self.fishQuoted).joined(separator: " "))")
            let condition = "-n \(Self.fishQuoted("\(f)_is \(Self.fishQuoted(node.key))"))"
            for name in node.subcommands {
                let abstract = node.command.subcommand(named: name).map { Self.firstLine($0.abstract) } ?? ""
                lines.append(
                    "complete -c \(root.name) \(condition) -f -a \(Self.fishQuoted(name)) -d \(Self.fishQuoted(abstract))")
            }
            for option in node.options {
                var flags = option.names.map { name in
                    name.hasPrefix("--") ? "-l \(name.dropFirst(2))" : "-s \(name.dropFirst())"
                }.joined(separator: " ")
                switch option.isFlag ? nil : option.kind {
                case nil: break
                case .file?: flags += " -r -F"
                case .directory?: flags += " -x -a '(__fish_complete_directories)'"
                case .choice(let words, _)?: flags += " -x -a \(Self.fishQuoted(words.joined(separator: " ")))"
                case .string?, .integer?, .seconds?: flags += " -x"
                }
                lines.append("complete -c \(root.name) \(condition) \(flags) -d \(Self.fishQuoted(Self.firstLine(option.help)))")
            }
            switch Self.argumentKind(node.command) {
            case .file?: break
            case .directory?: lines.append("complete -c \(root.name) \(condition) -x -a '(__fish_complete_directories)'")
            case .choice(let words, _)?:
                lines.append("complete -c \(root.name) \(condition) -x -a \(Self.fishQuoted(words.joined(separator: " ")))")
            case .string?, .integer?, .seconds?, nil:
                // No file names where the command takes none.
                lines.append("complete -c \(root.name) \(condition) -f")
            }
        }
        return """
            # fish completion for \(root.name), generated from its command declarations by
            # `\(root.name) completion fish`: do not edit. Install it as
            # /usr/share/fish/vendor_completions.d/\(root.name).fish.

            # Sets subs and valued for the command path $argv[1] (words joined by spaces).
            function \(f)_spec --no-scope-shadowing
                set subs
                set valued
                switch $argv[1]
            \(specs.joined(separator: "\n"))
                end
            end

            # The command path typed so far: the subcommand words, skipping options and their values.
            function \(f)_path
                set -l words (commandline -opc)
                set -l cmdpath ''
                set -l subs
                set -l valued
                set -l i 2
                while test $i -le (count $words)
                    set -l word $words[$i]
                    \(f)_spec $cmdpath
                    if string match -q -- '-*' $word
                        if contains -- $word $valued
                            set i (math $i + 1)
                        end
                    else if contains -- $word $subs
                        set cmdpath (string trim -- "$cmdpath $word")
                    end
                    set i (math $i + 1)
                end
                echo $cmdpath
            end

            # True when the command path typed so far is $argv[1].
            function \(f)_is
                set -l current (\(f)_path)
                test "$current" = "$argv[1]"
            end

            complete -c \(root.name) -e
            \(lines.joined(separator: "\n"))

            """
    }

    /// Single-quoted for fish (backslash and quote escaped).
    static func fishQuoted(_ s: String) -> String {
        "'" + s.replacing("\\", with: "\\\\").replacing("'", with: "\\'") + "'"
    }

    static func firstLine(_ s: String) -> String { s.split(separator: "\n").first.map(String.init) ?? "" }
}
