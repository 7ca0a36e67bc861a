import Foundation
import Testing

@testable import RainCore

@Suite struct UnixMillisecondsTests {
    @Test(arguments: [Int64(0), 1, -1, 1_780_000_000_123, -62_135_596_800_000, 1 << 53])
    func roundTrips(_ milliseconds: Int64) {
        #expect(Date(unixMilliseconds: milliseconds).unixMilliseconds == milliseconds)
    }

    /// A peer may send any int64; the date it makes must convert back without trapping
    /// (FuzzRequests regression `account-created-at-int64-max`).
    @Test func saturatesAtTheEdgesOfInt64() {
        #expect(Date(unixMilliseconds: .max).unixMilliseconds == .max)
        #expect(Date(unixMilliseconds: .max - 100).unixMilliseconds == .max)
        #expect(Date(unixMilliseconds: .min).unixMilliseconds == .min)
        #expect(Date(timeIntervalSince1970: 1e300).unixMilliseconds == .max)
        #expect(Date(timeIntervalSince1970: -1e300).unixMilliseconds == .min)
        #expect(Date(timeIntervalSince1970: .infinity).unixMilliseconds == .max)
    }
}
