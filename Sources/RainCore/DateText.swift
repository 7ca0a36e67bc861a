import FoundationEssentials
import Glibc

/// Dates written as text in the fixed layouts the project prints, without Foundation's
/// `DateFormatter` and `Date.FormatStyle`, which link ICU and its data into every binary.
package enum DateText {
    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// An RFC 5322 date in UTC with English names, `Wed, 02 Dec 2026 11:41:37 +0000`: what a
    /// `DateFormatter` with the `en_US_POSIX` locale and the format
    /// `EEE, dd MMM yyyy HH:mm:ss '+0000'` writes.
    package static func rfc5322(_ date: Date) -> String {
        let t = brokenDown(date, local: false)
        return weekdays[Int(t.tm_wday)] + ", " + CFormat.string("%02d", t.tm_mday) + " " + months[Int(t.tm_mon)] + " "
            + CFormat.string("%04d %02d:%02d:%02d", t.tm_year + 1900, t.tm_hour, t.tm_min, t.tm_sec) + " +0000"
    }

    /// The time of day in the local time zone, `6:26:40 PM` (a narrow no-break space before the
    /// AM or PM): what `date.formatted(date: .omitted, time: .standard)` writes in the locale
    /// Foundation uses on Linux (`en_001`, whatever `LANG` says).
    package static func localClockTime(_ date: Date) -> String {
        let t = brokenDown(date, local: true)
        let hour12 = t.tm_hour % 12 == 0 ? 12 : t.tm_hour % 12
        return CFormat.string("%d:%02d:%02d", hour12, t.tm_min, t.tm_sec) + "\u{202F}" + (t.tm_hour < 12 ? "AM" : "PM")
    }

    /// The calendar fields of the whole second at or before `date`; for UTC, `date` is first
    /// rounded to the millisecond, as `DateFormatter` hands ICU whole milliseconds.
    private static func brokenDown(_ date: Date, local: Bool) -> tm {
        let interval = date.timeIntervalSince1970
        var seconds = time_t(local ? interval.rounded(.down) : ((interval * 1000).rounded() / 1000).rounded(.down))
        var fields = tm()
        if local { localtime_r(&seconds, &fields) } else { gmtime_r(&seconds, &fields) }
        return fields
    }
}
