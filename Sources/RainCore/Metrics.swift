import Synchronization

/// The values of a metric's labels: none, one or two, in the order of its label names. Two
/// inline strings, not an array, so that counting a call allocates nothing.
public struct MetricLabels: Hashable, Sendable, Comparable {
    /// The first label's value ("" when the metric has no label).
    public var first: String
    /// The second label's value ("" when the metric has fewer than two).
    public var second: String

    /// The values, in the order of the metric's label names.
    public init(_ first: String = "", _ second: String = "") {
        self.first = first
        self.second = second
    }

    public static func < (a: MetricLabels, b: MetricLabels) -> Bool {
        (a.first, a.second) < (b.first, b.second)
    }
}

/// One metric family of a `MetricsRegistry`: its `# HELP` and `# TYPE` lines and its samples in
/// the Prometheus text exposition format 0.0.4.
public protocol MetricFamily: Sendable {
    /// The metric's name (`rainwallet_authority_calls_total`).
    var name: String { get }
    /// Appends the family's lines to `text`.
    func render(into text: inout String)
}

/// A counter by label values: only goes up, from 0 when the process starts. Label values must
/// come from a closed set (method names, error codes, outcomes), never from a request.
public final class MetricCounter: MetricFamily {
    public let name: String
    let help: String
    let labelNames: [String]
    private let values = Mutex<[MetricLabels: UInt64]>([:])

    /// - Parameters:
    ///   - name: the metric's name, ending in `_total`.
    ///   - help: one line saying what it counts.
    ///   - labelNames: at most two label names.
    ///   - initial: label values shown at 0 before anything is counted, so a rate can be taken
    ///     from the first scrape.
    public init(_ name: String, help: String, labelNames: [String] = [], initial: [MetricLabels] = []) {
        precondition(labelNames.count <= 2, "a metric has at most two labels")
        self.name = name
        self.help = help
        self.labelNames = labelNames
        values.withLock { v in for labels in initial { v[labels] = 0 } }
    }

    /// Adds `amount` to the counter of `labels`.
    public func increment(_ labels: MetricLabels = MetricLabels(), by amount: UInt64 = 1) {
        values.withLock { $0[labels, default: 0] &+= amount }
    }

    /// The counter of `labels` (0 when never counted).
    public func value(_ labels: MetricLabels = MetricLabels()) -> UInt64 {
        values.withLock { $0[labels] ?? 0 }
    }

    public func render(into text: inout String) {
        let snapshot = values.withLock { $0 }.sorted { $0.key < $1.key }
        MetricText.header(name, help: help, type: "counter", into: &text)
        if snapshot.isEmpty && labelNames.isEmpty { MetricText.sample(name, "", value: "0", into: &text) }
        for (labels, value) in snapshot {
            MetricText.sample(name, MetricText.labels(labelNames, labels), value: String(value), into: &text)
        }
    }
}

/// A gauge: a value that goes up and down, set by the code or read when scraped.
public final class MetricGauge: MetricFamily {
    public let name: String
    let help: String
    private let value: Mutex<Double>
    private let read: (@Sendable () -> Double)?

    /// A gauge the code sets (`set`, `add`).
    public init(_ name: String, help: String) {
        self.name = name
        self.help = help
        self.value = Mutex(0)
        self.read = nil
    }

    /// A gauge read when scraped: `read` runs on the scraping thread and must be cheap.
    public init(_ name: String, help: String, read: @escaping @Sendable () -> Double) {
        self.name = name
        self.help = help
        self.value = Mutex(0)
        self.read = read
    }

    /// Sets the value.
    public func set(_ newValue: Double) { value.withLock { $0 = newValue } }

    /// Adds `amount` (negative to subtract).
    public func add(_ amount: Double) { value.withLock { $0 += amount } }

    /// The value now.
    public var current: Double { read?() ?? value.withLock { $0 } }

