import Foundation
import RainTestSupport
import RainWallet
import Testing

/// The real daemon with `codeSender` type `smtp` (and an `sms` object) in its config:
/// a login code reaches a real SMTP server over STARTTLS with AUTH and an HTTPS webhook on
/// loopback, and the code each received logs in. The code never reaches the daemon's log.
@Suite("Code senders in the daemon")
struct CodeSenderTests {
    static func writeSecret(_ text: String, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        else { throw HarnessError("cannot write \(path)") }
    }

    @Test("email through SMTP (STARTTLS, AUTH) and SMS through a signed webhook, each code logs in")
    func smtpAndWebhook() async throws {
        let dir = "/tmp/rwcs-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certificates = try await TestCertificates.make(in: dir)
        try Self.writeSecret("rain\nsmtp-pass\n", to: "\(dir)/smtp-credentials")
        try Self.writeSecret("hook-secret\n", to: "\(dir)/sms-secret")
        try FileManager.default.createDirectory(atPath: "\(dir)/smtp", withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: "\(dir)/https", withIntermediateDirectories: false)
        let smtp = try await GatewayTestServer.smtp(
            in: "\(dir)/smtp", tls: .startTLS, certificates: certificates, credentials: ("rain", "smtp-pass"))
        let https = try await GatewayTestServer.https(
            in: "\(dir)/https", certificates: certificates, secretFile: "\(dir)/sms-secret")
        let config = """
            {"codeSender": {"type": "smtp",
              "smtp": {"host": "localhost", "port": \(smtp.port), "security": "starttls",
                       "credentialsFile": "\(dir)/smtp-credentials", "from": "codes@rain.test",
                       "caFile": "\(certificates.caPath)", "appNames": {"default": "Rain Test"}},
              "sms": {"url": "https://localhost:\(https.port)/sms", "api": "webhook", "secretFile": "\(dir)/sms-secret",
                      "caFile": "\(certificates.caPath)", "allowedCountryCodes": ["1"], "appNames": {"default": "Rain Test"}}}}
            """
        let h: DaemonHarness
        do {
            h = try await DaemonHarness.start(config: config)
        } catch {
            await smtp.stop()
            await https.stop()
            throw error
        }
        defer { h.shutdown() }
        let p = h.provider()

        try await p.sendLoginCode(to: .phone("+1 555 123 4567"))
        let request = try #require(try https.requests().first)
        #expect(request.signatureValid == true)
        #expect(request.body.contains("\"to\":\"+15551234567\""))
        let smsCode = try #require(request.body.firstMatch(of: /[0-9]{6}/)).output
        #expect(request.body.contains("is your Rain Test login code"))

        try await p.sendLoginCode(to: .email("user@example.com"))
        let mail = try #require(try smtp.mails().first)
        #expect(mail.login == "rain")
        #expect(mail.headers["Subject"] == "Your Rain Test login code")
        #expect(mail.parts.map(\.type) == ["text/plain", "text/html"])
        let code = try #require(mail.parts.first?.text.firstMatch(of: /[0-9]{6}/)).output
        #expect(mail.parts.last?.text.contains("<strong>\(code)</strong>") == true)

        // Another contact on the device retired the SMS code; the email's logs in.
        try await p.confirmLoginCode(String(code))
        #expect(try await p.currentSession().authState == .authenticated)
        // A number outside the allowed country codes: RAIN_102, nothing sent.
        await #expect(throws: RainError.self) { try await p.sendLoginCode(to: .phone("+44 20 7946 0958")) }
        #expect(try https.requests().count == 1)
        let log = h.log
        #expect(!log.contains(String(code)))
        #expect(!log.contains(String(smsCode)))
        #expect(!log.contains("smtp-pass"))
        await smtp.stop()
        await https.stop()
    }
}
