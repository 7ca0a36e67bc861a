import Foundation
import RainAccess
import RainAuthority
import RainAuthorityAPI
import RainConfig
import RainCore
import RainTestSupport
import RainTransport
import RainWire
import Synchronization
import Testing

@testable import RainDevice

/// An audit recorder that keeps what it is given, and can be told to fail like a full disk.
final class RecordingAudit: AuditRecorder {
    private let state = Mutex((records: [AuditRecord](), isFailing: false))

    var records: [AuditRecord] { state.withLock { $0.records } }
    func setFailing(_ isFailing: Bool) { state.withLock { $0.isFailing = isFailing } }

    func record(_ record: AuditRecord) async throws(RainError) {
        try state.withLock { s throws(RainError) in
            if s.isFailing {
                throw RainError(.internalError, "disk full", details: .init(reason: "audit_not_written"))
            }
            s.records.append(record)
        }
    }

    func read(since: Date?, maximumBytes: Int) async throws(RainError) -> AuditReadout {
        AuditReadout(lines: records.map { "\($0.event)" }, isTruncated: false)
    }

    func verify() async throws(RainError) -> AuditVerification { AuditVerification(entryCount: 0, message: "ok") }
}

/// The device records its sensitive calls with the caller's pid and uid.
@Suite struct AuditRecordingTests {
    let dir = TempDir()
    let clock = ManualClock()
    let sender = CapturingCodeSender()
    let audit = RecordingAudit()
    let embedded: EmbeddedAuthority
    let service: DeviceService
    let logger = Logger(label: "test", sink: CapturingLogSink())

    init() async throws {
        embedded = try await EmbeddedAuthority(
            stateDirectory: dir.path, settings: AuthoritySettings(sendLimits: .unlimited), clock: clock, sender: sender,
            logger: logger)
        var config = DaemonConfig()
        config.profiles["default"] = ProfileSettings(appID: "default", isExportAllowed: true)
        service = DeviceService(
            config: config,
            context: DeviceContext(
                authority: embedded, storage: InMemoryStorage(), clock: clock, device: try testDevice(), logger: logger,
                audit: audit))
    }

    func call<Resp: WireMessage>(_ c: ClientConnection, _ method: String, _ request: some WireMessage, _: Resp.Type)
        async throws -> Resp
    {
        try Resp.decode(try await c.call(method: method, payload: try request.encode()))
    }

    @Test func loginExportLogoutAreRecordedWithThePeerAndAnExportWithoutItsEntryIsRefused() async throws {
        let served = try ServedHandler(service, directory: dir.path, logger: logger)
        let c = try ClientConnection(path: served.socketPath)
        defer { c.close() }
        _ = try await call(
            c, Method.authSendLoginCode, SendLoginCodeRequest(contact: .email("a@example.com")), SendLoginCodeResponse.self)
        _ = try await call(
            c, Method.authConfirmLoginCode, ConfirmLoginCodeRequest(code: try #require(sender.lastCode)),
            ConfirmLoginCodeResponse.self)
        _ = try await call(c, Method.walletExportRecoveryPhrase, ExportRecoveryPhraseRequest(), ExportRecoveryPhraseResponse.self)

        audit.setFailing(true)
        let refused = await auditRainError {
            _ = try await call(
                c, Method.walletExportRecoveryPhrase, ExportRecoveryPhraseRequest(), ExportRecoveryPhraseResponse.self)
        }
        #expect(refused?.code == .internalError)
        #expect(refused?.details.reason == "audit_not_written")
        // A logout is never refused for its entry.
        let logout = try await call(c, Method.authLogout, LogoutRequest(), LogoutResponse.self)
        #expect(logout.hadSession)
        audit.setFailing(false)
        await served.stop()

        let records = audit.records
        #expect(records.map(\.event) == [.login, .export])
        #expect(records.allSatisfy { $0.app == AuditApp(pid: getpid(), uid: getuid()) && $0.profile == "default" })
        #expect(records.first?.detail == "code")
        #expect(records.last?.detail == "recovery_phrase")
        #expect(records.allSatisfy { $0.result == .ok })
    }

    @Test func aSessionTheAuthorityRevokesIsRecordedAsARevocation() async throws {
        let session = service.session(profile: "default")
        _ = try await session.sendLoginCode(.email("r@example.com"))
        _ = try await session.confirmLoginCode(try #require(sender.lastCode))
        // The same account logs in on another device: this device's session is revoked.
        let challenge = try await embedded.sendLoginCode(
            SendCodeRequest(appID: "default", deviceID: "dev_other", contact: .email("r@example.com")))
        _ = try await embedded.confirmLoginCode(
            ConfirmCodeRequest(
                appID: "default", deviceID: "dev_other", challengeID: challenge.challengeID,
                code: try #require(sender.lastCode)))
        let error = await auditRainError { _ = try await session.refreshSession() }
        #expect(error?.code == .sessionExpired)
        let revocation = try #require(audit.records.last)
        #expect(revocation.event == .revocation)
        #expect(revocation.app == nil)
        #expect(revocation.detail == "revokedElsewhere")
        #expect(revocation.result.reason != nil)
    }
}

/// The `RainError` `body` threw, or nil.
private func auditRainError(_ body: () async throws -> Void) async -> RainError? {
    do {
        try await body()
        return nil
    } catch let error as RainError {
        return error
    } catch {
        Issue.record("expected a RainError, got \(error)")
        return nil
    }
}
