/// Lets one line of each event through per interval and counts the ones it holds back, so a flood
/// of refused peers or connections cannot flood the log (loop thread only).
struct LogThrottle {
    /// The shortest time between two lines of one event.
    let interval: Duration
    private var windows: [String: (start: LoopInstant, suppressed: Int)] = [:]

    init(interval: Duration) { self.interval = interval }

    /// Whether a line of `event` may be written at `now`.
    /// - Returns: nil when the line is to be left out (it is counted); otherwise how many lines of
    ///   `event` were left out since the last one written, to report on this one.
    mutating func admit(_ event: String, now: LoopInstant) -> Int? {
        if var window = windows[event], now - window.start < interval {
            window.suppressed += 1
            windows[event] = window
            return nil
        }
        let suppressed = windows[event]?.suppressed ?? 0
        windows[event] = (now, 0)
        return suppressed
    }
}
