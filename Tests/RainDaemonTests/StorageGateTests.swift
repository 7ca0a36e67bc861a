import Dispatch
import Foundation
import RainCore
import RainDevice
import RainKeyStore
import Synchronization
import Testing

@testable import RainDaemon

/// A clock whose sleeps return at once and are counted: the retry loop's waits, without waiting.
final class CountingSleepClock: RainClock {
    let sleeps = Mutex<[Duration]>([])
    var now: Date { Date(timeIntervalSince1970: 1_800_000_000) }
    var monotonic: Duration { .zero }
    struct NoTimer: RainTimer { func cancel() {} }
    func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) -> any RainTimer {
        NoTimer()
    }
    func sleep(for delay: Duration) async { sleeps.withLock { $0.append(delay) } }
}

@Suite struct StorageGateTests {
    static func locked() -> RainError {
        RainError(.provider, "the keyring is locked (test)", details: RainError.Details(reason: "keyring_locked"))
    }

    @Test func anUnavailableProviderIsRetriedOnTheClockUntilItOpens() async {
        let clock = CountingSleepClock()
        let attempts = Mutex(0)
        let reasons = Mutex<[String]>([])
        let value = await StorageGate.retrying(
            clock: clock, interval: StorageGate.retryInterval,
            open: { () async throws(RainError) -> String in
                let n = attempts.withLock { n -> Int in
                    n += 1
                    return n
                }
                if n < 4 { throw Self.locked() }
                return "opened"
            },
            onFailure: { error in reasons.withLock { $0.append(error.details.reason ?? "") } })
        #expect(value == "opened")
        #expect(attempts.withLock { $0 } == 4)
        #expect(reasons.withLock { $0 } == ["keyring_locked", "keyring_locked", "keyring_locked"])
        #expect(clock.sleeps.withLock { $0 } == Array(repeating: StorageGate.retryInterval, count: 3))
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
            options: DaemonOptions(), config: DaemonConfig(), stateDirectory: "/tmp", clock: CountingSleepClock(),
            logger: Logger(label: "test", minimumLevel: .error))
        return StorageGate(setup: setup, provider: FileKeyProvider(stateDirectory: "/tmp"))
    }
}
