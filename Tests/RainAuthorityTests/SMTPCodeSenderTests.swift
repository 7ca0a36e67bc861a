import Foundation
import RainCodeSenderSettings
import RainCrypto
import RainAuthorityAPI
import RainAuthorityServer
import RainCore
import RainTestSupport
import RainWire
import Synchronization
import Testing

@testable import RainAuthority
@testable import RainStore

/// The SMTP code sender against a real SMTP server on loopback (aiosmtpd, `GatewayTestServer`):
/// the message as a mail client parses it, TLS with a test CA, authentication, and every way a
/// server can refuse, hang or drop.
@Suite("SMTP code sender")
struct SMTPCodeSenderTests {
    static let user = "rain-sender"
    static let password = "s3cret-pass"

    /// A temporary directory with the test certificates and a 0600 credentials file.
    struct Setup {
        let directory: String
        let certificates: TestCertificates
        let credentialsFile: String
        let sink = CapturingLogSink()
        var logger: Logger { Logger(label: "test.smtp", minimumLevel: .debug, sink: sink) }

        static func with(_ body: (Setup) async throws -> Void) async throws {
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let certificates = try await TestCertificates.make(in: directory)
            let credentials = "\(directory)/smtp-credentials"
            try writeSecret("\(SMTPCodeSenderTests.user)\n\(SMTPCodeSenderTests.password)\n", to: credentials)
            try await body(Setup(directory: directory, certificates: certificates, credentialsFile: credentials))
        }

        /// Starts a server in a directory of its own, runs `body`, stops it.
        func server(
            mode: GatewayTestServer.SMTPMode = .accept, tls: GatewayTestServer.SMTPTLS = .startTLS,
            authenticated: Bool = true, _ body: (GatewayTestServer) async throws -> Void
        ) async throws {
            let dir = "\(directory)/server-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
            let server = try await GatewayTestServer.smtp(
                in: dir, mode: mode, tls: tls, certificates: certificates,
                credentials: authenticated ? (SMTPCodeSenderTests.user, SMTPCodeSenderTests.password) : nil)
            do {
                try await body(server)
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }

        func settings(
            _ server: GatewayTestServer, security: SMTPSettings.Security = .startTLS, authenticated: Bool = true,
            timeout: Duration = .seconds(10)
        ) -> SMTPSettings {
            SMTPSettings(
                host: "localhost", port: server.port, security: security, from: "codes@rain.test",
                credentialsFile: authenticated ? credentialsFile : nil, fromName: "Rain Codes",
                caFile: certificates.caPath, connectTimeout: .seconds(2), timeout: timeout,
                appNames: [AuthorityFixture.app: "Rain Demo"])
        }
    }

    static func writeSecret(_ text: String, to path: String, mode: mode_t = 0o600) throws {
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        guard chmod(path, mode) == 0 else { throw HarnessError("chmod \(path)") }
    }

    static let sentAt = Date(unixMilliseconds: 1_800_000_000_000)

    static func message(
        to contact: String = "user@example.com", code: String = "493817", purpose: CodeMessage.Purpose = .login
    ) -> CodeMessage {
        CodeMessage(
            delivery: OutboxDelivery(
                appID: AuthorityFixture.app, kind: "email", contact: contact, code: code, sentAt: sentAt),
            purpose: purpose, expiresAt: sentAt.addingTimeInterval(300))
    }

    /// The RainError `body` throws, and how long it took.
    static func timedError(_ body: () async throws -> Void) async -> (RainError?, Duration) {
        let start = ContinuousClock.now
        let error = await rainError(body)
        return (error, ContinuousClock.now - start)
    }

