import Foundation
import Testing

/// docs/mobile-sdk-map.md against the SDKs' method lists committed in docs/sdk/ and against this
/// library's sources: one row per listed method, no row for a method the lists do not have, and
/// every row either names a public member of `RainProvider` or says why there is none.
@Suite struct MobileSDKMapTests {
    struct Platform: Sendable, CustomStringConvertible {
        var list: String
        var heading: String
        var description: String { heading }
    }

    static let platforms = [
        Platform(list: "docs/sdk/ios-methods.txt", heading: "## iOS"),
        Platform(list: "docs/sdk/android-methods.txt", heading: "## Android"),
    ]

    /// The SDK methods a list names: every line but comments and blank ones.
    static func listed(_ platform: Platform) throws -> [String] {
        try Repository.text(platform.list).components(separatedBy: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }

    /// The rows of the map's section for `platform`: the SDK method, then the other cells.
    static func rows(_ platform: Platform) throws -> [(method: String, cells: [String])] {
        var rows: [(String, [String])] = []
        var isInSection = false
        for line in try Repository.text("docs/mobile-sdk-map.md").components(separatedBy: "\n") {
            if line.hasPrefix("## ") { isInSection = line.hasPrefix(platform.heading) }
            guard isInSection, let cells = tableCells(line), let method = firstCode(cells[0]) else { continue }
            rows.append((method, Array(cells.dropFirst())))
        }
        return rows
    }

    @Test("every SDK method listed has exactly one row in the map, and every row one listed method", arguments: platforms)
    func everyListedMethodIsMapped(_ platform: Platform) throws {
        let listed = try Self.listed(platform)
        #expect(listed.count > 20, "the list \(platform.list) looks truncated")
        #expect(Set(listed).count == listed.count, "a method is listed twice in \(platform.list)")
        let mapped = try Self.rows(platform).map(\.method)
        for method in listed {
            let count = mapped.filter { $0 == method }.count
            #expect(count == 1, "\(method) (\(platform.list)) has \(count) rows in docs/mobile-sdk-map.md")
        }
        for method in mapped where !listed.contains(method) {
            Issue.record("docs/mobile-sdk-map.md maps \(method), which \(platform.list) does not list")
        }
    }

    @Test("each row names a public member of RainProvider, or says why there is no equivalent", arguments: platforms)
    func everyRowNamesARealMemberOrAReason(_ platform: Platform) throws {
        let provider = try PublicAPI(files: Repository.swiftFiles(in: "Sources/RainWallet")).keys(of: "RainProvider")
        #expect(provider.contains("awaitSessionRestore(timeoutMs:)"), "the scan of RainProvider found \(provider.sorted())")
        for (method, cells) in try Self.rows(platform) {
            let target = cells.first ?? ""
            if target.hasPrefix("no equivalent:") {
                let reason = target.dropFirst("no equivalent:".count).trimmingCharacters(in: .whitespaces)
                #expect(!reason.isEmpty, "\(method): no equivalent, and no reason given")
            } else {
                let member = firstCode(target) ?? ""
                #expect(provider.contains(member), "\(method) maps to `\(member)`, which is no public member of RainProvider")
            }
        }
    }

    @Test("the scan of the sources reads declarations as Swift's documentation names them")
    func functionKeys() {
        #expect(
            PublicAPI.functionKey("sendLoginCode(to contact: RainWalletContact) async throws -> CodeSent {")
                == "sendLoginCode(to:)")
        #expect(PublicAPI.functionKey("logout() async throws -> LogoutResult {") == "logout()")
        #expect(PublicAPI.functionKey("init(_ config: RainWalletConfig = RainWalletConfig()) {") == "init(_:)")
        #expect(
            PublicAPI.functionKey("init(\n    a: Int, b: [String: Int] = [:],\n    c: (Int, Int) = (1, 2)\n) {") == "init(a:b:c:)"
        )
        #expect(
            PublicAPI.functionKey("onSessionExpired(_ hook: @escaping @Sendable (ExpiryReason) -> Void) {")
                == "onSessionExpired(_:)")
    }
}
