import Foundation
import RainAccess
import RainAuthorityAPI
import RainConfig
import RainCore
import RainTestSupport
import RainWire
import Testing

@testable import RainDevice

/// A client's session policy (`Profile/Configure`): checked like the config file's keys, the config
/// file winning, applied to the profile's snapshot and refresh timer, and only from the profile's
/// owner app.
@Suite struct SessionPolicyConfigurationTests {
    static func configure(
        _ f: Fixture, _ fields: SessionPolicy, profile: String = "default"
    ) async throws(RainError) -> ConfigureProfileResponse {
        try await f.service.session(profile: profile).configure(passkeyDomain: "", sessionPolicy: fields)
    }

    @Test(arguments: [
        (SessionPolicy(refreshBufferSeconds: 3601), "sessionPolicy.refreshBufferSeconds"),
        (SessionPolicy(refreshBufferSeconds: -1), "sessionPolicy.refreshBufferSeconds"),
        (SessionPolicy(refreshBufferSeconds: .nan), "sessionPolicy.refreshBufferSeconds"),
        (SessionPolicy(transientRetries: 11), "sessionPolicy.transientRetries"),
        (SessionPolicy(retryInitialDelayMilliseconds: 0), "sessionPolicy.retryInitialDelayMilliseconds"),
        (SessionPolicy(retryInitialDelayMilliseconds: 60001), "sessionPolicy.retryInitialDelayMilliseconds"),
        (SessionPolicy(retryMaxDelayMilliseconds: 600_001), "sessionPolicy.retryMaxDelayMilliseconds"),
        (
            SessionPolicy(retryInitialDelayMilliseconds: 5000, retryMaxDelayMilliseconds: 4000),
            "sessionPolicy.retryMaxDelayMilliseconds"
        ),
        (SessionPolicy(activeThresholdSeconds: 3601), "sessionPolicy.activeThresholdSeconds"),
        (SessionPolicy(restoreTimeoutSeconds: 61), "sessionPolicy.restoreTimeoutSeconds"),
    ])
    func outOfRangeValuesAreRefusedNamingTheFieldAndNothingChanges(fields: SessionPolicy, field: String) async throws {
        let f = try await Fixture()
        let before = f.service.entry("default").runtime.sessionPolicy
        do throws(RainError) {
            _ = try await Self.configure(f, SessionPolicy(isAutoRefreshEnabled: false, transientRetries: 3).merging(fields))
            Issue.record("accepted \(fields)")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.details.field == field, "\(error.message)")
            #expect(error.message.contains(field), "\(error.message)")
        }
        #expect(f.service.entry("default").runtime.sessionPolicy == before, "a refused policy applies nothing")
    }

    @Test func valuesInRangeApplyAndUnsetOnesKeepTheirValue() async throws {
        let f = try await Fixture()
        let r = try await Self.configure(f, SessionPolicy(refreshBufferSeconds: 120, transientRetries: 0))
        var expected = RainWalletSessionPolicy()
        expected.refreshBuffer = .seconds(120)
        expected.transientRetries = 0
        #expect(f.service.entry("default").runtime.sessionPolicy == expected)
        #expect(r.sessionPolicy == SessionPolicy(expected))
        #expect(r.configKeys.isEmpty)
        // A later call sets one more value; the earlier ones stay.
        _ = try await Self.configure(f, SessionPolicy(isAutoRefreshEnabled: false))
        expected.isAutoRefreshEnabled = false
        #expect(f.service.entry("default").runtime.sessionPolicy == expected)
    }

    @Test func theConfigFileWinsForTheKeysItSets() async throws {
        let json = #"{"profiles": {"default": {"sessionPolicy": {"refreshBufferSeconds": 90, "autoRefresh": true}}}}"#
        let config = try DaemonConfig.parse(Data(json.utf8))
        #expect(config.settings(for: "default").sessionPolicyKeys == ["refreshBufferSeconds", "autoRefresh"])
        let f = try await Fixture(config: config)
        let r = try await Self.configure(
            f, SessionPolicy(refreshBufferSeconds: 10, isAutoRefreshEnabled: false, transientRetries: 5))
        let policy = f.service.entry("default").runtime.sessionPolicy
        #expect(policy.refreshBuffer == .seconds(90))
        #expect(policy.isAutoRefreshEnabled)
        #expect(policy.transientRetries == 5, "a key the config leaves unset is the client's")
        #expect(r.configKeys == ["autoRefresh", "refreshBufferSeconds"])
        #expect(r.sessionPolicy?.refreshBufferSeconds == 90)
        // The client's values are still checked, even for a key the config sets.
        await #expect(throws: RainError.self) {
            _ = try await Self.configure(f, SessionPolicy(refreshBufferSeconds: 4000))
        }
    }

    @Test func aClientRetryCapBelowTheConfigsInitialDelayIsRefused() async throws {
        let json = #"{"profiles": {"default": {"sessionPolicy": {"retryInitialDelayMilliseconds": 3000}}}}"#
        let f = try await Fixture(config: try DaemonConfig.parse(Data(json.utf8)))
        do throws(RainError) {
            _ = try await Self.configure(
                f, SessionPolicy(retryInitialDelayMilliseconds: 100, retryMaxDelayMilliseconds: 1000))
            Issue.record("accepted a cap below the config's initial delay")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.details.field == "sessionPolicy.retryMaxDelayMilliseconds", "\(error.message)")
        }
    }

    @Test func thePolicyTakesEffectOnTheLiveSession() async throws {
        let f = try await Fixture()
        _ = try await f.login()
        let session = f.service.session(profile: "default")
        let stored = try #require(await session.session)
        let scheduler = await session.scheduler
        #expect(scheduler.due(for: stored) == stored.expiresAt.adding(.zero - .seconds(60)))
        _ = try await Self.configure(f, SessionPolicy(refreshBufferSeconds: 200, activeThresholdSeconds: 100))
        #expect(scheduler.due(for: stored) == stored.expiresAt.adding(.zero - .seconds(200)))
        let runtime = f.service.entry("default").runtime
        f.clock.advance(by: .seconds(900 - 101))
        #expect(runtime.snapshot().hasActiveSession)
        f.clock.advance(by: .seconds(1))  // 100 s left: no longer "active" under the new threshold
        #expect(!runtime.snapshot().hasActiveSession)
        _ = try await Self.configure(f, SessionPolicy(isAutoRefreshEnabled: false))
        #expect(scheduler.due(for: stored) == nil, "auto refresh off: no refresh is scheduled")
        #expect(await session.isScheduled, "the expiry is still watched")
    }

    @Test func onlyTheProfilesOwnerAppMaySetThePolicy() async throws {
        let w = try AppAccessTests.world()
        let owner = AppAccessTests.app("/usr/bin/wallet", hash: 1)
        let other = AppAccessTests.app("/usr/bin/other", hash: 2)
        // Without per-app access (unit tests, a daemon that does not enforce it) anyone may.
        try DeviceService.requireProfileOwner(nil, profile: "default", caller: nil)
        // Nobody owns the profile yet: nobody may.
        #expect(Self.ownerReason(w.access, other) == "not_profile_owner")
        w.prompt.script([nil, nil])
        try await w.access.authorize(profile: "default", context: AppAccessTests.connect(w, 1, owner))
        try await w.access.approve(app: other, profile: "default", context: AppAccessTests.connect(w, 3, owner))
        #expect(Self.ownerReason(w.access, owner) == nil)
        // The second app is approved for the profile, but does not own it.
        #expect(Self.ownerReason(w.access, other) == "not_profile_owner")
        // The owner's path with other content is another app.
        #expect(Self.ownerReason(w.access, AppAccessTests.app("/usr/bin/wallet", hash: 9)) == "not_profile_owner")
    }

    static func ownerReason(_ apps: AppAccess, _ caller: CallerIdentity) -> String? {
        do throws(RainError) {
            try DeviceService.requireProfileOwner(apps, profile: "default", caller: caller)
            return nil
        } catch {
            return error.code == .unauthorized ? error.details.reason : "\(error.code)"
        }
    }
}

extension SessionPolicy {
    /// These fields with `other`'s set ones on top.
    func merging(_ other: SessionPolicy) -> SessionPolicy {
        var m = self
        m.refreshBufferSeconds = other.refreshBufferSeconds ?? m.refreshBufferSeconds
        m.isAutoRefreshEnabled = other.isAutoRefreshEnabled ?? m.isAutoRefreshEnabled
        m.transientRetries = other.transientRetries ?? m.transientRetries
        m.retryInitialDelayMilliseconds = other.retryInitialDelayMilliseconds ?? m.retryInitialDelayMilliseconds
        m.retryMaxDelayMilliseconds = other.retryMaxDelayMilliseconds ?? m.retryMaxDelayMilliseconds
        m.activeThresholdSeconds = other.activeThresholdSeconds ?? m.activeThresholdSeconds
        m.restoreTimeoutSeconds = other.restoreTimeoutSeconds ?? m.restoreTimeoutSeconds
        return m
    }
}