    @Test("over STARTTLS with AUTH: a multipart/alternative message with the code in both parts, the app's name and the expiry")
    func startTLSMessage() async throws {
        try await Setup.with { s in
            try await s.server { server in
                let sender = try SMTPCodeSender(settings: s.settings(server), logger: s.logger)
                try await sender.deliver(Self.message())
                try await sender.deliver(Self.message(code: "105623", purpose: .contactVerification))
                let mails = try server.mails()
                #expect(mails.count == 2)
                let mail = try #require(mails.first)
                #expect(mail.mailFrom == "codes@rain.test")
                #expect(mail.rcptTos == ["user@example.com"])
                #expect(mail.login == Self.user)
                #expect(mail.headers["From"] == "Rain Codes <codes@rain.test>")
                #expect(mail.headers["To"] == "user@example.com")
                #expect(mail.headers["Subject"] == "Your Rain Demo login code")
                #expect(mail.headers["MIME-Version"] == "1.0")
                #expect(mail.headers["Date"] == "Fri, 15 Jan 2027 08:00:00 +0000")
                #expect(mail.headers["Message-ID"]?.hasSuffix("@rain.test>") == true)
                #expect(mail.contentType == "multipart/alternative")
                #expect(mail.parts.map(\.type) == ["text/plain", "text/html"])
                #expect(mail.parts.allSatisfy { $0.charset == "utf-8" })
                let text = try #require(mail.parts.first?.text)
                let html = try #require(mail.parts.last?.text)
                #expect(text.contains("Your Rain Demo login code is 493817."))
                #expect(text.contains("expires in 5 minutes"))
                #expect(html.contains("<strong>493817</strong>"))
                #expect(html.contains("expires in 5 minutes"))
                let verification = try #require(mails.last)
                #expect(verification.headers["Subject"] == "Confirm this address for Rain Demo")
                #expect(verification.parts.allSatisfy { $0.text.contains("105623") })
                // The code is never logged; the body is, masked.
                let log = s.sink.captured.joined(separator: "\n")
                #expect(!log.contains("493817"))
                #expect(!log.contains("105623"))
                #expect(log.contains("login code is ******."))
                #expect(!log.contains(Self.password))
            }
        }
    }

    @Test("implicit TLS (smtps) delivers; a server certificate from another CA is a RAIN_501 refusal")
    func implicitTLSAndUntrustedCA() async throws {
        try await Setup.with { s in
            try await s.server(tls: .implicit, authenticated: false) { server in
                let sender = try SMTPCodeSender(
                    settings: s.settings(server, security: .implicitTLS, authenticated: false), logger: s.logger)
                try await sender.deliver(Self.message())
                #expect(try server.mails().count == 1)
                var untrusted = s.settings(server, security: .implicitTLS, authenticated: false)
                untrusted.caFile = s.certificates.otherCAPath
                let error = await rainError {
                    try await SMTPCodeSender(settings: untrusted, logger: s.logger).deliver(Self.message())
                }
                #expect(error?.code == .provider)
                #expect(error?.details.reason == CodeDeliveryFailure.refusedReason)
                #expect(try server.mails().count == 1)
            }
        }
    }

    @Test("security none: delivers to a server on this machine, refused in the settings for any other host")
    func plainOnlyOnLoopback() async throws {
        try await Setup.with { s in
            try await s.server(tls: .none, authenticated: false) { server in
                var settings = s.settings(server, security: .none, authenticated: false)
                settings.host = "127.0.0.1"
                try await SMTPCodeSender(settings: settings, logger: s.logger).deliver(Self.message())
                #expect(try server.mails().count == 1)
                settings.host = "smtp.example.com"
                let error = await rainError { _ = try SMTPCodeSender(settings: settings, logger: s.logger) }
                #expect(error?.code == .invalidArgument)
                #expect(error?.details.field == "codeSender.security")
            }
        }
    }

    @Test(
        "refusals before acceptance: 550 recipient and 554 data are RAIN_501 delivery_refused, 450 and a drop RAIN_301 delivery_unavailable, bad credentials RAIN_501"
    )
    func refusals() async throws {
        try await Setup.with { s in
            for (mode, code, reason) in [
                (GatewayTestServer.SMTPMode.refuseRecipient, RainError.Code.provider, CodeDeliveryFailure.refusedReason),
                (.deferRecipient, .network, CodeDeliveryFailure.unavailableReason),
                (.refuseData, .provider, CodeDeliveryFailure.refusedReason),
                (.dropBeforeData, .network, CodeDeliveryFailure.unavailableReason),
            ] {
                try await s.server(mode: mode) { server in
                    let sender = try SMTPCodeSender(settings: s.settings(server), logger: s.logger)
                    let error = await rainError { try await sender.deliver(Self.message()) }
                    #expect(error?.code == code, "\(mode)")
                    #expect(error?.details.reason == reason, "\(mode)")
                    #expect(try server.mails().isEmpty)
                }
            }
            try await s.server { server in
                try Self.writeSecret("\(Self.user)\nwrong-password\n", to: s.credentialsFile)
                let sender = try SMTPCodeSender(settings: s.settings(server), logger: s.logger)
                let error = await rainError { try await sender.deliver(Self.message()) }
                #expect(error?.code == .provider)
                #expect(error?.details.reason == CodeDeliveryFailure.refusedReason)
                #expect(error?.message.contains("wrong-password") == false)
            }
        }
    }

