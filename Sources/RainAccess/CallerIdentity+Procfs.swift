/// The parsers of what `CallerIdentityReader` reads in `/proc/PID`: pure functions over bytes, so
/// each rule is tested on its own.
enum ProcfsParsing {
    /// The variables that load code into any dynamically linked program: a caller started with one
    /// of them may run code that is not its executable's.
    static let injectingVariables = ["LD_PRELOAD", "LD_AUDIT"]

    /// The variables that make an interpreter run code other than its script (a module path, a
    /// startup file, options). Not complete: the interpreter identity is weak (docs/app-identity.md).
    static let interpreterInjectingVariables = [
        "NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONUSERBASE",
        "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "BASH_ENV",
    ]

    /// `TracerPid` of `/proc/PID/status`: the pid of the process tracing this one, 0 for none;
    /// nil when the line is missing.
    static func tracerPID(status: [UInt8]) -> Int32? {
        for line in status.split(separator: UInt8(ascii: "\n")) {
            let text = String(decoding: line, as: UTF8.self)
            guard text.hasPrefix("TracerPid:") else { continue }
            return Int32(text.dropFirst("TracerPid:".count).trimmingCharacters(in: " \t"))
        }
        return nil
    }

    /// The systemd unit of a process from `/proc/PID/cgroup`: the last component of its cgroup v2
    /// path (the `0::` line, else the `name=systemd` one) that ends in `.service` or `.scope`.
    static func systemdUnit(cgroup: [UInt8]) -> String? {
        let lines = cgroup.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }
        let path =
            lines.first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) }
            ?? lines.first { $0.contains(":name=systemd:") }.flatMap {
                $0.split(separator: ":", maxSplits: 2).last.map(String.init)
            }
        guard let path else { return nil }
        return path.split(separator: "/").last { $0.hasSuffix(".service") || $0.hasSuffix(".scope") }.map(String.init)
    }

    /// The app id (`name=` of the `[Application]` group) of a Flatpak's `/.flatpak-info`.
    static func flatpakAppID(info: [UInt8]) -> String? {
        var isApplication = false
        for rawLine in String(decoding: info, as: UTF8.self).split(separator: "\n") {
            let line = rawLine.trimmingCharacters(in: " \t\r")
            if line.hasPrefix("[") {
                isApplication = line == "[Application]"
            } else if isApplication, line.hasPrefix("name=") {
                let name = String(line.dropFirst("name=".count))
                return name.isEmpty ? nil : name
            }
        }
        return nil
    }

    /// The arguments of `/proc/PID/cmdline` (NUL-separated).
    static func arguments(cmdline: [UInt8]) -> [String] {
        var bytes = cmdline[...]
        if bytes.last == 0 { bytes = bytes.dropLast() }
        guard !bytes.isEmpty else { return [] }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// Finds variables by name in a process's environment (`/proc/PID/environ`: `NAME=value` entries
/// separated by NUL) fed in pieces, holding only the start of the current entry: an environment of
/// any size is scanned in bounded memory.
struct EnvironmentScanner {
    private let names: Set<[UInt8]>
    private let keep: Int
    private var entry: [UInt8] = []
    /// The names found with a non-empty value (an empty `LD_PRELOAD=` loads nothing).
    private(set) var found: Set<String> = []

    init(names: [String]) {
        self.names = Set(names.map { Array($0.utf8) })
        // The longest name, its `=` and one byte of the value tell all that matters.
        keep = (names.map(\.utf8.count).max() ?? 0) + 2
        entry.reserveCapacity(keep)
    }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            if byte == 0 {
                finishEntry()
            } else if entry.count < keep {
                entry.append(byte)
            }
        }
    }

    /// Ends the last entry (an environment need not end with NUL).
    mutating func finish() { finishEntry() }

    private mutating func finishEntry() {
        defer { entry.removeAll(keepingCapacity: true) }
        guard let equals = entry.firstIndex(of: UInt8(ascii: "=")), equals + 1 < entry.count else { return }
        let name = Array(entry[..<equals])
        if names.contains(name) { found.insert(String(decoding: name, as: UTF8.self)) }
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters(in set: String) -> String {
        let characters = Set(set)
        var slice = Substring(self)
        while let first = slice.first, characters.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, characters.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }
}
