import Foundation
import RainSoftAuthenticator
import RainWallet
import Testing

/// Passkeys through device daemons that use a remote authority (`rainwalletd --authority`).
@Suite(.serialized) struct RemotePasskeyIntegrationTests {
    @Test("a passkey made on one device logs in on another through the remote authority")
    func signUpOnOneLogInOnAnother() async throws {
        let h = try await MultiDevice.up(devices: 2, lifetime: 60)
        defer { h.down() }
        let anchor = SoftAuthenticator(path: "\(h.dir)/remote-authenticator.json")
        func wallet(_ i: Int) -> RainProvider {
            RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.devices[i].socket))
        }
        let created = try await wallet(0).signUpWithPasskey(anchor: anchor)
        #expect(created.authState == .authenticated)
        let addresses = try await wallet(0).getWallet()
        let other = try await wallet(1).loginWithPasskey(anchor: anchor)
        #expect(other.accountID == created.accountID)
        #expect(try await wallet(1).getWallet().ethereumAddress == addresses.ethereumAddress)
        anchor.setDismissing(true)
        _ = try await wallet(1).logout()
        #expect(await rainError { try await wallet(1).loginWithPasskey(anchor: anchor) }?.code == .userCancelled)
    }
}
