import Glibc
import RainCore

/// A reading of `CLOCK_MONOTONIC` in nanoseconds: the event loop's time.
///
/// The loop reads the clock twice a turn, so the reading must be cheap. `ContinuousClock.Instant`
/// is not (its optional is copied, tested and destroyed through the standard library's value
/// witnesses, and `ContinuousClock.now` goes through `swift_get_time`); this is an `Int64` read
/// with `clock_gettime`, as the C floor reads it (`scripts/bench --profile`).
struct LoopInstant: Comparable, Sendable {
    /// Nanoseconds since an unspecified start (the boot, on Linux).
    var nanoseconds: Int64

    /// The clock now.
    static var now: LoopInstant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return LoopInstant(nanoseconds: Int64(ts.tv_sec) &* 1_000_000_000 &+ Int64(ts.tv_nsec))
    }

    static func < (a: LoopInstant, b: LoopInstant) -> Bool { a.nanoseconds < b.nanoseconds }

    /// `instant` moved by `duration`, saturating at the ends of `Int64`.
    static func + (instant: LoopInstant, duration: Duration) -> LoopInstant {
        let (sum, overflow) = instant.nanoseconds.addingReportingOverflow(duration.clampedNanoseconds)
        guard overflow else { return LoopInstant(nanoseconds: sum) }
        return LoopInstant(nanoseconds: duration < .zero ? .min : .max)
    }

    /// The time from `b` to `a`.
    static func - (a: LoopInstant, b: LoopInstant) -> Duration {
        let (difference, overflow) = a.nanoseconds.subtractingReportingOverflow(b.nanoseconds)
        return .nanoseconds(overflow ? (a < b ? Int64.min : Int64.max) : difference)
    }
}
