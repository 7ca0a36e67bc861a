import Testing

@testable import RainCore

/// The logger writes text that came from outside so it can neither forge nor hide a line, nor
/// drive the terminal of whoever reads the log.
@Suite("Logger")
struct LoggerTests {
    /// The one line `fields` make, after the timestamp.
    static func line(_ fields: KeyValuePairs<String, String>) throws -> String {
        let sink = CapturingLogSink()
        Logger(label: "test", sink: sink).info("app.refused", fields)
        let lines = sink.captured
        try #require(lines.count == 1)
        let line = try #require(lines.first)
        return String(line.drop(while: { $0 != " " }).dropFirst())
    }

    /// Whether `line` holds any scalar the logger must never write raw.
    static func hasHidden(_ line: String) -> Bool {
        line.unicodeScalars.contains { scalar in
            scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
                || [0x061C, 0x200B, 0x200E, 0x200F, 0x2028, 0x2029, 0xFEFF].contains(scalar.value)
                || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
        }
    }

    @Test("an app path with ESC[2J, a newline and U+202E is written with none of them raw, each escaped visibly")
    func appPathIsEscaped() throws {
        let path = "/tmp/evil\u{1B}[2J\nline\u{202E}txt.exe/rainwallet"
        let line = try Self.line(["app": path, "pid": "42"])
        #expect(!Self.hasHidden(line))
        #expect(line == #"info test app.refused app="/tmp/evil\u{1B}[2J\nline\u{202E}txt.exe/rainwallet" pid=42"#)
    }

    @Test(
        "every control, bidirectional and separator character is escaped as \\u{HEX}",
        arguments: [
            0x00, 0x07, 0x08, 0x0D, 0x1B, 0x7F, 0x85, 0x9B, 0x061C, 0x200B, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A,
            0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF,
        ] as [UInt32])
    func hiddenCharactersAreEscaped(value: UInt32) throws {
        let scalar = try #require(Unicode.Scalar(value))
        let line = try Self.line(["name": "a" + String(Character(scalar)) + "b"])
        #expect(!Self.hasHidden(line))
        #expect(line.hasSuffix("name=\"a\\u{\(String(value, radix: 16, uppercase: true))}b\""))
    }

    @Test("a value that spells an escape is told apart from the character: its backslash is doubled")
    func literalEscapeIsNotAmbiguous() throws {
        let escaped = try Self.line(["path": "/a\u{1B}b"])
        let spelled = try Self.line(["path": "/a\\u{1B}b"])
        #expect(escaped != spelled)
        #expect(spelled.hasSuffix(#"path="/a\\u{1B}b""#))
    }

    @Test("plain ASCII and printable text beyond it are written unchanged; spaces, quotes and = are quoted")
    func plainTextUnchanged() throws {
        #expect(try Self.line(["path": "/usr/bin/rainwallet", "n": "3"]).hasSuffix("path=/usr/bin/rainwallet n=3"))
        #expect(try Self.line(["profile": "épargne-日本"]).hasSuffix("profile=épargne-日本"))
        #expect(
            try Self.line(["a": "x y", "b": "", "c": "k=v", "d": "say \"hi\""]).hasSuffix(
                #"a="x y" b="" c="k=v" d="say \"hi\"""#))
    }

    @Test("an event, key or label built from outside text is escaped too")
    func namesAreEscaped() throws {
        let sink = CapturingLogSink()
        Logger(label: "test\u{1B}]0;x\u{07}", sink: sink).child("c\u{202E}").info("ev\nent", ["k\u{2028}": "v"])
        let line = try #require(sink.captured.first)
        #expect(!Self.hasHidden(line))
        #expect(line.contains(#"test\u{1B}]0;x\u{7}.c\u{202E} ev\nent k\u{2028}=v"#))
    }
}
