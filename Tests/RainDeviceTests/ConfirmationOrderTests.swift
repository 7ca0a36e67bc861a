import Foundation
import RainAccess
import RainConfig
import RainCore
import RainCrypto
import RainTestSupport
import RainTransport
import RainWire
import Testing

@testable import RainDevice

/// A call the user confirms is checked in the order validate → session → confirm: nobody is asked
/// about a call that would be refused anyway, and without a session the answer is RAIN_201 until
/// the user logs in (the seed's rule), whether or not a prompt could be shown.
@Suite struct ConfirmationOrderTests {
    /// Every connection is the same app (the profile's first, trusted where no prompt can be shown).
    final class OneApp: CallerResolving {
        func identity(of context: CallerHandle) async throws(RainError) -> CallerIdentity {
            AppAccessTests.app("/usr/bin/wallet", hash: 1, pid: context.peer.pid)
        }
        func recheck(_ identity: CallerIdentity, of context: CallerHandle) async throws(RainError) {}
    }

    /// A daemon with per-app access and no prompt available, served on a socket: profile
    /// `default` may export and has a passkey domain; profile `plain` has neither.
    struct Headless {
        let fixture: SchedulerFixture
        let service: DeviceService
        let prompt: AppAccessTests.Prompt

        init() async throws {
            fixture = try await SchedulerFixture(allowExport: true, passkeyDomain: "example.com")
            prompt = AppAccessTests.Prompt(available: false)
            let apps = try AppAccess(
                store: nil, resolver: OneApp(), confirmer: prompt, preApproved: [:], clock: fixture.clock, audit: { _ in })
            let settings = try SettingsGuard(
                store: try ConfirmedSettingsStore(stateDirectory: fixture.dir.path, storageKey: try SymmetricKey.random()),
                policy: GuardedSettings(), requested: { () throws(RainError) in GuardedSettings() })
            var config = DaemonConfig()
            config.profiles["default"] = ProfileSettings(
                appID: "default", passkeyDomain: "example.com", isExportAllowed: true)
            config.profiles["plain"] = ProfileSettings(appID: "plain", isExportAllowed: true)
            service = DeviceService(
                config: config,
                context: DeviceContext(
                    authority: fixture.authority, storage: fixture.storage, clock: fixture.clock, device: try testDevice(),
                    logger: fixture.logger),
                access: DeviceAccess(
                    apps: apps, settings: settings, prompts: QuickLaneTests.NoPlaces(),
                    hashFile: { (path) throws(RainError) in (path, [UInt8](repeating: 0, count: 32)) }))
        }

        /// The routes the user confirms that also need a session, from the route table itself.
        var confirmingSessionRoutes: [String] {
            service.routes.routes.filter { $0.policy.userConfirms != nil && $0.policy.needsSession }.map(\.method)
        }

        func serve(_ body: (ClientConnection) async throws -> Void) async throws {
            let served = try ServedHandler(service, directory: fixture.dir.path, logger: fixture.logger)
            let connection = try ClientConnection(path: served.socketPath)
            defer { connection.close() }
            do {
                // Answered once the daemon has accepted the connection and read who holds it: the
                // calls under test are not refused as sent before that.
                _ = try await connection.call(method: Method.daemonGetInfo, payload: try GetInfoRequest().encode())
                try await body(connection)
            } catch {
                await served.stop()
                throw error
            }
            await served.stop()
        }
    }

    /// A request each confirming route would accept as input; any other route gets its empty
    /// message (a new route whose empty message is invalid shows up here as RAIN_102).
    static func validPayload(_ method: String) throws -> [UInt8] {
        switch method {
        case Method.walletExportPrivateKey: try ExportPrivateKeyRequest(chain: .ethereum).encode()
        case Method.contactSendVerificationCode: try SendLoginCodeRequest(contact: .email("backup@example.com")).encode()
        case Method.walletSignMessage: try SignRequest(chain: .ethereum, payload: Array("hello".utf8)).encode()
        case Method.walletSignTypedData: try SignRequest(chain: .ethereum, payload: Array("{}".utf8)).encode()
        case Method.walletSignTransaction: try SignRequest(chain: .ethereum, chainID: 1, payload: [0xc0]).encode()
        default: []
        }
    }

