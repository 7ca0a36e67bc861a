import Foundation
import Testing

/// docs/swift-api.md lists every public member of the library's types with what it returns and
/// what it throws; a member added without a row, or a row left for a member that is gone, fails.
@Suite struct PublicAPIDocumentationTests {
    /// The rows of docs/swift-api.md by the `### Type` they are under: member, returns, throws.
    static func documented() throws -> [String: [String: [String]]] {
        var byType: [String: [String: [String]]] = [:]
        var type: String?
        for line in try Repository.text("docs/swift-api.md").components(separatedBy: "\n") {
            if line.hasPrefix("### ") {
                type = line.dropFirst(4).replacingOccurrences(of: "`", with: "").split(separator: " ").first.map(String.init)
                continue
            }
            if line.hasPrefix("## ") { type = nil }
            guard let type, let cells = tableCells(line), let member = firstCode(cells[0]) else { continue }
            byType[type, default: [:]][member] = Array(cells.dropFirst())
        }
        return byType
    }

    @Test("every public member of RainWallet has a row with its return type and its errors, and every row a member")
    func everyPublicMemberIsDocumented() throws {
        let api = try PublicAPI(files: Repository.swiftFiles(in: "Sources/RainWallet"))
        #expect(api.keys(of: "RainProvider").count > 30, "the scan found \(api.keys(of: "RainProvider").sorted())")
        let documented = try Self.documented()
        for member in api.members.sorted(by: { $0.description < $1.description }) {
            guard let cells = documented[member.type]?[member.key] else {
                Issue.record("\(member) is public but has no row under ### \(member.type) in docs/swift-api.md")
                continue
            }
            #expect(
                cells.count == 2 && cells.allSatisfy { !$0.isEmpty },
                "\(member): the row needs what it returns and what it throws")
        }
        for (type, rows) in documented {
            for key in rows.keys where !api.members.contains(.init(type: type, key: key)) {
                Issue.record("docs/swift-api.md documents \(type).\(key), which the sources do not declare public")
            }
        }
    }
}
