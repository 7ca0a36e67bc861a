import Dispatch
import Foundation
import RainAccess
import RainConfig
import RainCore
import RainDevice
import RainKeyStore
import RainTestSupport
import Synchronization
import Testing

@testable import RainDaemon

@Suite struct StorageGateTests {
    static func locked() -> RainError {
        RainError(.provider, "the keyring is locked (test)", details: RainError.Details(reason: "keyring_locked"))
    }

    /// A retry on a manual clock whose tries fail until `opensAfter` tries, counting what it sees.
    final class Probe: Sendable {
        let clock = ManualClock()
        let queue = DispatchQueue(label: "test.storage-retry")
        let attempts = Mutex(0)
        let running = Mutex((now: 0, most: 0))
        let reasons = Mutex<[String]>([])
        let opened = Mutex<[String]>([])
        /// Held by a try while it runs, when set: the test decides when the try ends.
        let hold = Mutex<DispatchSemaphore?>(nil)
        let entered = DispatchSemaphore(value: 0)
        let opensAfter: Int

        init(opensAfter: Int = .max) { self.opensAfter = opensAfter }

        func makeRetry() -> StorageRetry<String> {
            StorageRetry(
                clock: clock, queue: queue,
                open: { () throws(RainError) -> String in
                    let n = self.attempts.withLock { n -> Int in
                        n += 1
                        return n
                    }
                    self.running.withLock { r in
                        r.now += 1
                        r.most = max(r.most, r.now)
                    }
                    defer { self.running.withLock { $0.now -= 1 } }
                    self.entered.signal()
                    self.hold.withLock { $0 }?.wait()
                    if n < self.opensAfter { throw StorageGateTests.locked() }
                    return "opened"
                },
                onFailure: { error in self.reasons.withLock { $0.append(error.details.reason ?? "") } },
                onOpen: { value in self.opened.withLock { $0.append(value) } })
        }

        /// Tries started so far, once the queue has run what it was given: twice, because a try
        /// that ends may queue the next one (the first sync returns only after it has).
        var tries: Int {
            queue.sync {}
            queue.sync {}
            return attempts.withLock { $0 }
        }
    }

    @Test func anUnavailableProviderIsRetriedOnTheClockUntilItOpens() {
        let probe = Probe(opensAfter: 4)
        let retry = probe.makeRetry()
        retry.start(lastTryStart: probe.clock.monotonic)
        #expect(probe.tries == 0)
        for expected in 1...4 {
            probe.clock.advance(by: StorageRetry<String>.defaultInterval - .milliseconds(1))
            #expect(probe.tries == expected - 1)
            probe.clock.advance(by: .milliseconds(1))
            #expect(probe.tries == expected)
        }
        #expect(probe.reasons.withLock { $0 } == ["keyring_locked", "keyring_locked", "keyring_locked"])
        #expect(probe.opened.withLock { $0 } == ["opened"])
        // Opened: nothing more is tried, whatever arrives.
        retry.callArrived()
        probe.clock.advance(by: .seconds(30))
        #expect(probe.tries == 4)
        #expect(probe.clock.pendingTimerCount == 0)
    }

    @Test func aCallTriesAtOnceButNeverTwiceWithinASecond() {
        let probe = Probe()
        let retry = probe.makeRetry()
        // The daemon's own first try has just failed.
        retry.start(lastTryStart: probe.clock.monotonic)
        // A call half a second later: the next try waits for the second to be over, not for the round.
        probe.clock.advance(by: .milliseconds(500))
        retry.callArrived()
        #expect(probe.tries == 0)
        probe.clock.advance(by: .milliseconds(499))
        #expect(probe.tries == 0)
        probe.clock.advance(by: .milliseconds(1))
        #expect(probe.tries == 1)

        // Two seconds later a call tries at once, without the clock moving.
        probe.clock.advance(by: .seconds(2))
        #expect(probe.tries == 1)
        retry.callArrived()
        #expect(probe.tries == 2)
        // A burst of calls right after: one try, a second after the last one.
        for _ in 0..<5 { retry.callArrived() }
        #expect(probe.tries == 2)
        probe.clock.advance(by: .milliseconds(999))
        #expect(probe.tries == 2)
        probe.clock.advance(by: .milliseconds(1))
        #expect(probe.tries == 3)
        // No more calls: the next try is a round later.
        probe.clock.advance(by: StorageRetry<String>.defaultInterval - .milliseconds(1))
        #expect(probe.tries == 3)
        probe.clock.advance(by: .milliseconds(1))
        #expect(probe.tries == 4)
        retry.stop()
    }

