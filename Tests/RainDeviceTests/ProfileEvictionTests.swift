import Foundation
import RainConfig
import RainCore
import RainTestSupport
import RainTransport
import Testing

@testable import RainDevice

/// A flood of invented profile names must not grow the daemon for ever, a profile per name.
/// At most 32 profiles the config does not name are held; only idle ones are evicted.
@Suite struct ProfileEvictionTests {
    static let limit = ProfileEntries.maximumUnnamedProfiles

    /// Admits one call for `name`, waits for the profile's restore, and ends the call.
    static func touch(_ f: Fixture, _ name: String) async throws {
        let lease = try f.service.profiles.admit(name)
        await f.service.profiles.entry(name).session.restore()
        withExtendedLifetime(lease) {}
    }

    static func config(named: [String]) -> DaemonConfig {
        var config = DaemonConfig()
        for name in named { config.profiles[name] = .defaults(for: name) }
        return config
    }

    @Test func aThousandInventedNamesHoldAtMost32ProfilesBesidesTheNamedOnes() async throws {
        let f = try await Fixture(config: Self.config(named: ["named-a", "named-b"]))
        for name in ["default", "named-a", "named-b"] { try await Self.touch(f, name) }
        for i in 0..<1000 { try await Self.touch(f, "flood-\(i)") }
        let held = f.service.profiles.heldNames
        #expect(held.count <= Self.limit + 3, "\(held.count) profiles held")
        #expect(held.isSuperset(of: ["default", "named-a", "named-b"]), "named profiles are never evicted")
        #expect(held.filter { $0.hasPrefix("flood-") }.count == Self.limit)
        #expect(held.contains("flood-999"), "the newest stays")
    }

    @Test func profilesWithASessionAWatcherACodeOrACallInFlightAreNeverEvicted() async throws {
        let f = try await Fixture()
        let profiles = f.service.profiles
        // A session.
        _ = try await f.login("with-session")
        let sessionActor = profiles.entry("with-session").session
        // A watcher.
        try await Self.touch(f, "with-watcher")
        profiles.entry("with-watcher").runtime.addWatcher(connection: ConnectionID(rawValue: 7), requestID: 1) { _ in }
        // A login code sent and not confirmed yet.
        let pending = profiles.entry("with-code").session
        _ = try await pending.sendLoginCode(.email("pending@example.com"))
        let code = try #require(f.sender.lastCode)
        // A call in flight.
        let busy = try profiles.admit("in-flight")
        await profiles.entry("in-flight").session.restore()

        for i in 0..<500 { try await Self.touch(f, "flood-\(i)") }

        let held = profiles.heldNames
        #expect(held.isSuperset(of: ["with-session", "with-watcher", "with-code", "in-flight"]), "\(held.sorted())")
        #expect(held.count <= Self.limit + 1)
        #expect(profiles.entry("with-session").session === sessionActor)
        #expect(profiles.entry("with-session").runtime.snapshot().authState == .authenticated)
        #expect(profiles.entry("with-watcher").runtime.watcherCount == 1)
        let confirmed = try await profiles.entry("with-code").session.confirmLoginCode(code)
        #expect(confirmed.isAccountCreated, "the pending code still confirms on the same profile")
        withExtendedLifetime(busy) {}
    }

    @Test func anExpiredCodeNoLongerPinsItsProfile() async throws {
        let f = try await Fixture()
        let profiles = f.service.profiles
        _ = try await profiles.entry("stale-code").session.sendLoginCode(.email("stale@example.com"))
        #expect(!profiles.entry("stale-code").runtime.isEvictable)
        f.clock.advance(by: .seconds(301))
        #expect(profiles.entry("stale-code").runtime.isEvictable)
    }

    @Test func when32UnnamedProfilesAreInUseANewNameIsRefusedWithRAIN302() async throws {
        let f = try await Fixture(config: Self.config(named: ["named"]))
        let profiles = f.service.profiles
        for i in 0..<Self.limit {
            try await Self.touch(f, "watched-\(i)")
            profiles.entry("watched-\(i)").runtime.addWatcher(connection: ConnectionID(rawValue: UInt64(100 + i)), requestID: 1) {
                _ in
            }
        }
        let refused = #expect(throws: RainError.self) { _ = try profiles.admit("one-more") }
        #expect(refused?.code == .refused)
        #expect(refused?.details.reason == "too_many_profiles")
        #expect(!profiles.heldNames.contains("one-more"))
        // Named profiles and default are not limited.
        #expect(try profiles.admit("named") == nil)
        #expect(try profiles.admit("default") == nil)
        // A watcher leaves: its profile may go, and the new name gets its place.
        #expect(profiles.entry("watched-3").runtime.removeWatcher(connection: ConnectionID(rawValue: 103), requestID: 1))
        try await Self.touch(f, "one-more")
        #expect(profiles.heldNames.contains("one-more"))
        #expect(profiles.heldNames.filter { $0.hasPrefix("watched-") }.count == Self.limit - 1)
    }
}
