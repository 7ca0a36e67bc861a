import Foundation
import RainTestSupport
import RainWallet
import Testing

@Suite("Passkey domain from RainWalletConfig")
struct PasskeyDomainIntegrationTests {
    @Test("the first client's domain binds the profile; a different one later is RAIN_102 at awaitSessionRestore")
    func firstClientBindsTheDomain() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let first = RainProvider(RainWalletConfig(passkeyDomain: "example.com", socketPath: h.socketPath))
        #expect(try await first.currentSession().authState != .authenticated)
        let other = RainProvider(RainWalletConfig(passkeyDomain: "other.com", socketPath: h.socketPath))
        // The refusal is reported by awaitSessionRestore, not by an unrelated call.
        _ = try await other.currentSession()
        let error = await rainError { try await other.awaitSessionRestore() }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "passkey_domain_mismatch")
        // Another profile is independent.
        let elsewhere = RainProvider(RainWalletConfig(passkeyDomain: "other.com", profile: "second", socketPath: h.socketPath))
        _ = try await elsewhere.currentSession()
    }

    @Test("an invalid domain is refused with RAIN_102 by validate() and at awaitSessionRestore; a code login still works")
    func invalidDomain() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let config = RainWalletConfig(passkeyDomain: "https://example.com/login", socketPath: h.socketPath)
        let local = await rainError { try config.validate() }
        #expect(local?.code == .invalidArgument)
        #expect(local?.details.field == "passkeyDomain")
        let p = RainProvider(config)
        let error = await rainError { try await p.awaitSessionRestore() }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.field == "passkeyDomain")
        try await h.logIn(p, .email("invalid-domain@example.com"))
        #expect(try await p.hasActiveSession())
    }
}
