import RainCore
import Testing

@testable import RainSigning

@Suite struct StrictJSONReaderTests {
    static func parse(_ text: String, depth: Int = 16) throws(RainError) -> StrictJSONValue {
        try StrictJSONReader.parse(Array(text.utf8), field: "j", maximumDepth: depth)
    }

    @Test func numbersKeepTheirTextAndObjectsTheirOrder() throws {
        let value = try Self.parse(
            #" {"z": 123456789012345678901234567890, "a": -0.5e+10, "m": [true, false, null, "s"], "e": {}} "#)
        #expect(
            value
                == .object([
                    StrictJSONMember(key: "z", value: .number("123456789012345678901234567890")),
                    StrictJSONMember(key: "a", value: .number("-0.5e+10")),
                    StrictJSONMember(key: "m", value: .array([.bool(true), .bool(false), .null, .string("s")])),
                    StrictJSONMember(key: "e", value: .object([])),
                ]))
    }

    @Test func escapesAndSurrogatePairsDecode() throws {
        #expect(
            try Self.parse(#""a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\u0000""#)
                == .string("a\"\\/\u{8}\u{C}\n\r\t\u{E9}\u{1F600}\u{0}"))
        #expect(try Self.parse("\"h\u{E9}llo \u{2603}\"") == .string("h\u{E9}llo \u{2603}"))
    }

    @Test(arguments: [
        "01", "+1", ".5", "1.", "1e", "-", "--1", "0x10", "[1,]", "{\"a\":1,}", "[1 2]", "{\"a\" 1}", "{a: 1}", "'a'",
        "\"a", "\"\\x\"", "\"\\u12\"", "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"", "\"tab\there\"", "// c\n1",
        "/* c */ 1", "tru", "nul", "NaN", "Infinity", "", " ", "\u{FEFF}1", "\"\\u+123\"",
    ])
    func textOutsideRFC8259IsRefused(_ text: String) {
        do {
            _ = try Self.parse(text)
            Issue.record("accepted \(text.debugDescription)")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(["invalid_json", "trailing_bytes"].contains(error.details.reason ?? ""), "\(error)")
        }
    }

    @Test func invalidUTF8IsRefused() {
        for bytes: [UInt8] in [
            [0x22, 0xFF, 0x22], [0x22, 0xC0, 0x80, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xC3, 0x22],
        ] {
            EVMTestSupport.expectRefusal(.invalidArgument, field: "j", reason: "invalid_utf8") {
                _ = try StrictJSONReader.parse(bytes, field: "j", maximumDepth: 4)
            }
        }
    }

    @Test func duplicateKeysAreRefusedWithTheirPath() {
        EVMTestSupport.expectRefusal(.invalidArgument, field: "j.a[1].b", reason: "duplicate_key") {
            _ = try Self.parse(#"{"a": [0, {"b": 1, "c": 2, "b": 1}]}"#)
        }
    }

    @Test func nestingBeyondTheLimitIsRefused() throws {
        _ = try Self.parse(String(repeating: "[", count: 4) + String(repeating: "]", count: 4), depth: 4)
        EVMTestSupport.expectRefusal(.invalidArgument, field: "j[0][0][0][0]", reason: "too_deep") {
            _ = try Self.parse(String(repeating: "[", count: 5) + String(repeating: "]", count: 5), depth: 4)
        }
        // Deep input far beyond any limit is refused without exhausting the stack.
        EVMTestSupport.expectRefusal(.invalidArgument, field: "j" + String(repeating: "[0]", count: 16), reason: "too_deep") {
            _ = try Self.parse(String(repeating: "[", count: 100_000))
        }
    }
}
