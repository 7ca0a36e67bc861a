import Foundation

/// The repository's files, for the tests that hold the docs to the sources.
enum Repository {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The Swift files of `directory`, sorted.
    static func swiftFiles(in directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(directory).path)
            .filter { $0.hasSuffix(".swift") }.sorted().map { "\(directory)/\($0)" }
    }
}

/// The `public` members a module's sources declare, read from the text as a reader would: each
/// member keyed by its type (`RainProvider`, `SessionEvent.Kind`) and its name as Swift's
/// documentation spells it (`sendLoginCode(to:)`, `init(_:)`, `authState`). Enum cases are not
/// members here: their type's documentation lists them.
struct PublicAPI: Equatable {
    struct Member: Hashable, CustomStringConvertible {
        var type: String
        var key: String
        var description: String { "\(type).\(key)" }
    }

    var members: Set<Member> = []

    func keys(of type: String) -> Set<String> { Set(members.filter { $0.type == type }.map(\.key)) }

    init(files: [String]) throws {
        for file in files { scan(try Repository.text(file)) }
    }

    private mutating func scan(_ text: String) {
        let typeDeclaration =
            #/^( *)(?:@\w+(?:\([^)]*\))? +)*(?:(?:public|package|internal|private|fileprivate) +)?(?:final +)?(?:class|struct|enum|extension|actor|protocol) +([A-Za-z_][\w.]*)/#
        let memberDeclaration =
            #/^( *)(?:@\w+ +)*(?:nonisolated\(nonsending\) +)?public +(?:static +)?(func|var|let|init)\b *(.*)$/#
        let lines = text.components(separatedBy: "\n")
        var stack: [(indent: Int, name: String)] = []
        for (index, line) in lines.enumerated() {
            let trimmed = line.drop { $0 == " " }
            if trimmed.hasPrefix("//") { continue }
            if let m = line.prefixMatch(of: typeDeclaration) {
                let indent = m.output.1.count
                while let last = stack.last, last.indent >= indent { stack.removeLast() }
                stack.append((indent, String(m.output.2)))
                continue
            }
            guard let m = line.prefixMatch(of: memberDeclaration) else { continue }
            let (indent, kind, rest) = (m.output.1.count, m.output.2, m.output.3)
            while let last = stack.last, last.indent >= indent { stack.removeLast() }
            guard !stack.isEmpty else { continue }
            let type = stack.map(\.name).joined(separator: ".")
            let key: String
            switch kind {
            case "var", "let":
                key = String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" })
            default:
                let following = lines[(index + 1)...].prefix(20).joined(separator: "\n")
                let declaration = (kind == "init" ? "init" + rest : String(rest)) + "\n" + following
                key = Self.functionKey(declaration)
            }
            members.insert(Member(type: type, key: key))
        }
    }

    /// `name(label:label:)` of a declaration that starts with the name.
    static func functionKey(_ declaration: String) -> String {
        let name = declaration.prefix { $0.isLetter || $0.isNumber || $0 == "_" }
        guard let open = declaration.firstIndex(of: "(") else { return "\(name)()" }
        var depth = 0
        var parameters: [String] = []
        var current = ""
        for c in declaration[open...] {
            switch c {
            case "(", "[", "<":
                depth += 1
                if depth == 1 { continue }
            case ")", "]", ">":
                depth -= 1
            default:
                break
            }
            if depth == 0 { break }
            if c == "," && depth == 1 {
                parameters.append(current)
                current = ""
            } else {
                current.append(c)
            }
        }
        if !current.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { parameters.append(current) }
        let labels = parameters.map { parameter -> String in
            let head = parameter.split(separator: ":", maxSplits: 1).first ?? ""
            return String(head.split(whereSeparator: \.isWhitespace).first ?? "_")
        }
        return "\(name)(" + labels.map { "\($0):" }.joined() + ")"
    }
}

/// A Markdown table row's cells, or nil for a line that is not a row (or is the header's rule).
func tableCells(_ line: String) -> [String]? {
    let trimmed = line.trimmingCharacters(in: .whitespaces)
    guard trimmed.hasPrefix("|"), trimmed.hasSuffix("|"), !trimmed.hasPrefix("|---") else { return nil }
    return trimmed.dropFirst().dropLast().components(separatedBy: " | ").map { $0.trimmingCharacters(in: .whitespaces) }
}

/// The text between the first pair of backticks in `cell`.
func firstCode(_ cell: String) -> String? {
    let parts = cell.components(separatedBy: "`")
    return parts.count >= 3 ? parts[1] : nil
}
