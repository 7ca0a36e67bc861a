import Foundation
import Testing

@testable import RainCore

/// The hand-written replacements for Foundation's formatters and string methods (which would link
/// ICU into the binaries) write what Foundation writes. Foundation is the reference here: tests
/// are not shipped.
@Suite("Text without Foundation")
struct FoundationFreeTextTests {
    static let numbers: [Double] = [
        0, -0.0, 0.005, 0.015, 0.125, 0.375, 1.005, 1.115, 2.675, 12.345, 99.995, 123.456_789, 1e9 + 0.5, -3.14159, 1e-9,
    ]

    @Test("CFormat writes %.2f, %02x, %02X, %06x, %04d and %03d as String(format:) does")
    func cFormatMatchesStringFormat() {
        for value in Self.numbers + (0..<500).map({ Double($0) * 0.001 + Double($0) }) {
            #expect(CFormat.string("%.2f", value) == String(format: "%.2f", value))
        }
        for byte in UInt8.min...UInt8.max {
            #expect(CFormat.string("%02x", UInt32(byte)) == String(format: "%02x", byte))
            #expect(CFormat.string("%%%02X", UInt32(byte)) == String(format: "%%%02X", byte))
        }
        for value: UInt32 in [0, 1, 0x12ab, 0x98_0001, 0xFFFF_FFFF] {
            #expect(CFormat.string("0x%06x", value) == String(format: "0x%06x", value))
        }
        for value: Int32 in [0, 5, 42, 999, 1000, 2026, 12345, -5] {
            #expect(CFormat.string("%04d", value) == String(format: "%04d", value))
            #expect(CFormat.string(".%03d", value) == String(format: ".%03d", value))
        }
        #expect(CFormat.string("%0300d", Int32(7)) == String(repeating: "0", count: 299) + "7")
    }

    static let trimSamples = [
        "", " ", "\t", "abc", "  abc  ", "\t a b \t", "\n abc \r\n", "\u{00A0}abc\u{2003}", "\u{0085}abc\u{2028}",
        "\u{3000}é\u{3000}", "\r\n", " \n x \n ", "x\u{200B}", "\u{0B}\u{0C}abc\u{0D}", "e\u{301} ", " \u{301}a",
    ]

    @Test("Trimming whitespace and newlines matches trimmingCharacters(in:)")
    func trimmingMatchesCharacterSet() {
        for text in Self.trimSamples {
            #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespaces), "\(text.debugDescription)")
            #expect(
                text.trimmingWhitespaceAndNewlines() == text.trimmingCharacters(in: .whitespacesAndNewlines),
                "\(text.debugDescription)")
            #expect(text.trimmingNewlines() == text.trimmingCharacters(in: .newlines), "\(text.debugDescription)")
            #expect(
                text.trimming(charactersIn: " \t\r") == text.trimmingCharacters(in: CharacterSet(charactersIn: " \t\r")),
                "\(text.debugDescription)")
        }
    }

    static let paths = [
        "/", "a", "a/", "/a", "/a/", "/a/b", "/a/b/", "a/b", "a//b", "/a//b//", "/tmp/x.json", "./a", "../b/c",
    ]

    /// (Foundation's `deletingLastPathComponent` traps on some relative paths, such as the empty one:
    /// those are left out of its comparison.)
    @Test("Path joins and splits match NSString's path methods")
    func pathTextMatchesNSString() {
        for path in Self.paths {
            if path.contains("/") && path != "a/" && !path.hasPrefix(".") {
                #expect(PathText.deletingLastComponent(path) == (path as NSString).deletingLastPathComponent, "\(path)")
            }
            #expect(PathText.lastComponent(path) == (path as NSString).lastPathComponent, "\(path)")
            for component in ["b", "b/", "/b", "b/c", ""] {
                #expect(
                    PathText.joined(path, component) == (path as NSString).appendingPathComponent(component),
                    "\(path) + \(component)")
            }
        }
    }

    static var dates: [Date] {
        var dates = [0, 1, 59, 86_399, 951_782_400, 1_709_208_000, 1_764_700_000, 1_764_700_000.999, 4_102_444_800]
            .map { Date(timeIntervalSince1970: $0) }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 { dates.append(Date(timeIntervalSince1970: Double.random(in: 0..<4e9, using: &generator))) }
        return dates
    }

    @Test("The RFC 5322 date matches DateFormatter in en_US_POSIX and UTC")
    func rfc5322MatchesDateFormatter() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
        for date in Self.dates {
            #expect(DateText.rfc5322(date) == formatter.string(from: date), "\(date.timeIntervalSince1970)")
        }
    }

    @Test("The clock time matches formatted(date: .omitted, time: .standard)")
    func clockTimeMatchesFormatStyle() {
        for date in Self.dates {
            #expect(
                DateText.localClockTime(date) == date.formatted(date: .omitted, time: .standard),
                "\(date.timeIntervalSince1970)")
        }
    }

    @Test("RFC 3339 timestamps match ISO8601DateFormatter")
    func rfc3339MatchesISO8601() {
        let formatter = ISO8601DateFormatter()
        for date in Self.dates {
            let whole = Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
            #expect(RFC3339.string(from: whole) == formatter.string(from: whole))
        }
        #expect(
            RFC3339.string(from: Date(timeIntervalSince1970: 1_764_700_000.042), fractional: true) == "2025-12-02T18:26:40.042Z")
    }

    private struct Sample: Decodable {
        var a: Int
    }

    @Test("Decoding and file errors read as localizedDescription")
    func errorTextMatchesLocalizedDescription() {
        for text in ["{", "[]", "{\"a\": \"x\"}", "{\"b\": 1}", "{\"a\": null}"] {
            do {
                _ = try JSONDecoder().decode(Sample.self, from: Data(text.utf8))
                Issue.record("\(text) decoded")
            } catch {
                #expect(ErrorText.describe(error) == error.localizedDescription, "\(text)")
            }
        }
        do {
            try FileManager.default.createDirectory(atPath: "/proc/rainwallet-none/x", withIntermediateDirectories: true)
            Issue.record("created a directory under /proc")
        } catch {
            #expect(ErrorText.describe(error) == error.localizedDescription)
        }
    }
}