    public func render(into text: inout String) {
        MetricText.header(name, help: help, type: "gauge", into: &text)
        MetricText.sample(name, "", value: MetricText.number(current), into: &text)
    }
}

/// A counter read when scraped, from a count kept elsewhere (a store's failed operations).
public final class MetricCounterFunction: MetricFamily {
    public let name: String
    let help: String
    private let read: @Sendable () -> UInt64

    /// - Parameter read: runs on the scraping thread; must be cheap and never go down.
    public init(_ name: String, help: String, read: @escaping @Sendable () -> UInt64) {
        self.name = name
        self.help = help
        self.read = read
    }

    public func render(into text: inout String) {
        MetricText.header(name, help: help, type: "counter", into: &text)
        MetricText.sample(name, "", value: String(read()), into: &text)
    }
}

/// A histogram by label values, with fixed bucket bounds: `_bucket{le=…}` lines (cumulative, the
/// last `+Inf`), `_sum` and `_count`.
public final class MetricHistogram: MetricFamily {
    struct Series {
        /// Observations per bucket (not cumulative; the last is above every bound).
        var counts: [UInt64]
        var sum: Double = 0
    }

    public let name: String
    let help: String
    let labelNames: [String]
    /// The upper bounds, ascending, without `+Inf`.
    public let bounds: [Double]
    private let series = Mutex<[MetricLabels: Series]>([:])

    /// Seconds from a tenth of a millisecond to ten seconds: a local call, a store write, a code
    /// delivery to an outside provider.
    public static let latencyBounds: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    /// - Parameters:
    ///   - name: the metric's name (`…_seconds` for times).
    ///   - help: one line saying what it measures.
    ///   - labelNames: at most two label names (never `le`).
    ///   - bounds: the buckets' upper bounds, ascending.
    public init(_ name: String, help: String, labelNames: [String] = [], bounds: [Double] = MetricHistogram.latencyBounds) {
        precondition(labelNames.count <= 2 && !labelNames.contains("le"), "at most two labels, never le")
        precondition(zip(bounds, bounds.dropFirst()).allSatisfy { $0 < $1 }, "bucket bounds ascend")
        self.name = name
        self.help = help
        self.labelNames = labelNames
        self.bounds = bounds
    }

    /// Records one observation of `value` for `labels`.
    public func observe(_ value: Double, _ labels: MetricLabels = MetricLabels()) {
        // The first bucket whose bound holds the value; past the last bound, the +Inf bucket.
        var index = bounds.count
        for (i, bound) in bounds.enumerated() where value <= bound {
            index = i
            break
        }
        let buckets = bounds.count + 1
        series.withLock { s in
            s[labels, default: Series(counts: Array(repeating: 0, count: buckets))].counts[index] &+= 1
            s[labels]?.sum += value
        }
    }

    /// Records a duration, in seconds.
    public func observe(_ duration: Duration, _ labels: MetricLabels = MetricLabels()) {
        let (seconds, attoseconds) = duration.components
        observe(Double(seconds) + Double(attoseconds) / 1e18, labels)
    }

    /// How many observations `labels` has.
    public func count(_ labels: MetricLabels = MetricLabels()) -> UInt64 {
        series.withLock { $0[labels]?.counts.reduce(0, &+) ?? 0 }
    }

    public func render(into text: inout String) {
        let snapshot = series.withLock { $0 }.sorted { $0.key < $1.key }
        MetricText.header(name, help: help, type: "histogram", into: &text)
        for (labels, s) in snapshot {
            let base = MetricText.labelPairs(labelNames, labels)
            var cumulative: UInt64 = 0
            for (i, count) in s.counts.enumerated() {
                cumulative &+= count
                let le = i < bounds.count ? MetricText.number(bounds[i]) : "+Inf"
                let pairs = base + (base.isEmpty ? "" : ",") + "le=\"\(le)\""
                MetricText.sample(name + "_bucket", "{\(pairs)}", value: String(cumulative), into: &text)
            }
            let braces = base.isEmpty ? "" : "{\(base)}"
            MetricText.sample(name + "_sum", braces, value: MetricText.number(s.sum), into: &text)
            MetricText.sample(name + "_count", braces, value: String(cumulative), into: &text)
        }
    }
}