    @Test("a server that never greets is a RAIN_301 delivery_unavailable within the timeout (nothing handed over)")
    func hangBeforeHandOff() async throws {
        try await Setup.with { s in
            try await s.server(mode: .hangGreeting) { server in
                let sender = try SMTPCodeSender(settings: s.settings(server, timeout: .seconds(1)), logger: s.logger)
                let (error, elapsed) = await Self.timedError { try await sender.deliver(Self.message()) }
                #expect(error?.code == .network)
                #expect(error?.details.reason == CodeDeliveryFailure.unavailableReason)
                #expect(
                    elapsed < .seconds(20),
                    "the wait is bounded by the timeout, not libcurl's own 120 s (the margin is for a loaded machine)")
            }
        }
    }

    @Test("no answer, or a dropped connection, after the data is RAIN_501 saying the message may have arrived")
    func failureAfterHandOff() async throws {
        try await Setup.with { s in
            for mode in [GatewayTestServer.SMTPMode.hangAfterData, .dropAfterData] {
                try await s.server(mode: mode) { server in
                    let sender = try SMTPCodeSender(
                        settings: s.settings(server, timeout: .seconds(2)), logger: s.logger)
                    let (error, elapsed) = await Self.timedError { try await sender.deliver(Self.message()) }
                    #expect(error?.code == .provider, "\(mode)")
                    #expect(error?.details.reason == CodeDeliveryFailure.uncertainReason, "\(mode)")
                    #expect(error?.message.contains("may have arrived") == true)
                    #expect(
                        elapsed < .seconds(20),
                        "the wait is bounded by the timeout, not libcurl's own 120 s (the margin is for a loaded machine)")
                    // It did arrive: the server kept it.
                    #expect(try server.mails().count == 1)
                }
            }
        }
    }

    @Test("CR, LF or another control character in the contact, the app's name or a subject is RAIN_102; nothing is sent")
    func headerInjection() async throws {
        try await Setup.with { s in
            try await s.server { server in
                let sender = try SMTPCodeSender(settings: s.settings(server), logger: s.logger)
                for contact in ["user@example.com\r\nBcc: victim@example.com", "user@example.com\nX: y", "user\u{0}@x.com"] {
                    let error = await rainError { try await sender.deliver(Self.message(to: contact)) }
                    #expect(error?.code == .invalidArgument)
                    #expect(error?.details.field == "contact")
                }
                var settings = s.settings(server)
                settings.appNames[AuthorityFixture.app] = "Rain\r\nBcc: victim@example.com"
                #expect(
                    await rainError { _ = try SMTPCodeSender(settings: settings, logger: s.logger) }?.code == .invalidArgument)
                settings = s.settings(server)
                settings.templates[.login]?.subject = "Code\nBcc: victim@example.com"
                let error = await rainError { _ = try SMTPCodeSender(settings: settings, logger: s.logger) }
                #expect(error?.code == .invalidArgument)
                #expect(error?.details.field == "codeSender.templates.login.subject")
                settings = s.settings(server)
                settings.from = "codes@rain.test\r\nBcc: victim@example.com"
                #expect(
                    await rainError { _ = try SMTPCodeSender(settings: settings, logger: s.logger) }?.code == .invalidArgument)
                // An app id without a configured name is its own name: checked at send time.
                var unnamed = Self.message()
                unnamed.delivery.appID = "app\nBcc: victim@example.com"
                #expect(await rainError { try await sender.deliver(unnamed) }?.code == .invalidArgument)
                #expect(try server.mails().isEmpty)
            }
        }
    }

    @Test("the credentials file must be the daemon user's, mode 0600, not a link: else RAIN_102 at start")
    func credentialsFile() async throws {
        try await Setup.with { s in
            let settings = SMTPSettings(
                host: "localhost", port: 25, security: .startTLS, from: "codes@rain.test",
                credentialsFile: s.credentialsFile)
            _ = try SMTPCodeSender(settings: settings, logger: s.logger)
            for mode: mode_t in [0o640, 0o604, 0o644] {
                guard chmod(s.credentialsFile, mode) == 0 else { throw HarnessError("chmod") }
                let error = await rainError { _ = try SMTPCodeSender(settings: settings, logger: s.logger) }
                #expect(error?.code == .invalidArgument, "mode \(String(mode, radix: 8))")
                #expect(error?.details.field == "codeSender.credentialsFile")
                #expect(error?.message.contains(Self.password) == false)
            }
            guard chmod(s.credentialsFile, 0o600) == 0 else { throw HarnessError("chmod") }
            let link = "\(s.directory)/link"
            guard symlink(s.credentialsFile, link) == 0 else { throw HarnessError("symlink") }
            var linked = settings
            linked.credentialsFile = link
            #expect(await rainError { _ = try SMTPCodeSender(settings: linked, logger: s.logger) }?.code == .invalidArgument)
            var missing = settings
            missing.credentialsFile = "\(s.directory)/missing"
            #expect(await rainError { _ = try SMTPCodeSender(settings: missing, logger: s.logger) }?.code == .invalidArgument)
            let passwordless = "\(s.directory)/passwordless"
            try Self.writeSecret("\(Self.user)\n", to: passwordless)
            var incomplete = settings
            incomplete.credentialsFile = passwordless
            #expect(
                await rainError { _ = try SMTPCodeSender(settings: incomplete, logger: s.logger) }?.code == .invalidArgument)
            // Owned by another user (mode 0600 still): refused.
            try OtherUser.chown(s.credentialsFile)
            #expect(await rainError { _ = try SMTPCodeSender(settings: settings, logger: s.logger) }?.code == .invalidArgument)
        }
    }

    @Test(
        "through the authority: a refused send gives its slot back, a hang after the data counts, the delivered code stays usable"
    )
    func throughTheAuthority() async throws {
        try await Setup.with { s in
            let limits = CodeSendLimits(
                contactCooldown: .zero, contactWindow: .seconds(3600), contactMaxSends: 2, accountWindow: .zero,
                accountMaxSends: .max, contactAllAppsWindow: .zero, contactAllAppsMaxSends: .max, sourceWindow: .zero,
                sourceMaxSends: .max)
            let store = try await SQLiteAuthorityStore.open(stateDirectory: "\(s.directory)/authority")
            let keys = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 7, count: 32)))
            let router = SwitchingSender()
            let authority = EmbeddedAuthority(
                store: store, keys: keys, settings: AuthoritySettings(sendLimits: limits), clock: ManualClock(),
                sender: router, outbox: nil, logger: s.logger)
            let request = SendCodeRequest(appID: AuthorityFixture.app, deviceID: "device-a", contact: AuthorityFixture.email)
            var delivered: (SendCodeResult, String)?
            try await s.server { server in
                router.set(try SMTPCodeSender(settings: s.settings(server), logger: s.logger))
                let result = try await authority.sendLoginCode(request)
                let mail = try #require(try server.mails().last)
                let text = try #require(mail.parts.first?.text)
                let code = try #require(text.firstMatch(of: /[0-9]{6}/))
                delivered = (result, String(code.output))
            }
            try await s.server(mode: .refuseRecipient) { server in
                router.set(try SMTPCodeSender(settings: s.settings(server), logger: s.logger))
                #expect(await rainError { _ = try await authority.sendLoginCode(request) }?.code == .provider)
            }
            try await s.server(mode: .hangAfterData) { server in
                router.set(try SMTPCodeSender(settings: s.settings(server, timeout: .seconds(2)), logger: s.logger))
                let error = await rainError { _ = try await authority.sendLoginCode(request) }
                #expect(error?.details.reason == CodeDeliveryFailure.uncertainReason)
                // One delivered + one that may have arrived: the limit of two is reached; the refusal cost nothing.
                #expect(await rainError { _ = try await authority.sendLoginCode(request) }?.code == .refused)
            }
            let (result, code) = try #require(delivered)
            _ = try await authority.confirmLoginCode(
                ConfirmCodeRequest(
                    appID: AuthorityFixture.app, deviceID: "device-a", challengeID: result.challengeID, code: code,
                    devicePublicKey: FixtureDevice.key.publicKey.rawRepresentation))
            #expect(!s.sink.captured.joined().contains(code))
            await store.close()
        }
    }
    /// An authority on a fresh SQLite store that delivers through `sender`.
    static func authority(_ s: Setup, sender: any CodeSender) async throws -> (EmbeddedAuthority, SQLiteAuthorityStore) {
        let store = try await SQLiteAuthorityStore.open(stateDirectory: "\(s.directory)/authority-\(UUID().uuidString.prefix(8))")
        let keys = try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: 7, count: 32)))
        let authority = EmbeddedAuthority(
            store: store, keys: keys, settings: AuthoritySettings(), clock: ManualClock(), sender: sender, outbox: nil,
            logger: s.logger)
        return (authority, store)
    }

    @Test(
        "a device whose send deadline is shorter than the sender's timeout gets delivery_uncertain from a server silent after the data, never outcome_unknown"
    )
    func deviceDeadlineBoundsDelivery() async throws {
        try await Setup.with { s in
            try await s.server(mode: .hangAfterData) { server in
                // libcurl alone would wait up to 1.5 times the 30 s timeout for the reply to the data.
                let router = SwitchingSender()
                let recorder = RecordingSender(router)
                let (authority, store) = try await Self.authority(s, sender: recorder)
                let tcp = try RunningTCPServer(
                    handler: AuthorityService(authority: authority, logger: s.logger), logger: s.logger)
                let remote = try RemoteAuthority(
                    address: tcp.address,
                    // Short beside the sender's 30 s, long enough for the loopback conversation to
                    // reach the data on a loaded machine (every suite of the target runs beside it):
                    // what it leaves the sender is the wait, so it stays a few seconds, no more.
                    deadlines: AuthorityDeadlines(read: .seconds(4), send: .seconds(4), refresh: .seconds(5)),
                    logger: s.logger)
                // A first code, accepted at once, opens the connection and the store: the call that
                // hangs then spends its deadline on the mail server alone.
                router.set(RecordingSender(nil))
                _ = try await remote.sendLoginCode(
                    SendCodeRequest(appID: AuthorityFixture.app, deviceID: "device-b", contact: AuthorityFixture.phone))
                router.set(try SMTPCodeSender(settings: s.settings(server, timeout: .seconds(30)), logger: s.logger))
                let error = await rainError {
                    _ = try await remote.sendLoginCode(
                        SendCodeRequest(appID: AuthorityFixture.app, deviceID: "device-a", contact: AuthorityFixture.email))
                }
                #expect(error?.code == .provider)
                #expect(error?.details.reason == CodeDeliveryFailure.uncertainReason, "\(String(describing: error))")
                let limit = try #require(recorder.messages.last?.timeLimit)
                #expect(limit > .zero && limit <= .seconds(3), "the device's 4 s less the second kept for the answer")
                let line = try #require(s.sink.captured.last { $0.contains("code.delivery_failed") })
                #expect(line.contains("localhost:\(server.port)"))
                #expect(line.contains("28 (Timeout was reached)"))
                #expect(line.contains("counted"))
                remote.close()
                try await tcp.stop()
                await store.close()
            }
        }
    }

    @Test("a message's time limit ends a silent greeting before the sender's timeout: RAIN_301 delivery_unavailable")
    func timeLimitBeforeHandOff() async throws {
        try await Setup.with { s in
            try await s.server(mode: .hangGreeting) { server in
                let sender = try SMTPCodeSender(settings: s.settings(server, timeout: .seconds(30)), logger: s.logger)
                var message = Self.message()
                message.timeLimit = .milliseconds(500)
                let (error, elapsed) = await Self.timedError { try await sender.deliver(message) }
                #expect(error?.code == .network)
                #expect(error?.details.reason == CodeDeliveryFailure.unavailableReason)
                #expect(elapsed < .seconds(20), "bounded by the limit, not the 30 s timeout (margin for a loaded machine)")
            }
        }
    }

    @Test(
        "past its limit a transfer answers at once, as a timeout handed over or not as the body was, whatever libcurl's own timeouts"
    )
    func transferAnswersAtItsLimit() async throws {
        try await Setup.with { s in
            // The limit leaves a loaded machine time to reach the data; libcurl alone would take 45 s.
            for (mode, limit, isHandedOver) in [
                (GatewayTestServer.SMTPMode.hangAfterData, Duration.seconds(5), true), (.hangGreeting, .milliseconds(500), false),
            ] {
                try await s.server(mode: mode) { server in
                    let email = try SMTPCodeSender(settings: s.settings(server), logger: s.logger).compose(Self.message())
                    // libcurl alone: 30 s in all, and up to 15 s more for the reply to the data.
                    var transfer = CurlTransfer(
                        url: "smtp://localhost:\(server.port)", protocols: "smtp,smtps", caFile: s.certificates.caPath,
                        body: email.bytes, connectTimeout: .seconds(30), totalTimeout: .seconds(30))
                    transfer.requiresStartTLS = true
                    transfer.mailFrom = "codes@rain.test"
                    transfer.recipients = ["user@example.com"]
                    transfer.username = Self.user
                    transfer.password = Self.password
                    let queue = DispatchQueue(label: "test.transfer", attributes: .concurrent)
                    let result = try await transfer.perform(on: queue, within: limit)
                    #expect(result.isTimeout, "\(mode)")
                    #expect(result.description.contains("the call's deadline"), "\(mode): \(result.description)")
                    #expect(result.isBodyHandedOver == isHandedOver, "\(mode)")
                }
            }
        }
    }

    @Test("a caller without a deadline leaves the sender's own timeouts; one whose deadline passed sends nothing")
    func timeLimitFromTheCaller() async throws {
        try await Setup.with { s in
            let recorder = RecordingSender(nil)
            let (authority, store) = try await Self.authority(s, sender: recorder)
            let request = SendCodeRequest(appID: AuthorityFixture.app, deviceID: "device-a", contact: AuthorityFixture.email)
            _ = try await authority.sendLoginCode(request)
            #expect(recorder.messages.count == 1)
            #expect(recorder.messages.last?.timeLimit == nil)
            let late = await rainError {
                _ = try await authority.sendLoginCode(
                    SendCodeRequest(appID: AuthorityFixture.app, deviceID: "device-b", contact: AuthorityFixture.phone),
                    caller: AuthorityCaller(deadline: .now - .milliseconds(1)))
            }
            #expect(late?.code == .network)
            #expect(late?.details.reason == CodeDeliveryFailure.unavailableReason)
            #expect(recorder.messages.count == 1, "nothing handed to the sender")
            // Up to 1 s is kept for the answer; a quarter of a shorter deadline.
            #expect(EmbeddedAuthority.deliveryLimit(left: .seconds(9)) == .seconds(8))
            #expect(EmbeddedAuthority.deliveryLimit(left: .milliseconds(800)) == .milliseconds(600))
            await store.close()
        }
    }

    @Test(
        "the authority's log of a failed delivery names the server, the reply and the slot; never the code, the address or the password"
    )
    func deliveryFailureLog() async throws {
        try await Setup.with { s in
            try await s.server(mode: .deferRecipient) { server in
                let recorder = RecordingSender(try SMTPCodeSender(settings: s.settings(server), logger: s.logger))
                let (authority, store) = try await Self.authority(s, sender: recorder)
                let error = await rainError {
                    _ = try await authority.sendLoginCode(
                        SendCodeRequest(appID: AuthorityFixture.app, deviceID: "device-a", contact: AuthorityFixture.email))
                }
                #expect(error?.code == .network)
                #expect(error?.details.reason == CodeDeliveryFailure.unavailableReason)
                let line = try #require(s.sink.captured.last { $0.contains("code.delivery_failed") })
                #expect(line.contains("localhost:\(server.port)"))
                #expect(line.contains("smtp 450"))
                #expect(line.contains("given back"))
                #expect(line.contains(ContactRedaction.redacted(AuthorityFixture.email)))
                var scanner = SecretScanner()
                scanner.addCode(try #require(recorder.messages.last?.delivery.code))
                scanner.addText(Self.password, label: "SMTP password")
                scanner.addText(AuthorityFixture.email.value, label: "contact")
                #expect(scanner.findings(in: s.sink.captured) == [])
                await store.close()
            }
        }
    }
}

/// Records each message, then hands it to `inner` (nil: accepts it).
final class RecordingSender: CodeSender {
    private let inner: (any CodeSender)?
    private let recorded = Mutex<[CodeMessage]>([])

    init(_ inner: (any CodeSender)?) { self.inner = inner }

    var messages: [CodeMessage] { recorded.withLock { $0 } }

    func deliver(_ delivery: OutboxDelivery) async throws {
        try await deliver(CodeMessage.login(delivery))
    }

    func deliver(_ message: CodeMessage) async throws {
        recorded.withLock { $0.append(message) }
        try await inner?.deliver(message)
    }
}

/// A sender that forwards to the one set last (the test swaps servers under one authority).
final class SwitchingSender: CodeSender {
    private let current = Mutex<(any CodeSender)?>(nil)

    func set(_ sender: any CodeSender) { current.withLock { $0 = sender } }

    func deliver(_ delivery: OutboxDelivery) async throws {
        guard let sender = current.withLock({ $0 }) else { throw RainError(.internalError, "no sender") }
        try await sender.deliver(delivery)
    }

    func deliver(_ message: CodeMessage) async throws {
        guard let sender = current.withLock({ $0 }) else { throw RainError(.internalError, "no sender") }
        try await sender.deliver(message)
    }
}
