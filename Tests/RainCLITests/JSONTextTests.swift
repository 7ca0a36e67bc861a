import Foundation
import RainCore
import Testing

@testable import RainCLI

/// The CLI's JSON writer writes what `JSONSerialization` with `.sortedKeys` wrote (slashes
/// unescaped), and its syntax check finds the error where `JSONSerialization` did.
@Suite("JSON text")
struct JSONTextTests {
    static func foundation(_ value: Any) throws -> String {
        let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed])
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\\/", with: "/")
    }

    @Test("Keys sort as JSONSerialization sorts them")
    func keysSortAsFoundation() throws {
        let keys = [
            "authState", "authorityLink", "a_b", "a1", "B", "a10", "a9", "b", "A", "a-b", "a.b", "aB", "ab", "Zeta", "zeta",
            "x2y", "x10y", "_x", "0a", "expiresAt", "expiryReason", "appID", "appId", "app", "apps", "profile", "profiles",
            "signedBytesSha256", "signature", "sessionID", "session", "id", "ID", "Id", "v2", "v10", "v02", "a.1", "a:b",
        ]
        var object: [String: Any] = [:]
        for (index, key) in keys.enumerated() { object[key] = index }
        let ours = try #require(JSONText.text(object)).split(separator: ",").map { $0.split(separator: ":")[0] }
        let theirs = try Self.foundation(object).split(separator: ",").map { $0.split(separator: ":")[0] }
        #expect(ours == theirs)
    }

    @Test("Values are written as JSONSerialization writes them")
    func valuesAsFoundation() throws {
        let values: [Any] = [
            "plain", "a/b\"\\\n\r\t\u{8}\u{C}\u{1}\u{1F}\u{7F}é😀\u{2028}", true, false, 0, -5, Int64.max, UInt64.max,
            UInt32(7), Int32(-2), Int8(3), [1, 2, 3], ["k": "v", "n": [true]] as [String: Any], [Any](),
            [String: Any](), 1.5, 0.1, -2.0, 3.0,
        ]
        for value in values {
            #expect(JSONText.text(value) == (try Self.foundation(value)), "\(value)")
        }
        let nested: [String: Any] = ["z": ["b": 1, "a": [["y": "x/y", "x": false]]], "a": "é"]
        #expect(JSONText.text(nested) == (try Self.foundation(nested)))
        #expect(
            Output.render(["none": nil, "date": Date(timeIntervalSince1970: 0)] as [String: Any?])
                == "{\"date\":\"1970-01-01T00:00:00Z\",\"none\":null}")
    }

    @Test("The syntax check names the character where JSONSerialization stopped")
    func syntaxErrorsAsFoundation() {
        for text in [
            "{\"a\": x}", "[1, 2,, 3]", "{\"a\" 1}", "{\"a\": 1} x", "tru", "[1, 2", "{\"a\": 01}", "\"\\q\"", "{1: 2}", "-",
        ] {
            var reason: String?
            do {
                _ = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
            } catch {
                reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            }
            #expect(JSONSyntax.firstError(in: Array(text.utf8)) == reason, "\(text)")
        }
        for text in ["{}", "[]", "{\"a\": [1, -2.5e3, true, null, \"x\\u00e9\"]}", " 1 "] {
            #expect(JSONSyntax.firstError(in: Array(text.utf8)) == nil, "\(text)")
        }
    }

    @Test("Table cells are padded and cut by UTF-16 length, as NSString's padding")
    func paddingAsNSString() {
        for cell in ["", "abc", "héllo", "😀x", "a😀", "e\u{301}e"] {
            for length in 0...6 {
                #expect(
                    AuditCommand.paddedUTF16(cell, toLength: length)
                        == cell.padding(toLength: length, withPad: " ", startingAt: 0), "\(cell) \(length)")
            }
        }
    }
}