/// The metric families one process exposes, rendered together for `GET /metrics`.
public final class MetricsRegistry: Sendable {
    private let families = Mutex<[any MetricFamily]>([])

    public init() {}

    /// Adds families; a name already registered is ignored (its first family stays).
    public func register(_ new: [any MetricFamily]) {
        families.withLock { f in
            for family in new where !f.contains(where: { $0.name == family.name }) { f.append(family) }
        }
    }

    /// Every family in the text exposition format 0.0.4 (`text/plain; version=0.0.4`).
    public func exposition() -> String {
        let snapshot = families.withLock { $0 }
        var text = ""
        for family in snapshot { family.render(into: &text) }
        return text
    }

    /// The content type of `exposition()`.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"
}

/// A call served, by method and outcome (`ok` or the `RAIN_…` code), and how long it took: what a
/// route table reports for each call it answers.
public final class CallMetrics: Sendable {
    /// `<prefix>_calls_total{method,code}`.
    public let calls: MetricCounter
    /// `<prefix>_call_duration_seconds{method}`.
    public let duration: MetricHistogram

    /// - Parameter prefix: `rainwallet_authority` or `rainwallet_device`.
    public init(prefix: String) {
        calls = MetricCounter(
            "\(prefix)_calls_total", help: "Calls answered, by method and outcome (ok or the RAIN_ error code).",
            labelNames: ["method", "code"])
        duration = MetricHistogram(
            "\(prefix)_call_duration_seconds", help: "Time from a call's arrival to its answer, by method.",
            labelNames: ["method"])
    }

    /// Counts one answered call.
    /// - Parameters:
    ///   - method: the method's name, from the route (a closed set; an unknown method is `unknown`).
    ///   - code: 0 for success, else the `RAIN_…` code's number.
    ///   - duration: from the request's dispatch to its answer.
    public func record(method: String, code: UInt32, duration elapsed: Duration) {
        calls.increment(MetricLabels(method, code == 0 ? "ok" : RainError.Code(code).description))
        duration.observe(elapsed, MetricLabels(method))
    }

    /// The families, for a registry.
    public var families: [any MetricFamily] { [calls, duration] }
}

/// The text exposition format's pieces.
enum MetricText {
    static func header(_ name: String, help: String, type: String, into text: inout String) {
        text += "# HELP \(name) \(escapeHelp(help))\n# TYPE \(name) \(type)\n"
    }

    static func sample(_ name: String, _ labels: String, value: String, into text: inout String) {
        text += name
        text += labels
        text += " "
        text += value
        text += "\n"
    }

    /// `{a="x",b="y"}`, or "" without labels.
    static func labels(_ names: [String], _ values: MetricLabels) -> String {
        let pairs = labelPairs(names, values)
        return pairs.isEmpty ? "" : "{\(pairs)}"
    }

    /// `a="x",b="y"`, without braces.
    static func labelPairs(_ names: [String], _ values: MetricLabels) -> String {
        zip(names, [values.first, values.second]).map { "\($0)=\"\(escapeLabel($1))\"" }.joined(separator: ",")
    }

    /// A label value: backslash, double quote and line feed escaped, as the format requires.
    static func escapeLabel(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == 0x5C || $0 == 0x22 || $0 == 0x0A }) else { return value }
        var out = ""
        for c in value.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// A HELP text: backslash and line feed escaped.
    static func escapeHelp(_ value: String) -> String {
        value.replacingBackslashAndNewline()
    }

    /// A sample value: Swift's shortest round-tripping form, and the format's spellings of the
    /// infinities and NaN.
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Inf" : "+Inf" }
        return value.description
    }
}

extension String {
    fileprivate func replacingBackslashAndNewline() -> String {
        var out = ""
        for c in unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
