import Foundation
import RainCore
import RainWire
import Testing

@testable import RainWallet

/// `onSessionExpired`'s rule, update by update: once per session seen active, including an end
/// that happened while the watcher was away; never for a restart or a logout.
@Suite struct ExpiryTrackerTests {
    static let active = SessionSnapshot(
        authState: .authenticated, sessionState: .active(expiresAt: Date(unixMilliseconds: 1_900_000_000_000)),
        accountID: "acct", walletID: "wallet", hasActiveSession: true)
    static let ended = SessionSnapshot(authState: .unauthenticated, sessionState: .expired)
    static let expiredNotEnded = SessionSnapshot(
        authState: .unauthenticated, sessionState: .expired, accountID: "acct", walletID: "wallet")

    static func first(_ state: SessionSnapshot) -> WatchUpdate {
        .event(WatchEvent(sequence: 1, kind: .authState, state: state), isFirst: true)
    }
    static func change(_ state: SessionSnapshot, _ kind: WatchEvent.Kind = .sessionState) -> WatchUpdate {
        .event(WatchEvent(sequence: 2, kind: kind, state: state), isFirst: false)
    }
    static func expiry(_ reason: ExpiryReason?) -> WatchUpdate {
        .event(WatchEvent(sequence: 2, kind: .sessionExpired, state: ended, expiryReason: reason), isFirst: false)
    }

    func verdicts(_ updates: [WatchUpdate]) -> [ExpiryTracker.Verdict] {
        var tracker = ExpiryTracker()
        return updates.compactMap { tracker.observe($0) }
    }

    @Test func liveExpiryFiresOnceWithItsReason() {
        let v = verdicts([
            Self.first(Self.active), Self.expiry(.revokedElsewhere), Self.change(Self.ended, .authState),
            Self.change(Self.ended), Self.expiry(.expired),
        ])
        #expect(v == [.fire(.revokedElsewhere)])
    }

    @Test func restartIsNoExpiry() {
        let v = verdicts([
            Self.first(Self.active), .disconnected, .disconnected, Self.first(.loading), Self.change(Self.active),
            .disconnected, Self.first(Self.active),
        ])
        #expect(v.isEmpty)
    }

    @Test func endWhileAwayFiresOnReconnect() {
        let v = verdicts([Self.first(Self.active), .disconnected, Self.first(Self.ended), .disconnected, Self.first(Self.ended)])
        #expect(v == [.fireWithReasonFromDaemon])
    }

    @Test func endDuringRestoreFiresOnce() {
        let v = verdicts([
            Self.first(Self.active), .disconnected, Self.first(.loading), Self.expiry(.expired), Self.change(Self.ended),
        ])
        #expect(v == [.fire(.expired)])
    }

    @Test func expiredButNotYetEndedWaitsForTheEvent() {
        let v = verdicts([Self.first(Self.active), Self.change(Self.expiredNotEnded), Self.expiry(.refreshFailed)])
        #expect(v == [.fire(.refreshFailed)])
        let reconnected = verdicts([Self.first(Self.active), .disconnected, Self.first(Self.expiredNotEnded)])
        #expect(reconnected.isEmpty)
    }

    @Test func logoutIsNoExpiry() {
        #expect(verdicts([Self.first(Self.active), Self.change(.unauthenticated)]).isEmpty)
        #expect(verdicts([Self.first(Self.active), .disconnected, Self.first(.unauthenticated), Self.first(Self.ended)]).isEmpty)
    }

    @Test func aSessionNeverSeenActiveIsNotReported() {
        #expect(verdicts([Self.first(Self.ended), Self.expiry(.expired)]).isEmpty)
    }

    @Test func eachSessionIsReportedOnce() {
        let v = verdicts([
            Self.first(Self.active), Self.expiry(.expired), Self.change(Self.active), Self.expiry(.refreshFailed),
        ])
        #expect(v == [.fire(.expired), .fire(.refreshFailed)])
    }

    @Test(arguments: 0..<12) func backoffDoublesToTheCapWithJitter(attempt: Int) {
        let b = ReconnectBackoff.default
        let full = min(Duration.milliseconds(50) * (1 << attempt), .seconds(2))
        let d = b.delay(attempt: attempt)
        #expect(d <= full)
        #expect(d >= full / 2)
    }
}
