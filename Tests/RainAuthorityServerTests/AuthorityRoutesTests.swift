import RainAuthorityAPI
import RainAuthorityServer
import RainCore
import RainTestSupport
import RainTransport
import RainWire
import Testing

/// The authority hop's route table: every method declared once, with its policy.
@Suite struct AuthorityRoutesTests {
    @Test("every AuthorityMethod has exactly one route, in the order of AuthorityMethod.all")
    func everyMethodIsDeclaredOnce() async throws {
        try await RemoteFixture.with(isDevOutboxEnabled: true) { f in
            #expect(f.service.routes.methods == AuthorityMethod.all)
            #expect(f.service.routes.duplicateMethods.isEmpty)
        }
        try await RemoteFixture.with(isDevOutboxEnabled: false) { f in
            #expect(f.service.routes.methods == AuthorityMethod.all)
        }
    }

    @Test("policies: reads are retried, sends are not; secrets and new credentials are sensitive")
    func policies() async throws {
        try await RemoteFixture.with { f in
            let routes = f.service.routes
            for method in [AuthorityMethod.getInfo, AuthorityMethod.accountInfo, AuthorityMethod.getWallet] {
                #expect(routes.policy(for: method)?.isRetried == true, "\(method)")
            }
            for method in [
                AuthorityMethod.sendLoginCode, AuthorityMethod.confirmLoginCode, AuthorityMethod.refreshSession,
                AuthorityMethod.exportWallet, AuthorityMethod.finishPasskeyAuthentication,
            ] {
                #expect(routes.policy(for: method)?.isRetried == false, "\(method)")
            }
            #expect(routes.policy(for: AuthorityMethod.exportWallet)?.isSensitive == true)
            #expect(routes.policy(for: AuthorityMethod.exportWallet)?.needsSession == true)
            #expect(routes.policy(for: AuthorityMethod.finishPasskeyRegistration)?.isSensitive == true)
            #expect(routes.policy(for: AuthorityMethod.sendLoginCode)?.isSensitive == false)
            #expect(routes.policy(for: AuthorityMethod.sendLoginCode)?.needsSession == false)
            for method in AuthorityMethod.all { #expect(routes.policy(for: method)?.deadline == nil, "\(method)") }
            #expect(routes.policy(for: "/rain.wallet.v1.Authority/Nope") == nil)
            #expect(routes.route(for: AuthorityMethod.getInfo)?.placement == .loop)
            #expect(routes.route(for: AuthorityMethod.sendLoginCode)?.placement == .actor)
        }
    }
}
