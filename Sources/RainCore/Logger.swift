import Foundation
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
    public func write(_ line: String) {
        let data = Array((line + "\n").utf8)
        data.withUnsafeBytes { buf in
            var offset = 0
            while offset < buf.count {
                let n = Foundation.write(2, buf.baseAddress.map { $0 + offset }, buf.count - offset)
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
        var line = "\(Logger.timestamp()) \(level) \(label) \(event)"
        for (k, v) in fields {
            line += " \(k)=\(Logger.quote(v))"
        }
        sink.write(line)
    }

    public func debug(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.debug, event, fields) }
    public func info(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.info, event, fields) }
    public func warning(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.warning, event, fields) }
    public func error(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.error, event, fields) }

    static func quote(_ v: String) -> String {
        let needsQuote = v.isEmpty || v.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline })
        guard needsQuote else { return v }
        let escaped = v.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
        return "\"\(escaped)\""
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
        let base = String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d", Int(tmv.tm_year) + 1900, Int(tmv.tm_mon) + 1, Int(tmv.tm_mday),
            Int(tmv.tm_hour), Int(tmv.tm_min), Int(tmv.tm_sec))
        return fractional ? base + String(format: ".%03dZ", millis) : base + "Z"
    }
}