    @Test func aCallDuringATryGetsTheNextTryAfterTheSpacingAndTriesNeverOverlap() throws {
        let probe = Probe()
        let gate = DispatchSemaphore(value: 0)
        probe.hold.withLock { $0 = gate }
        // Never leave a try blocked, whatever fails first.
        defer { gate.signal() }
        let retry = probe.makeRetry()
        retry.start(lastTryStart: probe.clock.monotonic - .seconds(5))
        retry.callArrived()
        try #require(probe.entered.wait(timeout: .now() + .seconds(2)) == .success, "no try started")
        // While the try runs (say the keyring takes its time): more calls, and time passes.
        for _ in 0..<3 { retry.callArrived() }
        probe.clock.advance(by: .seconds(2))
        probe.hold.withLock { $0 = nil }
        gate.signal()
        // The try failed two seconds after it began: the waiting call's try starts at once.
        #expect(probe.tries == 2)
        #expect(probe.running.withLock { $0.most } == 1)
        retry.stop()
        probe.clock.advance(by: .seconds(30))
        #expect(probe.tries == 2)
    }

    @Test func aStoppedRetryNeitherTriesNorOpens() throws {
        let probe = Probe(opensAfter: 1)
        let gate = DispatchSemaphore(value: 0)
        probe.hold.withLock { $0 = gate }
        // Never leave a try blocked, whatever fails first.
        defer { gate.signal() }
        let retry = probe.makeRetry()
        retry.start(lastTryStart: probe.clock.monotonic - .seconds(5))
        retry.callArrived()
        try #require(probe.entered.wait(timeout: .now() + .seconds(2)) == .success, "no try started")
        // The daemon stops while a try that will succeed is under way.
        retry.stop()
        gate.signal()
        #expect(probe.tries == 1)
        #expect(probe.opened.withLock { $0 }.isEmpty)
        retry.callArrived()
        probe.clock.advance(by: .seconds(30))
        #expect(probe.tries == 1)
    }

    @Test func onlyAProviderThatCannotBeUsedNowIsWaitedFor() {
        #expect(StorageGate.isWaitable(Self.locked()))
        #expect(
            StorageGate.isWaitable(
                RainError(.provider, "no TPM", details: RainError.Details(reason: "tpm_unavailable"))))
        // A provider this build lacks never becomes usable: the start fails instead.
        #expect(
            !StorageGate.isWaitable(
                RainError(.provider, "not built", details: RainError.Details(reason: "provider_not_built"))))
        #expect(!StorageGate.isWaitable(RainError.invalid("bad mode", field: "path")))
    }

    @Test func callsWhileLoadingAreRefusedWithTheProvidersReason() {
        let gate = Self.gate()
        gate.wait(Self.locked())
        let refusal = gate.refusal()
        #expect(refusal.code == .provider)
        #expect(refusal.details.reason == "keyring_locked")
    }

    @Test func callsDuringALiveMigrationAreRefusedAsStorageMigrating() {
        let refusal = StorageGate.migrating(to: .tpm2)
        #expect(refusal.code == .provider)
        #expect(refusal.details.reason == "storage_migrating")
    }

    /// A gate over a state directory whose keys never opened.
    static func gate() -> StorageGate {
        let setup = DeviceSetup(
            options: DaemonOptions(), config: DaemonConfig(), policy: GuardedSettings(), configFile: nil, stateDirectory: "/tmp",
            clock: ManualClock(),
            logger: Logger(label: "test", minimumLevel: .error))
        return StorageGate(setup: setup, provider: FileKeyProvider(stateDirectory: "/tmp"))
    }
}
