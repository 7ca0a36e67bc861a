import Foundation
import RainCore
import RainWire
import Testing

@testable import RainWallet

/// `RainProvider.snapshot(_:)` keeps the last `SessionState` decoded and gives it again only for
/// the same bytes: any change of the state, even of one byte at the same length, is decoded anew.
@Suite struct SnapshotReuseTests {
    static let active = SessionSnapshot(
        authState: .authenticated, sessionState: .active(expiresAt: Date(unixMilliseconds: 1_900_000_000_000)),
        accountID: "acct-1", walletID: "wallet", hasActiveSession: true)
    /// The same length as `active`'s bytes: one character of the account id differs.
    static let otherAccount = SessionSnapshot(
        authState: .authenticated, sessionState: .active(expiresAt: Date(unixMilliseconds: 1_900_000_000_000)),
        accountID: "acct-2", walletID: "wallet", hasActiveSession: true)
    static let ended = SessionSnapshot(authState: .unauthenticated, sessionState: .expired)

    @Test func theLastSnapshotIsGivenAgainOnlyForTheSameBytes() throws {
        let provider = RainProvider(RainWalletConfig(socketPath: "/nonexistent/rainwallet.sock"))
        let a = try Self.active.canonicalBytes()
        let b = try Self.otherAccount.canonicalBytes()
        #expect(a.count == b.count && a != b)
        for (bytes, expected) in [
            (a, Self.active), (a, Self.active), (b, Self.otherAccount), (a, Self.active),
            (try Self.ended.canonicalBytes(), Self.ended),
            ([], SessionSnapshot(authState: .unauthenticated, sessionState: .none)),
        ] {
            #expect(try provider.snapshot(bytes) == expected)
        }
        // Bytes that do not decode are refused, whatever was kept.
        #expect(throws: RainError.self) { try provider.snapshot([0xFF]) }
        #expect(try provider.snapshot(a) == Self.active)
    }
}