    /// The error a call answers (nil: it succeeded).
    static func refusal(
        _ c: ClientConnection, _ method: String, payload: [UInt8], profile: String = "default"
    ) async -> RainError? {
        do throws(RainError) {
            _ = try await c.call(
                method: method, payload: payload, metadata: [MetadataEntry(key: profileMetadataKey, value: profile)])
            return nil
        } catch {
            return error
        }
    }

    @Test("a call that confirms asks for a session first: without one it is RAIN_201, even with no prompt to show")
    func sessionBeforeConfirmation() async throws {
        let h = try await Headless()
        let methods = h.confirmingSessionRoutes
        #expect(
            Set(methods).isSuperset(of: [
                Method.walletExportRecoveryPhrase, Method.walletExportPrivateKey, Method.passkeyBeginAdd,
                Method.contactSendVerificationCode, Method.walletSignMessage, Method.walletSignTypedData,
                Method.walletSignTransaction,
            ]))
        try await h.serve { c in
            for method in methods {
                let error = await Self.refusal(c, method, payload: try Self.validPayload(method))
                #expect(error?.code == .sessionExpired, "\(method): \(String(describing: error))")
                #expect(error?.details.reason == SessionEndReason.noSession.rawValue, "\(method)")
            }
        }
        #expect(h.prompt.asked.isEmpty)
    }

    @Test("with a session the user is still asked: no prompt to show is RAIN_202 no_prompt")
    func confirmationAfterTheSession() async throws {
        let h = try await Headless()
        let session = h.service.session(profile: "default")
        _ = try await session.sendLoginCode(.email("user@example.com"))
        _ = try await session.confirmLoginCode(try #require(h.fixture.sender.lastCode))
        try await h.serve { c in
            // The signatures are decoded before the prompt: a request that decodes is asked about.
            let signature = try SignRequest(chain: .ethereum, payload: Array("hello".utf8)).encode()
            let signed = await Self.refusal(c, Method.walletSignMessage, payload: signature)
            #expect(signed?.details.reason == "no_prompt", "\(String(describing: signed))")
            // A removal names its passkey on the prompt: one the account does not hold is refused
            // before anybody is asked.
            let removal = await Self.refusal(c, Method.passkeyRemove, payload: try Self.validPayload(Method.passkeyRemove))
            #expect(removal?.details.reason == "credential_unknown", "\(String(describing: removal))")
            for method in h.confirmingSessionRoutes
            where !method.hasPrefix("/rain.wallet.v1.Wallet/Sign") && method != Method.passkeyRemove {
                let error = await Self.refusal(c, method, payload: try Self.validPayload(method))
                #expect(error?.code == .unauthorized, "\(method): \(String(describing: error))")
                #expect(error?.details.reason == "no_prompt", "\(method)")
            }
        }
    }

    @Test("bad input is refused before the session is asked for")
    func validationBeforeTheSession() async throws {
        let h = try await Headless()
        try await h.serve { c in
            let chain = await Self.refusal(
                c, Method.walletExportPrivateKey, payload: try ExportPrivateKeyRequest(chain: nil).encode())
            #expect(chain?.code == .invalidArgument)
            #expect(chain?.details.field == "chain")
            let contact = await Self.refusal(
                c, Method.contactSendVerificationCode,
                payload: try SendLoginCodeRequest(contact: .email("not an address")).encode())
            #expect(contact?.code == .invalidArgument)
            #expect(contact?.details.reason == "invalid_email")
            let domain = await Self.refusal(c, Method.passkeyBeginAdd, payload: [], profile: "plain")
            #expect(domain?.code == .invalidArgument)
            #expect(domain?.details.reason == "no_passkey_domain")
            // A signature without a chain, and one whose bytes do not decode.
            let noChain = await Self.refusal(c, Method.walletSignMessage, payload: try SignRequest(payload: [1]).encode())
            #expect(noChain?.details.field == "chain")
            // A confirming call that needs no session is validated before the prompt too.
            let provider = await Self.refusal(c, Method.storageMigrate, payload: try StorageMigrateRequest(to: "floppy").encode())
            #expect(provider?.code == .invalidArgument)
            #expect(provider?.details.field == "to")
        }
        #expect(h.prompt.asked.isEmpty)
    }
}
