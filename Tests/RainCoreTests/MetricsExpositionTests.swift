import RainCore
import Testing

/// The Prometheus text exposition (format 0.0.4) the registry renders: escaping, counters,
/// gauges and cumulative histogram buckets.
@Suite("Metrics exposition")
struct MetricsExpositionTests {
    func text(_ families: [any MetricFamily]) -> String {
        let registry = MetricsRegistry()
        registry.register(families)
        return registry.exposition()
    }

    @Test("a counter has HELP and TYPE lines and one sample per label set, sorted")
    func counterLines() {
        let counter = MetricCounter("rw_calls_total", help: "Calls.", labelNames: ["method", "code"])
        counter.increment(MetricLabels("b", "ok"))
        counter.increment(MetricLabels("a", "RAIN_302"), by: 2)
        counter.increment(MetricLabels("b", "ok"))
        #expect(
            text([counter]) == """
                # HELP rw_calls_total Calls.
                # TYPE rw_calls_total counter
                rw_calls_total{method="a",code="RAIN_302"} 2
                rw_calls_total{method="b",code="ok"} 2

                """)
    }

    @Test("label values escape backslash, double quote and line feed; HELP escapes backslash and line feed")
    func escaping() {
        let counter = MetricCounter("rw_x_total", help: "a \\ b\nc", labelNames: ["v"])
        counter.increment(MetricLabels("q\"uote\\back\nline"))
        let lines = text([counter]).split(separator: "\n")
        #expect(lines[0] == #"# HELP rw_x_total a \\ b\nc"#)
        #expect(lines[2] == #"rw_x_total{v="q\"uote\\back\nline"} 1"#)
    }

    @Test("a counter without labels shows 0 before anything is counted; initial label sets show 0")
    func zeroes() {
        let plain = MetricCounter("rw_plain_total", help: "P.")
        let labelled = MetricCounter("rw_l_total", help: "L.", labelNames: ["k"], initial: [MetricLabels("x")])
        let out = text([plain, labelled])
        #expect(out.contains("\nrw_plain_total 0\n"))
        #expect(out.contains("\nrw_l_total{k=\"x\"} 0\n"))
    }

    @Test("histogram buckets are cumulative, end with +Inf equal to _count, and _sum adds the values")
    func histogramBuckets() {
        let histogram = MetricHistogram("rw_seconds", help: "S.", labelNames: ["method"], bounds: [0.5, 1, 10])
        for value in [0.25, 0.5, 0.75, 2, 20] { histogram.observe(value, MetricLabels("m")) }
        #expect(
            text([histogram]) == """
                # HELP rw_seconds S.
                # TYPE rw_seconds histogram
                rw_seconds_bucket{method="m",le="0.5"} 2
                rw_seconds_bucket{method="m",le="1.0"} 3
                rw_seconds_bucket{method="m",le="10.0"} 4
                rw_seconds_bucket{method="m",le="+Inf"} 5
                rw_seconds_sum{method="m"} 23.5
                rw_seconds_count{method="m"} 5

                """)
        #expect(histogram.count(MetricLabels("m")) == 5)
    }

    @Test("a duration is observed in seconds")
    func durations() {
        let histogram = MetricHistogram("rw_d_seconds", help: "D.", bounds: [0.001, 0.01])
        histogram.observe(Duration.milliseconds(5))
        #expect(text([histogram]).contains("rw_d_seconds_bucket{le=\"0.01\"} 1\n"))
        #expect(text([histogram]).contains("rw_d_seconds_bucket{le=\"0.001\"} 0\n"))
    }

    @Test("a gauge renders its value, set or read when scraped; a family registered twice appears once")
    func gauges() {
        let set = MetricGauge("rw_set", help: "Set.")
        set.set(3)
        set.add(-1)
        let read = MetricGauge("rw_read", help: "Read.") { 7 }
        let out = text([set, read, MetricGauge("rw_set", help: "Again.")])
        #expect(out.contains("# TYPE rw_set gauge\nrw_set 2.0\n"))
        #expect(out.contains("rw_read 7.0\n"))
        #expect(!out.contains("Again."))
    }

    @Test("CallMetrics counts ok and RAIN codes and times each call")
    func callMetrics() {
        let calls = CallMetrics(prefix: "rw")
        calls.record(method: "/a/B", code: 0, duration: .milliseconds(2))
        calls.record(method: "/a/B", code: 302, duration: .milliseconds(2))
        #expect(calls.calls.value(MetricLabels("/a/B", "ok")) == 1)
        #expect(calls.calls.value(MetricLabels("/a/B", "RAIN_302")) == 1)
        #expect(calls.duration.count(MetricLabels("/a/B")) == 2)
    }
}
