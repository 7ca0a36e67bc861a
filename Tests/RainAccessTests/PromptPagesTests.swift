import RainCore
import Testing

@testable import RainAccess

/// A request with details is shown in pages: each one Assuan line with the header, every line of
/// the details in full and in order, the code on the last page only, at most 8 pages.
@Suite("Prompt pages: what is signed, in full, in at most 8 pages of one Assuan line each")
struct PromptPagesTests {
    static let code = PromptCode(text: "K7QX")

    static func request(lines: [String], path: String = "/usr/bin/wallet-app") -> PromptRequest {
        PromptRequest(
            action: "Sign a transaction on Base (8453)", caller: PromptLayoutTests.caller(path: path), profile: "default",
            details: PromptDetails(lines: lines, closing: "SHA-256 of what is signed: " + String(repeating: "ab", count: 32)))
    }

    /// What each page shows, unescaped, after checking its SETDESC line is within Assuan's limit.
    static func shown(_ pages: [String]) throws -> [String] {
        try pages.map { page in
            let line = try Assuan.command("SETDESC", page)
            #expect(line.count <= Assuan.maximumLineLength + 1, "a page of \(line.count) bytes")
            return String(decoding: Assuan.unescape(line.dropFirst("SETDESC ".utf8.count).dropLast()[...]), as: UTF8.self)
        }
    }

    @Test("a short request is one page with the lines, the SHA-256 and the code")
    func onePage() throws {
        let pages = try Self.shown(
            Self.request(lines: ["Chain: Base (8453)", "To: 0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B"]).pages(code: Self.code))
        #expect(pages.count == 1)
        #expect(pages[0].contains("Page 1 of 1"))
        #expect(pages[0].contains("To: 0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B"))
        #expect(pages[0].contains("SHA-256 of what is signed: abab"))
        #expect(pages[0].contains("type the code  K7QX"))
    }

    @Test("a long request is paged: every line in full and in order, the code on the last page only")
    func paged() throws {
        let lines = (1...60).map { "Field message.items[\($0)].note: value number \($0) of the typed data" }
        let pages = try Self.shown(Self.request(lines: lines).pages(code: Self.code))
        #expect(pages.count > 1 && pages.count <= PromptDetails.maximumPages)
        for (index, page) in pages.enumerated() {
            #expect(page.contains("Page \(index + 1) of \(pages.count)"))
            #expect(page.contains("/usr/bin/wallet-app"), "every page names the app")
            #expect(page.contains("K7QX") == (index == pages.count - 1), "the code is on the last page only")
        }
        let joined = pages.joined(separator: "\n")
        var position = joined.startIndex
        for line in lines {
            let found = try #require(
                joined.range(of: line + "\n", range: position..<joined.endIndex), "\(line) missing or out of order")
            position = found.upperBound
        }
    }

    @Test("a line longer than a page continues on the next, never cut")
    func longLine() throws {
        let long = "Field message.contents: " + String(repeating: "0123456789", count: 150)
        let pages = try Self.shown(Self.request(lines: [long]).pages(code: Self.code))
        #expect(pages.count >= 2)
        let digits = pages.map { $0.filter(\.isNumber).count }.reduce(0, +)
        #expect(digits >= 1500, "every digit of the value is shown")
    }

    @Test("control characters and bidirectional marks in a request's text are shown as ?")
    func sanitized() throws {
        let pages = try Self.shown(
            Self.request(lines: ["Token: USD\u{202E}CT\u{7}\nTo: 0xdead", "Note: \u{200F}fake\u{1B}[2J"]).pages(code: Self.code))
        let page = try #require(pages.first)
        #expect(!page.contains("\u{202E}") && !page.contains("\u{1B}") && !page.contains("\u{200F}"))
        #expect(page.contains("Token: USD?CT??To: 0xdead"), "a newline in a value cannot draw a fake line")
    }

    @Test("more than 8 pages is RAIN_102 prompt_too_long, before any prompt")
    func tooLong() {
        let lines = (1...400).map { "Field message.items[\($0)]: " + String(repeating: "x", count: 40) }
        #expect {
            _ = try Self.request(lines: lines).pages(code: Self.code)
        } throws: { error in
            (error as? RainError)?.code == .invalidArgument
                && (error as? RainError)?.details.reason == PromptReason.tooLong
        }
    }

    @Test("eight pages are shown; the longest app path takes room from every page")
    func eightPages() throws {
        var count = 1
        var lines: [String] = []
        while true {
            lines.append("Field message.items[\(count)]: " + String(repeating: "y", count: 30))
            count += 1
            let pages = try? Self.request(lines: lines).pages(code: Self.code)
            guard let pages else { break }
            #expect(pages.count <= 8)
        }
        lines.removeLast()
        #expect(try Self.request(lines: lines).pages(code: Self.code).count == 8)
        // The same lines with a longer path need more room than 8 pages give.
        #expect(throws: RainError.self) {
            _ = try Self.request(lines: lines, path: "/opt/" + String(repeating: "p", count: 200)).pages(code: Self.code)
        }
    }

    @Test("a request without details is the one-line prompt it was")
    func noDetails() throws {
        let request = PromptRequest(
            action: "Export the recovery phrase", caller: PromptLayoutTests.caller(path: "/a"), profile: "p")
        #expect(try request.pages(code: Self.code) == [try request.description(code: Self.code)])
    }
}
