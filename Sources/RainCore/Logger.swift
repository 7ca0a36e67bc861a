import FoundationEssentials
import Glibc
import Synchronization

/// Severity of a log event.
public enum LogLevel: Int, Sendable, Comparable, CustomStringConvertible {
    case debug = 0, info, warning, error
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
    public var description: String {
        switch self {
        case .debug: return "debug"
        case .info: return "info"
        case .warning: return "warning"
        case .error: return "error"
        }
    }
}

/// Where log events go.
public protocol LogSink: Sendable {
    /// Writes one event.
    func write(_ line: String)
}

/// Writes each event as one line to standard error.
public struct StandardErrorSink: LogSink {
    public init() {}
    public func write(_ line: String) { Self.writeAll(Array((line + "\n").utf8)) }

    static func writeAll(_ data: [UInt8]) {
        data.withUnsafeBytes { buf in
            var offset = 0
            while offset < buf.count {
                let n = Glibc.write(2, buf.baseAddress.map { $0 + offset }, buf.count - offset)
                if n <= 0 { return }
                offset += n
            }
        }
    }
}

/// A tiny structured logger, passed in rather than global. One event per line:
/// `2026-11-29T20:00:00.000Z info daemon.start socket=/run/... pid=123`.
///
/// Values are written as given: never pass a code, token or key. `LogValue.redacted` exists for
/// fields that must appear but hide their value.
///
/// Text that came from outside (an app's path, a profile name) cannot forge or hide log lines or
/// drive the terminal of whoever reads the log: in the label, the event, every key and every value,
/// control characters (C0, DEL, C1, so ESC too), format characters (bidirectional overrides and
/// isolates, marks, zero-width characters), line and paragraph separators and unassigned scalars are
/// written as a visible escape, `\u{1B}` (hexadecimal, as Swift writes it; a newline as `\n`), and
/// a value holding one is quoted with its backslashes doubled, so an escape in a value always means
/// the character was there. Plain printable ASCII is checked byte by byte and written unchanged.
public struct Logger: Sendable {
    public var label: String
    public var minimumLevel: LogLevel
    private let sink: any LogSink

    public init(label: String, minimumLevel: LogLevel = .info, sink: any LogSink = StandardErrorSink()) {
        self.label = label
        self.minimumLevel = minimumLevel
        self.sink = sink
    }

    /// A logger for a sub-component.
    public func child(_ suffix: String) -> Logger {
        var copy = self
        copy.label = "\(label).\(suffix)"
        return copy
    }

    /// Logs an event with key-value fields.
    public func log(_ level: LogLevel, _ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        guard level >= minimumLevel else { return }
        var line = "\(Logger.timestamp()) \(level) \(Logger.escaped(label)) \(Logger.escaped(event))"
        for (k, v) in fields {
            line += " \(Logger.escaped(k))=\(Logger.quote(v))"
        }
        sink.write(line)
    }

    public func debug(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.debug, event, fields) }
    public func info(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.info, event, fields) }
    public func warning(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.warning, event, fields) }
    public func error(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.error, event, fields) }

    /// A field's value as written: unchanged when it is printable ASCII without a space, `"`,
    /// `=` or a backslash (or printable text beyond ASCII); otherwise quoted, with backslashes and
    /// `"` escaped and every character `isHidden` calls hidden written as `\n` or `\u{HEX}`.
    static func quote(_ v: String) -> String {
        if v.isEmpty { return "\"\"" }
        switch scan(v) {
        case .plain: return v
        case .needsQuotes: break
        case .needsScalarCheck:
            // Beyond ASCII: printable text (a name in another script) stays as it is.
            if !v.unicodeScalars.contains(where: { isHidden($0) || isSpecial($0) }) { return v }
        }
        var out = "\""
        out.reserveCapacity(v.utf8.count + 8)
        for scalar in v.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            default: append(scalar, to: &out)
            }
        }
        out += "\""
        return out
    }

    /// `text` for a terminal: unchanged unless it holds a hidden character (a control such as ESC,
    /// a newline, a bidirectional override), which is written escaped (`\u{1B}`, `\n`). A message
    /// that quotes an app's path must not redraw or reorder the user's screen.
    public static func escapingHiddenCharacters(_ text: String) -> String { escaped(text) }

    /// A label, event or key as written: unchanged unless it holds a hidden character, which is
    /// escaped (they are names chosen in code; this keeps one built from outside text honest).
    static func escaped(_ name: String) -> String {
        if case .plain = scan(name) { return name }
        guard name.unicodeScalars.contains(where: isHidden) else { return name }
        var out = ""
        out.reserveCapacity(name.utf8.count + 8)
        for scalar in name.unicodeScalars { append(scalar, to: &out) }
        return out
    }

    private enum Scan { case plain, needsQuotes, needsScalarCheck }

    /// The cheap pass over the bytes: printable ASCII is plain; a space, `"`, `=` or a backslash needs
    /// quotes; anything else (controls, DEL, any byte of a multi-byte character) needs a look at
    /// its scalars.
    private static func scan(_ v: String) -> Scan {
        var result = Scan.plain
        for byte in v.utf8 {
            switch byte {
            case 0x20, 0x22, 0x3D, 0x5C: result = .needsQuotes
            case 0x21...0x7E: continue
            default: return .needsScalarCheck
            }
        }
        return result
    }

    private static func append(_ scalar: Unicode.Scalar, to out: inout String) {
        if scalar == "\n" {
            out += "\\n"
        } else if isHidden(scalar) {
            out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }

    /// What makes a value need quotes without being hidden.
    private static func isSpecial(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\"" || scalar == "=" || scalar == "\\"
    }

    /// Characters that must never reach the log raw: controls (C0, DEL, C1), format characters
    /// (bidirectional overrides and isolates U+202A–U+202E and U+2066–U+2069, the marks U+200E,
    /// U+200F and U+061C, zero-width characters), line and paragraph separators, and scalars with
    /// no meaning yet (unassigned, private use), the set `PromptText` keeps off the prompt.
    static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.value < 0x20 || scalar.value == 0x7F { return true }
        if scalar.value < 0x7F { return false }
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .unassigned, .surrogate, .privateUse:
            return true
        default:
            return false
        }
    }

    static func timestamp() -> String { RFC3339.string(from: Date(), fractional: true) }
}

/// A sink that keeps lines in memory (tests scan them for secrets).
public final class CapturingLogSink: LogSink {
    private let lines = Mutex<[String]>([])
    public init() {}
    public func write(_ line: String) { lines.withLock { $0.append(line) } }
    /// Everything written so far.
    public var captured: [String] { lines.withLock { $0 } }
}

/// RFC 3339 UTC timestamps.
public enum RFC3339 {
    /// Formats a date as `2026-11-29T20:00:00Z` (or with milliseconds).
    public static func string(from date: Date, fractional: Bool = false) -> String {
        let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let secs = Int(ms.quotientAndRemainder(dividingBy: 1000).quotient) - (ms < 0 && ms % 1000 != 0 ? 1 : 0)
        let millis = Int(((ms % 1000) + 1000) % 1000)
        var t = time_t(secs)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        let base = CFormat.string(
            "%04d-%02d-%02dT%02d:%02d:%02d", tmv.tm_year + 1900, tmv.tm_mon + 1, tmv.tm_mday, tmv.tm_hour, tmv.tm_min,
            tmv.tm_sec)
        return fractional ? base + CFormat.string(".%03d", Int32(millis)) + "Z" : base + "Z"
    }
}
