import Foundation
import RainAuthorityAPI
import RainCodeSenderSettings
import RainCore
import RainTestSupport
import Testing

@testable import RainAuthority

/// The `smtp` and `sms` objects of a `codeSender` setting (docs/operations.md "Sending codes"): what parses,
/// what is refused, and the routing of each contact kind to its sender.
@Suite("Code sender configuration")
struct CodeSenderConfigurationTests {
    static func parse(_ json: String) throws -> CodeSenderConfiguration {
        try CodeSenderConfiguration.parse(
            try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8)), path: "codeSender")
    }

    @Test("the documented example parses to the settings it shows; template parts left out keep the defaults")
    func example() throws {
        let c = try Self.parse(
            """
            {"type": "smtp",
             "smtp": {"host": "smtp.example.com", "port": 587, "security": "starttls", "from": "codes@example.com",
                      "credentialsFile": "/etc/rainwallet/smtp-credentials", "timeoutSeconds": 20,
                      "appNames": {"myapp": "My App"},
                      "templates": {"login": {"subject": "{{app}}: your code"}}},
             "sms": {"url": "https://sms.example.com/Accounts/{{account}}/Messages.json", "api": "form",
                     "accountId": "AC1", "tokenFile": "/etc/rainwallet/sms-token", "from": "+15550001111",
                     "allowedCountryCodes": ["1", "44"], "hourlyBudget": 50}}
            """)
        let smtp = try #require(c.smtp)
        #expect(smtp.host == "smtp.example.com")
        #expect(smtp.port == 587)
        #expect(smtp.security == .startTLS)
        #expect(smtp.timeout == .seconds(20))
        #expect(smtp.appNames == ["myapp": "My App"])
        #expect(smtp.templates[.login]?.subject == "{{app}}: your code")
        #expect(smtp.templates[.login]?.text == SMTPSettings.defaultTemplates[.login]?.text)
        let sms = try #require(c.sms)
        #expect(sms.api == .form(accountID: "AC1", tokenFile: "/etc/rainwallet/sms-token", from: "+15550001111"))
        #expect(sms.allowedCountryCodes == ["1", "44"])
        #expect(sms.hourlyBudget == 50)
    }

    @Test(
        "invalid objects are RAIN_102 naming the key",
        arguments: [
            (#"{"type": "smtp"}"#, "codeSender.smtp"),
            (#"{"type": "smtp", "smtp": {"host": "h", "from": "a@b.c", "password": "x"}}"#, "codeSender.smtp.password"),
            (
                #"{"type": "smtp", "smtp": {"host": "smtp.example.com", "from": "a@b.c", "security": "none"}}"#,
                "codeSender.smtp.security"
            ),
            (
                #"{"type": "smtp", "smtp": {"host": "h", "from": "a@b.c", "templates": {"login": {"subject": "a\r\nBcc: x"}}}}"#,
                "codeSender.smtp.templates.login.subject"
            ),
            (
                #"{"type": "smtp", "smtp": {"host": "h", "from": "a@b.c", "credentialsFile": "relative"}}"#,
                "codeSender.smtp.credentialsFile"
            ),
            (
                #"{"type": "sms", "sms": {"url": "https://x", "api": "webhook", "secretFile": "/s"}}"#,
                "codeSender.sms.allowedCountryCodes"
            ),
            (
                #"{"type": "sms", "sms": {"url": "https://x", "api": "webhook", "allowedCountryCodes": ["1"]}}"#,
                "codeSender.sms.secretFile"
            ),
            (
                #"{"type": "sms", "sms": {"url": "http://x.example", "api": "webhook", "secretFile": "/s", "allowedCountryCodes": ["1"]}}"#,
                "codeSender.sms.url"
            ),
            (
                #"{"type": "sms", "sms": {"url": "https://x", "api": "form", "tokenFile": "/t", "from": "+1", "allowedCountryCodes": ["1"]}}"#,
                "codeSender.sms.accountId"
            ),
        ])
    func refused(_ json: String, _ field: String) throws {
        do {
            _ = try Self.parse(json)
            Issue.record("accepted \(json)")
        } catch let error as RainError {
            #expect(error.code == .invalidArgument)
            #expect(error.details.field == field)
        }
    }

    @Test("email goes to the SMTP sender, phone numbers to the SMS sender; a kind without one is RAIN_102")
    func routing() async throws {
        let email = CapturingCodeSender()
        let router = ContactKindCodeSender(email: email, phone: nil)
        let sentAt = Date(unixMilliseconds: 1_800_000_000_000)
        try await router.deliver(
            OutboxDelivery(appID: "app", kind: "email", contact: "a@example.com", code: "123456", sentAt: sentAt))
        #expect(email.deliveries.count == 1)
        let error = await rainError {
            try await router.deliver(
                OutboxDelivery(appID: "app", kind: "phone", contact: "+15551234567", code: "123456", sentAt: sentAt))
        }
        #expect(error?.code == .invalidArgument)
        #expect(error.map { CodeDeliveryFailure.isRefusedBeforeAcceptance($0) } == true)
    }
}
