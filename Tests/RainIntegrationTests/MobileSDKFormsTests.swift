import Foundation
import RainTestSupport
import RainWallet
import Testing

/// The mobile SDK's spellings (docs/mobile-sdk-map.md) do what the library's own do, against a real
/// daemon.
@Suite(.timeLimit(.minutes(2))) struct MobileSDKFormsTests {
    @Test("the SDK's forms of restore, state reads, the wallet address and export give what the library's own give")
    func sdkFormsMatchTheLibrarysOwn() async throws {
        let h = try await DaemonHarness.start(config: exportAllowedConfig)
        defer { h.shutdown() }
        let p = h.provider()
        // Both SDKs' restore waits: with a timeout, none (0), and in seconds as on iOS.
        try await p.awaitSessionRestore(timeoutMs: 5_000)
        try await p.awaitSessionRestore(timeoutMs: 0)
        try await p.awaitSessionRestore(timeout: 1.5)
        #expect(try await p.currentAuthState() == .unauthenticated)
        #expect(try await p.currentSessionState() == SessionState.none)

        // sendLoginCode returns what was sent: the normalized contact and the code's expiry.
        let sent = try await p.sendLoginCode(to: .email("  SDK-Forms@Example.com "))
        #expect(sent.contact == .email("sdk-forms@example.com"))
        #expect(sent.expiresAt > Date())
        let code = try await h.waitForCode(for: "sdk-forms@example.com", count: 1)
        try await p.confirmLoginCode(code)

        let session = try await p.currentSession()
        #expect(try await p.currentAuthState() == session.authState)
        #expect(try await p.currentSessionState() == session.sessionState)
        #expect(try await p.getWalletAddress() == (try await p.getWallet()).ethereumAddress)
        for chain in RainChain.allCases {
            #expect(try await p.exportPrivateKey(chain) == (try await p.exportPrivateKey(chain: chain)))
        }

        // A restarted daemon restores the session: the SDK's wait returns with it loaded.
        try await h.stop()
        try await h.start()
        try await p.awaitSessionRestore(timeoutMs: 5_000)
        #expect(try await p.hasActiveSession())
    }

    @Test("the SDK's restore wait reports what the daemon refused of the configuration, as awaitSessionRestore() does")
    func sdkRestoreReportsConfigurationRefusals() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let p = RainProvider(RainWalletConfig(passkeyDomain: "co.uk", socketPath: h.socketPath))
        for wait in [{ try await p.awaitSessionRestore(timeoutMs: 1_000) }, { try await p.awaitSessionRestore(timeout: 1) }] {
            let error = await rainError { try await wait() }
            #expect(error?.code == .invalidArgument)
            #expect(error?.details.field == "passkeyDomain")
        }
    }
}
