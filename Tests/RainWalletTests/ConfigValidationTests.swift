import RainCore
import Testing

@testable import RainWallet

/// `RainWalletConfig.validate()`: the passkey domain's syntax, checked without the daemon (the
/// public-suffix verdict is the daemon's).
@Suite struct ConfigValidationTests {
    @Test(arguments: ["example.com", "login.example.co.uk", "xn--bcher-kva.example", "a-b.example.com", "co.uk"])
    func wellFormedDomainsPass(domain: String) throws {
        try RainWalletConfig(passkeyDomain: domain).validate()
    }

    @Test func noDomainPasses() throws {
        try RainWalletConfig().validate()
    }

    @Test(arguments: [
        "", "https://example.com", "example.com/login", "example.com:8443", "Example.com", "localhost",
        "app.localhost", "example", "example..com", ".example.com", "-a.example.com", "a-.example.com",
        "exa_mple.com", "exämple.com", "127.0.0.1", "user@example.com", " example.com",
        String(repeating: "a", count: 64) + ".com",
    ])
    func malformedDomainsAreRefusedNamingTheField(domain: String) {
        do {
            try RainWalletConfig(passkeyDomain: domain).validate()
            Issue.record("accepted \(domain)")
        } catch let error as RainError {
            #expect(error.code == .invalidArgument)
            #expect(error.details.field == "passkeyDomain")
        } catch {
            Issue.record("not a RainError: \(error)")
        }
    }

    @Test func anInvalidProfileIsRefused() {
        #expect(throws: RainError.self) { try RainWalletConfig(profile: "Bad Name").validate() }
    }

    /// The provider checks its profile once, when made: every call still refuses an invalid one
    /// (RAIN_102 naming `profile`) before it looks for the daemon, and a valid one passes.
    @Test func everyCallOfAProviderWithAnInvalidProfileIsRefusedBeforeConnecting() async {
        let socket = "/nonexistent/rainwalletd.sock"
        let invalid = RainProvider(RainWalletConfig(profile: "Bad Name", socketPath: socket))
        for _ in 0..<2 {
            do {
                _ = try await invalid.currentSession()
                Issue.record("an invalid profile was accepted")
            } catch let error as RainError {
                #expect(error.code == .invalidArgument)
                #expect(error.details.field == "profile")
            } catch {
                Issue.record("not a RainError: \(error)")
            }
        }
        // A valid profile gets as far as the missing daemon: RAIN_101.
        let valid = RainProvider(RainWalletConfig(profile: "work-1", socketPath: socket))
        do {
            _ = try await valid.currentSession()
            Issue.record("a call without a daemon succeeded")
        } catch let error as RainError {
            #expect(error.code == .notInitialized)
        } catch {
            Issue.record("not a RainError: \(error)")
        }
    }

    @Test func onlyRefusalsOfTheConfigurationItselfAreKeptForAwaitSessionRestore() {
        let domain = RainError.invalid("bad domain", field: "passkeyDomain")
        let policy = RainError.invalid("bad value", field: "sessionPolicy.refreshBufferSeconds")
        let owner = RainError(.unauthorized, "not the owner", details: .init(reason: "not_profile_owner"))
        #expect(RainProvider.isConfigurationRefusal(domain))
        #expect(RainProvider.isConfigurationRefusal(policy))
        #expect(RainProvider.isConfigurationRefusal(owner))
        // The call's own failures are not: the daemon is down, the app is not approved, a prompt.
        #expect(!RainProvider.isConfigurationRefusal(RainError(.notInitialized, "no daemon")))
        #expect(
            !RainProvider.isConfigurationRefusal(
                RainError(.unauthorized, "not approved", details: .init(reason: "app_not_approved"))))
        #expect(!RainProvider.isConfigurationRefusal(RainError(.userCancelled, "dismissed")))
        #expect(!RainProvider.isConfigurationRefusal(RainError.invalid("bad profile", field: "profile")))
    }
}
