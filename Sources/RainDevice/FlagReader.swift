import RainCore

/// Reads `rainwalletd`'s command-line flags one at a time (both the device and the authority
/// entry points), with RAIN_102 errors that name the flag.
struct FlagReader {
    private let args: [String]
    private var index = 0

    init(_ args: [String]) { self.args = args }

    /// The next flag, or nil at the end.
    mutating func next() -> String? {
        guard index < args.count else { return nil }
        defer { index += 1 }
        return args[index]
    }

    /// The value that follows `flag`.
    mutating func value(of flag: String) throws(RainError) -> String {
        guard index < args.count, !args[index].hasPrefix("--") else {
            throw RainError.invalid("\(flag) needs a value", field: flag)
        }
        defer { index += 1 }
        return args[index]
    }

    /// A number of seconds in `min...max` following `flag`.
    mutating func seconds(of flag: String, min: Double, max: Double) throws(RainError) -> Duration {
        let text = try value(of: flag)
        guard let v = Double(text), v >= min, v <= max else {
            throw RainError.invalid("\(flag) must be a number of seconds from \(min) to \(max)", field: flag)
        }
        return .milliseconds(Int64(v * 1000))
    }

    /// A whole number in `min...max` following `flag`.
    mutating func integer(of flag: String, min: Int, max: Int) throws(RainError) -> Int {
        guard let v = Int(try value(of: flag)), v >= min, v <= max else {
            throw RainError.invalid("\(flag) must be a whole number from \(min) to \(max)", field: flag)
        }
        return v
    }

    /// A log level (`debug`, `info`, `warning`, `error`) following `flag`.
    mutating func logLevel(of flag: String) throws(RainError) -> LogLevel {
        guard let level = ["debug": LogLevel.debug, "info": .info, "warning": .warning, "error": .error][try value(of: flag)]
        else { throw RainError.invalid("\(flag) must be debug, info, warning or error", field: flag) }
        return level
    }
}
