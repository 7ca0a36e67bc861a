import Foundation
import RainTestSupport
import RainWallet
import Testing

@Suite("Passkey domain from RainWalletConfig")
struct PasskeyDomainIntegrationTests {
    @Test("the first client's domain binds the profile; a different one later is RAIN_102")
    func firstClientBindsTheDomain() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let first = RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.socketPath))
        #expect(try await first.currentSession().authState != .authenticated)
        let other = RainProvider(RainWalletConfig(passkeyDomain: "other.com", socketPath: h.socketPath))
        let error = await rainError { _ = try await other.currentSession() }
        #expect(error?.code == .invalidArgument)
        // Another profile is independent.
        let elsewhere = RainProvider(RainWalletConfig(passkeyDomain: "other.com", profile: "second", socketPath: h.socketPath))
        _ = try await elsewhere.currentSession()
    }

    @Test("an invalid domain is refused with RAIN_102 on the first call")
    func invalidDomain() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = RainProvider(RainWalletConfig(passkeyDomain: "https://example.com/login", socketPath: h.socketPath))
        let error = await rainError { _ = try await p.currentSession() }
        #expect(error?.code == .invalidArgument)
    }
}
