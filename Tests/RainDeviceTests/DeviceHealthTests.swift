import Foundation
import RainCore
import Synchronization
import Testing

@testable import RainDevice

/// How the link, the revocation stream and the keys compose into what status shows.
@Suite struct DeviceHealthTests {
    let t0 = Date(unixMilliseconds: 1_000)
    let t1 = Date(unixMilliseconds: 2_000)
    let t2 = Date(unixMilliseconds: 3_000)

    @Test func refreshesThatFailWhileTheLinkAnswersShowItDegradedUntilOneWorks() {
        let health = DeviceHealth(now: t0, link: AuthorityLinkState(phase: .connected, since: t0))
        health.refreshFailed("the device key could not sign", now: t1)
        health.refreshFailed("again", now: t2)
        #expect(health.authorityLink?.phase == .degraded)
        #expect(health.authorityLink?.lastError == "refreshes fail: again")
        #expect(health.authorityLink?.since == t1, "since the first failure of the run")
        health.refreshWorked()
        #expect(health.authorityLink == AuthorityLinkState(phase: .connected, since: t0))
    }

    @Test func anUnreachableLinkKeepsItsOwnErrorOverFailingRefreshes() {
        let health = DeviceHealth(now: t0, link: AuthorityLinkState(phase: .connected, since: t0))
        health.refreshFailed("answered with a failure", now: t1)
        let down = AuthorityLinkState(phase: .unreachable, lastError: "tls: unknown CA", since: t2)
        health.linkChanged(down)
        #expect(health.authorityLink == down)
    }

    @Test func theStreamRidesOnTheLinkAndKeepsTheStartOfItsOutage() {
        let health = DeviceHealth(now: t0, link: AuthorityLinkState(phase: .connected, since: t0))
        #expect(health.authorityLink?.revocationStream == nil)
        health.streamUp(now: t0)
        #expect(health.authorityLink?.revocationStream == RevocationStreamState(isUp: true, since: t0))
        health.streamDown("closed", now: t1)
        health.streamDown("refused", now: t2)
        #expect(health.authorityLink?.revocationStream == RevocationStreamState(isUp: false, lastError: "refused", since: t1))
        #expect(health.authorityLink?.phase == .connected, "a stream down alone says nothing of calls")
    }

    @Test func theKeysAreTheirOwnStateAndEachChangeIsToldOnce() {
        let health = DeviceHealth(now: t0)
        let changes = Mutex<[DeviceHealth.Change]>([])
        health.observe { change in changes.withLock { $0.append(change) } }
        #expect(health.storage == StorageHealthState(isAvailable: true, since: t0))
        let gone = RainError(.provider, "the TPM at swtpm:path=/x cannot be reached", details: .init(reason: "tpm_unavailable"))
        health.keys(gone, now: t1)
        health.keys(gone, now: t2)
        #expect(health.storage == StorageHealthState(isAvailable: false, lastError: gone.message, since: t1))
        health.keys(nil, now: t2)
        #expect(health.storage == StorageHealthState(isAvailable: true, since: t2))
        // An embedded authority has no link of its own here: nothing about it is told.
        #expect(health.authorityLink == nil)
        #expect(
            changes.withLock { $0 } == [
                .storage(StorageHealthState(isAvailable: false, lastError: gone.message, since: t1)),
                .storage(StorageHealthState(isAvailable: true, since: t2)),
            ])
    }
}
