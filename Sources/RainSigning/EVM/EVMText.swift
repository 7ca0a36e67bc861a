import RainCore
import RainCrypto

/// How EVM values read in a summary: addresses in EIP-55, amounts with every digit, times in UTC.
enum EVMText {
    /// `0x` and the 40 digits in EIP-55 case.
    static func address(_ bytes: [UInt8]) -> String {
        let hex = Hex.encode(bytes)
        return EthereumAddress.checksummed(hex) ?? "0x" + hex
    }

    /// `0x` and lowercase hex.
    static func hex(_ bytes: [UInt8]) -> String { "0x" + Hex.encode(bytes) }

    /// "1.5 ETH": integer units shifted by `decimals`, with the unit.
    static func amount(_ value: UInt256, decimals: Int, unit: String) -> String {
        "\(AmountText.decimal(value.description, decimals: decimals)) \(unit)"
    }

    /// "1.5 gwei": a per-gas price.
    static func gwei(_ wei: UInt256) -> String { amount(wei, decimals: 9, unit: "gwei") }

    /// The last second of year 9999: later deadlines are shown as never reached.
    private static let lastShownSecond: UInt64 = 253_402_300_799

    /// A Unix time as "2024-06-10 06:13:20 UTC (1718000000)"; beyond year 9999, "never (…)".
    static func time(_ seconds: UInt256) -> String {
        guard let value = seconds.uint64, value <= lastShownSecond else {
            return "never in practice (\(seconds), beyond year 9999)"
        }
        let days = Int64(value / 86_400)
        let rest = Int(value % 86_400)
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        func two(_ number: Int) -> String { number < 10 ? "0\(number)" : "\(number)" }
        let year4 = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(year4)-\(two(month))-\(two(day)) \(two(rest / 3600)):\(two(rest / 60 % 60)):\(two(rest % 60)) UTC (\(value))"
    }

    /// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`, https://howardhinnant.github.io/date_algorithms.html).
    private static func civilDate(daysSinceEpoch: Int64) -> (Int, Int, Int) {
        let z = daysSinceEpoch + 719_468
        let era = z / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }
}
