import RainCore
import RainCrypto
import RainSecurityKey
import RainTestSupport
import RainWebAuthn
import Testing

/// What happens while the key blinks: a touch, a cancel, an unplugged key, nobody at all.
@Suite(.serialized) struct SecurityKeyWaitTests {
    /// Starts a make-credential ceremony that waits for a touch, and returns once the key blinks.
    private func startCeremony(_ fixture: SecurityKeyFixture, _ device: SecurityKeyDevice) async throws -> Task<RainError?, Never>
    {
        let task = Task {
            await rainError {
                _ = try await fixture.register(on: device, userID: [1], residentKey: false)
            }
        }
        let key = fixture.key
        let blinking = try await SecurityKeyFixture.blocking { () throws(RainError) in key.waitUntilBlinking() }
        #expect(blinking)
        return task
    }

    @Test func aTouchWhileTheKeyBlinksFinishesTheCeremony() async throws {
        let fixture = try SecurityKeyFixture(touch: .manual)
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        let task = try await startCeremony(fixture, device)
        fixture.key.touch()
        #expect(await task.value == nil)
        #expect(fixture.key.credentialCount == 1)
    }

    @Test func aCancelWhileTheKeyBlinksEndsWithRAIN401() async throws {
        let fixture = try SecurityKeyFixture(touch: .manual)
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        let task = try await startCeremony(fixture, device)
        device.cancel()
        let error = await task.value
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == SecurityKeyFailure.cancelled.rawValue)
        #expect(fixture.key.credentialCount == 0)
    }

    @Test func aKeyUnpluggedWhileItBlinksEndsAsRemoved() async throws {
        let fixture = try SecurityKeyFixture(touch: .manual)
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        let task = try await startCeremony(fixture, device)
        fixture.key.unplug()
        let error = await task.value
        #expect(error?.code == .unavailable)
        #expect(error?.details.reason == SecurityKeyFailure.removed.rawValue)
    }

    @Test func aKeyNobodyTouchesTimesOutWithRAIN401() async throws {
        let fixture = try SecurityKeyFixture(touch: .never, userPresenceTimeout: 0.3)
        defer { fixture.key.detach() }
        let device = try await fixture.open()
        let error = await rainError { _ = try await fixture.register(on: device, userID: [1], residentKey: false) }
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == SecurityKeyFailure.timeout.rawValue)
    }

    @Test func theHostsOwnTimeoutEndsWithRAIN401AndStopsTheBlinking() async throws {
        let fixture = try SecurityKeyFixture(touch: .never)
        defer { fixture.key.detach() }
        let listing = fixture.key.listing
        let device = try await SecurityKeyFixture.blocking { () throws(RainError) in
            guard let info = try SecurityKeys.injected([listing]).first else { throw RainError(.internalError, "not listed") }
            return try SecurityKeyDevice(info, timeoutMilliseconds: 200)
        }
        // libfido2 reports its own deadline as a failed read, like an unplugged key: the device
        // tells the two apart by the time spent.
        let error = await rainError { _ = try await fixture.register(on: device, userID: [1], residentKey: false) }
        #expect(error?.code == .userCancelled)
        #expect(error?.details.reason == SecurityKeyFailure.timeout.rawValue)
        let key = fixture.key
        let stopped = try await SecurityKeyFixture.blocking { () throws(RainError) in key.waitUntilNotBlinking() }
        #expect(stopped)
    }

    @Test func twoKeysBlinkTheFirstTouchWinsAndTheOtherIsCancelled() async throws {
        let first = try SecurityKeyFixture(touch: .manual)
        let second = try SecurityKeyFixture(touch: .manual)
        defer {
            first.key.detach()
            second.key.detach()
        }
        let firstDevice = try await first.open()
        let secondDevice = try await second.open()
        let firstTask = try await startCeremony(first, firstDevice)
        let secondTask = try await startCeremony(second, secondDevice)
        second.key.touch()
        #expect(await secondTask.value == nil)
        // What the daemon's coordinator will do: cancel every key but the one touched.
        firstDevice.cancel()
        #expect(await firstTask.value?.details.reason == SecurityKeyFailure.cancelled.rawValue)
        #expect(first.key.credentialCount == 0)
        #expect(second.key.credentialCount == 1)
    }
}
