/// A small argument reader: global options anywhere, `--flag value` and `--flag=value`.
struct Arguments {
    private(set) var rest: [String]
    let help: String

    init(_ args: [String], help: String) {
        self.rest = args
        self.help = help
    }

    var wantsHelp: Bool { rest.contains("--help") || rest.contains("-h") }

    /// Removes and returns the value of `--name VALUE` or `--name=VALUE`.
    mutating func option(_ name: String) throws(UsageError) -> String? {
        var found: String?
        var i = 0
        while i < rest.count {
            let a = rest[i]
            if a == name {
                guard i + 1 < rest.count else { throw UsageError("\(name) needs a value", help: help) }
                found = rest[i + 1]
                rest.removeSubrange(i...(i + 1))
                continue
            }
            if a.hasPrefix(name + "=") {
                found = String(a.dropFirst(name.count + 1))
                rest.remove(at: i)
                continue
            }
            i += 1
        }
        return found
    }

    /// Removes `--name` and says whether it was there.
    mutating func flag(_ name: String) -> Bool {
        let had = rest.contains(name)
        rest.removeAll { $0 == name }
        return had
    }

    /// Removes and returns the next positional argument.
    mutating func positional(_ what: String) throws(UsageError) -> String {
        guard let i = rest.firstIndex(where: { !$0.hasPrefix("-") }) else {
            throw UsageError("missing \(what)", help: help)
        }
        return rest.remove(at: i)
    }

    /// Fails on anything left over.
    func finish() throws(UsageError) {
        if let extra = rest.first {
            throw UsageError(extra.hasPrefix("-") ? "unknown option \(extra)" : "unexpected argument \(extra)", help: help)
        }
    }
}
