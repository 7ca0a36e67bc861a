import Foundation
import RainConfig
import RainCore
import RainTestSupport
import RainTransport
import RainWire
import Testing

@testable import RainDevice

/// proto/PROTOCOL.md's byte examples are what the daemon sends: a client is written from them, so
/// a field the daemon adds must show up in the document too.
@Suite struct ProtocolExampleTests {
    /// The text of the section under `heading` (to the next heading).
    static func section(_ heading: String) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("proto/PROTOCOL.md"), encoding: .utf8)
        let start = try #require(text.range(of: "\n\(heading)\n"), "no section \(heading)")
        let rest = text[start.upperBound...]
        return String(rest[..<(rest.range(of: "\n#")?.lowerBound ?? rest.endIndex)])
    }

    /// The section's fenced code blocks, each as its lines.
    static func codeBlocks(_ section: String) -> [[Substring]] {
        var blocks: [[Substring]] = []
        var current: [Substring]?
        for line in section.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                if let block = current { blocks.append(block) }
                current = current == nil ? [] : nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    /// The bytes of a hex block: on each line, the two-digit hex tokens before its annotation.
    static func bytes(_ lines: [Substring]) -> [UInt8] {
        lines.flatMap { line in
            line.split(separator: " ").lazy.map { $0.count == 2 ? UInt8($0, radix: 16) : nil }.prefix { $0 != nil }
                .compactMap { $0 }
        }
    }

    /// The backquoted words of `text`.
    static func quoted(_ text: Substring) -> [String] {
        text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }
            .map { String($0.element) }
    }

    @Test("§1.1's refusal of a uid that is not allowed is, byte for byte, the frame the daemon writes at accept")
    func uidRefusal() throws {
        let blocks = Self.codeBlocks(try Self.section("### 1.1 Example: the refusal of a uid that is not allowed"))
        let frame = try Envelope(requestID: 0, kind: .response(.failure(EventLoopServer.uidRefusal(uid: 1001))))
            .encodeFrame()
        #expect(Self.bytes(try #require(blocks.first)) == frame)
    }

    @Test("§5.2 and §7 list the capabilities GetInfo reports, in its order")
    func capabilities() throws {
        let all = DeviceService.capabilities(config: DaemonConfig(), isTestMethodsEnabled: true)
        let info = try Self.section("### 5.2 `GetInfo`")
        let listed = try #require(info.range(of: "The capabilities are")?.upperBound)
        let end = try #require(info[listed...].range(of: "in that order")?.lowerBound)
        // A backquoted option (`--enable-test-methods`) says when, not what.
        #expect(Self.quoted(info[listed..<end]).filter { !$0.hasPrefix("-") } == all)

        let example = try Self.section("## 7. Worked example")
        let opened = try #require(example.range(of: "capabilities: [")?.upperBound)
        let closed = try #require(example[opened...].range(of: "]")?.lowerBound)
        let shown = example[opened..<closed].split(separator: ",").map {
            $0.trimmingCharacters(in: CharacterSet(charactersIn: "\" \n"))
        }
        // The worked example's daemon has the outbox on and no test methods.
        #expect(shown == DeviceService.capabilities(config: DaemonConfig(), isTestMethodsEnabled: false))
    }

    @Test("§2.2's answer to GetState is, byte for byte, the daemon's answer for a profile with no session")
    func getStateExample() async throws {
        // The fixture's clock starts at 1800000000 s: the daemon's start, the authority link's `since_ms`.
        let f = try await SchedulerFixture()
        var payload: [UInt8] = []
        try await ServedHandler.serve(f) { c in
            _ = try await c.call(method: Method.sessionGetState, payload: [])  // creates the profile
            _ = await f.runtime.awaitRestore(timeout: .seconds(3600))
            payload = try await c.call(method: Method.sessionGetState, payload: [])
        }
        let frame = try Envelope(requestID: 2, kind: .response(.ok(payload))).encodeFrame()
        let blocks = Self.codeBlocks(try Self.section("### 2.2 Example: a successful response"))
        try #require(blocks.count >= 2)
        #expect(Self.bytes(blocks[0]) == frame, "the hex line")
        #expect(Self.bytes(blocks[1]) == frame, "the annotated bytes")
    }
}
