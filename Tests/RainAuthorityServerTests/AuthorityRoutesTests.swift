import RainAuthorityAPI
import RainAuthorityServer
import RainCore
import RainTestSupport
import RainTransport
import RainWire
import Testing

/// The authority hop's route table: every method declared once, with its policy.
@Suite struct AuthorityRoutesTests {
    static let declaredNames = AuthorityMethod.declarations.map(\.name)

    @Test("every AuthorityMethod has exactly one route, in the order of the service block")
    func everyMethodIsDeclaredOnce() async throws {
        try await RemoteFixture.with(isDevOutboxEnabled: true) { f in
            #expect(f.service.routes.methods == Self.declaredNames)
            #expect(f.service.routes.duplicateMethods.isEmpty)
        }
        try await RemoteFixture.with(isDevOutboxEnabled: false) { f in
            #expect(f.service.routes.methods == Self.declaredNames)
        }
    }

    @Test("every route takes and answers the messages its rpc declares in proto/authority.proto")
    func routesTakeTheDeclaredMessages() async throws {
        try await RemoteFixture.with(isDevOutboxEnabled: true) { f in
            for declaration in AuthorityMethod.declarations {
                let route = try #require(f.service.routes.route(for: declaration.name), "\(declaration.name)")
                #expect(ObjectIdentifier(route.requestType) == ObjectIdentifier(declaration.requestType), "\(declaration.name)")
                #expect(
                    ObjectIdentifier(route.responseType) == ObjectIdentifier(declaration.responseType), "\(declaration.name)")
                #expect((route.placement == .stream) == declaration.isServerStream, "\(declaration.name)")
            }
        }
    }

    @Test("policies: reads are retried, sends are not; secrets and new credentials are sensitive")
    func policies() async throws {
        try await RemoteFixture.with { f in
            let routes = f.service.routes
            for method in [AuthorityMethod.getInfo, AuthorityMethod.getAccountInfo, AuthorityMethod.getWallet] {
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
            for method in Self.declaredNames { #expect(routes.policy(for: method)?.deadline == nil, "\(method)") }
            #expect(routes.policy(for: "/rain.wallet.v1.Authority/Nope") == nil)
            #expect(routes.route(for: AuthorityMethod.getInfo)?.placement == .loop)
            #expect(routes.route(for: AuthorityMethod.sendLoginCode)?.placement == .actor)
        }
    }
}
