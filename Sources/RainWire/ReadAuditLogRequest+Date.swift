import FoundationEssentials
import RainCore

// The wire counts Unix milliseconds with 0 for "from the start"; callers think in dates.
extension ReadAuditLogRequest {
    /// A request for the entries recorded at or after `since` (all of them when nil).
    public init(since: Date?, isVerifyRequested: Bool = false) {
        self.init(sinceMilliseconds: since?.unixMilliseconds ?? 0, isVerifyRequested: isVerifyRequested)
    }

    /// Only entries recorded at or after it; nil for all.
    public var since: Date? {
        get { sinceMilliseconds == 0 ? nil : Date(unixMilliseconds: sinceMilliseconds) }
        set { sinceMilliseconds = newValue?.unixMilliseconds ?? 0 }
    }
}
