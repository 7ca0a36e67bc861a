import Foundation
import RainAuthority
import RainAuthorityAPI
import RainConfig
import RainCore
import RainCrypto
import RainTestSupport
import Testing

@testable import RainDevice

@Suite struct PasskeyDomainConfigurationTests {
    func service(config: DaemonConfig = DaemonConfig(), stateDir: String) async throws -> (DeviceService, TempDir) {
        let dir = TempDir()
        let logger = Logger(label: "test", sink: CapturingLogSink())
        let authority = try await EmbeddedAuthority(
            stateDirectory: dir.path, clock: ManualClock(), sender: CapturingCodeSender(), logger: logger)
        let service = DeviceService(
            config: config,
            context: DeviceContext(
                authority: authority, storage: InMemoryStorage(), clock: ManualClock(), device: try testDevice(), logger: logger,
                profileState: ProfileStateStore(directory: stateDir)))
        return (service, dir)
    }

    @Test func firstClientSetsTheDomainAndItIsPersisted() async throws {
        let state = TempDir()
        let (s, _) = try await service(stateDir: state.path)
        let r = try await s.session(profile: "app").configure(passkeyDomain: "Example.com")
        #expect(r.passkeyDomain == "example.com")
        #expect(try await s.session(profile: "app").requirePasskeyDomain() == "example.com")
        // The same domain again is fine; another one is refused.
        _ = try await s.session(profile: "app").configure(passkeyDomain: "example.com")
        let error = await #expect(throws: RainError.self) {
            try await s.session(profile: "app").configure(passkeyDomain: "other.com")
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "passkey_domain_mismatch")
        // A restarted daemon still knows it.
        let (again, _) = try await service(stateDir: state.path)
        #expect(try await again.session(profile: "app").requirePasskeyDomain() == "example.com")
        let attrs = try FileManager.default.attributesOfItem(atPath: "\(state.path)/app.json")
        #expect((attrs[.posixPermissions] as? Int) == 0o600)
    }

    @Test(arguments: ["https://example.com", "localhost", "co.uk", "example.com:8443"])
    func invalidDomainIsRefusedAndNothingIsPersisted(domain: String) async throws {
        let state = TempDir()
        let (s, _) = try await service(stateDir: state.path)
        let error = await #expect(throws: RainError.self) { try await s.session(profile: "app").configure(passkeyDomain: domain) }
        #expect(error?.code == .invalidArgument)
        #expect(!FileManager.default.fileExists(atPath: "\(state.path)/app.json"))
    }

    @Test func theConfigFileDomainWinsOverClients() async throws {
        var config = DaemonConfig()
        config.profiles["app"] = ProfileSettings(appID: "app", passkeyDomain: "example.com")
        let (s, _) = try await service(config: config, stateDir: TempDir().path)
        let error = await #expect(throws: RainError.self) {
            try await s.session(profile: "app").configure(passkeyDomain: "other.com")
        }
        #expect(error?.details.reason == "passkey_domain_mismatch")
        #expect(try await s.session(profile: "app").configure(passkeyDomain: "example.com").passkeyDomain == "example.com")
    }

    @Test func withoutADomainPasskeyCallsAreRefused() async throws {
        let (s, _) = try await service(stateDir: TempDir().path)
        let error = await #expect(throws: RainError.self) { try await s.session(profile: "app").requirePasskeyDomain() }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "no_passkey_domain")
    }

    /// The seed: without a domain every passkey call throws RAIN_102. No ceremony can have begun
    /// on such a profile, so a finish or a cancel names nothing it could act on: the client's
    /// real mistake is the missing domain, and that is what it is told.
    @Test("without a domain every Passkey call is RAIN_102 no_passkey_domain, Finish and Cancel included")
    func everyPasskeyCallNeedsADomain() async throws {
        let (s, _) = try await service(stateDir: TempDir().path)
        let session = s.session(profile: "app")
        let calls: [(String, () async throws(RainError) -> Void)] = [
            ("BeginSignUp", { () async throws(RainError) in _ = try await session.beginPasskeySignUp() }),
            ("BeginLogin", { () async throws(RainError) in _ = try await session.beginPasskeyLogin() }),
            ("BeginAdd", { () async throws(RainError) in _ = try await session.beginPasskeyAdd() }),
            (
                "Finish",
                { () async throws(RainError) in _ = try await session.finishPasskey(ceremonyID: "c", responseJSON: "{}") }
            ),
            ("Cancel", { () async throws(RainError) in _ = try await session.cancelPasskey(ceremonyID: "c") }),
        ]
        for (name, call) in calls {
            let error = await #expect(throws: RainError.self, "\(name)") { try await call() }
            #expect(error?.code == .invalidArgument, "\(name)")
            #expect(error?.details.reason == "no_passkey_domain", "\(name)")
        }
    }
}
