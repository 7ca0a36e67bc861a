import Dispatch
import FoundationEssentials
import RainAuthorityAPI
import RainCodeSenderSettings
import RainCore
import RainCrypto

/// Delivers codes by email through an SMTP server (libcurl: STARTTLS or implicit TLS,
/// authentication), as a multipart/alternative message with a plain-text and an HTML part.
///
/// A delivery is answered only once the server accepted the message (its reply to the end of
/// the data). A refusal before that is RAIN_301 `delivery_unavailable` (4xx, no connection, no
/// greeting) or RAIN_501 `delivery_refused` (5xx: a refused recipient; bad credentials; an
/// untrusted certificate), and the send-limit slot is given back; a timeout or a dropped
/// connection after the message was handed over is RAIN_501 `delivery_uncertain`, saying it may
/// have arrived (see `CodeDeliveryFailure`). A conversation ends within the settings' connect and
/// total timeouts and within the message's `timeLimit`, whichever is shortest. Conversations run on the sender's own concurrent
/// queue, never on the Swift pool. The code is never logged; the text body only masked, at debug.
public final class SMTPCodeSender: CodeSender {
    /// The settings.
    public let settings: SMTPSettings
    private let username: String?
    private let password: String?
    private let logger: Logger
    // Concurrent: one slow server conversation must not hold up every other login.
    private let queue = DispatchQueue(label: "rain.authority.smtp", attributes: .concurrent)

    /// A sender with `settings`, whose credentials file is read (and checked) now.
    /// - Throws: RAIN_102 for invalid settings or a credentials file that is missing, linked,
    ///   owned by another user, readable by others, or without a password line.
    public init(settings: SMTPSettings, logger: Logger) throws(RainError) {
        try settings.validate()
        if let file = settings.credentialsFile {
            let text = try CodeMessageText.readSecretFile(file, field: "codeSender.credentialsFile")
            let lines = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).map {
                $0.hasSuffix("\r") ? String($0.dropLast()) : String($0)
            }
            guard lines.count == 2, !lines[0].isEmpty, !lines[1].isEmpty else {
                throw RainError.invalid(
                    "the SMTP credentials file \(file) must hold the user name on its first line and the password on "
                        + "its second", field: "codeSender.credentialsFile")
            }
            username = lines[0]
            password = lines[1]
        } else {
            username = nil
            password = nil
        }
        self.settings = settings
        self.logger = logger
    }

    /// Sends a login code (`CodeMessage.login`: the default code lifetime after `sentAt`).
    public func deliver(_ delivery: OutboxDelivery) async throws(RainError) {
        try await deliver(CodeMessage.login(delivery))
    }

    /// Sends the code's email and returns once the server accepted it.
    /// - Throws: RAIN_102 for a contact that is not an email address or holds a control character;
    ///   RAIN_301 / RAIN_501 as the type's discussion says.
    public func deliver(_ message: CodeMessage) async throws(RainError) {
        let email = try compose(message)
        let total = min(settings.timeout, message.timeLimit ?? settings.timeout)
        var transfer = CurlTransfer(
            url: url, protocols: "smtp,smtps", caFile: settings.caFile, body: email.bytes,
            connectTimeout: min(settings.connectTimeout, total), totalTimeout: total)
        transfer.requiresStartTLS = settings.security == .startTLS
        transfer.mailFrom = settings.from
        transfer.recipients = [message.delivery.contact]
        transfer.username = username
        transfer.password = password
        let prepared = transfer
        logger.debug(
            "smtp.message",
            ["app": message.delivery.appID, "text": CodeMessageText.masked(email.text, code: message.delivery.code)])
        let result = try await prepared.perform(on: queue, within: message.timeLimit)
        try Self.check(result, server: "\(settings.host):\(settings.port)")
        logger.info("smtp.accepted", ["app": message.delivery.appID, "server": "\(settings.host):\(settings.port)"])
    }

    private var url: String {
        let host = settings.host.contains(":") && !settings.host.hasPrefix("[") ? "[\(settings.host)]" : settings.host
        return "\(settings.security == .implicitTLS ? "smtps" : "smtp")://\(host):\(settings.port)"
    }

    /// Turns a finished conversation into success or a classified failure.
    static func check(_ result: CurlTransfer.Result, server: String) throws(RainError) {
        if result.isSuccess { return }
        let what = "the SMTP server \(server)"
        let reply = result.responseCode
        let diagnosis = CodeDeliveryDiagnosis(
            server: server, transferError: result.codeName, reply: reply > 0 ? "smtp \(reply)" : nil)
        if result.isLoginDenied {
            throw CodeDeliveryFailure.refusedPermanently(
                "\(what) refused the credentials (reply \(reply))", diagnosis: diagnosis)
        }
        if result.isCertificateFailure {
            throw CodeDeliveryFailure.refusedPermanently(
                "\(what)'s TLS certificate is not trusted (\(result.description)); set codeSender.caFile",
                diagnosis: diagnosis)
        }
        // An explicit refusal, at any step (the end of the data included): not accepted.
        if (500...599).contains(reply) {
            throw CodeDeliveryFailure.refusedPermanently(
                "\(what) refused the message (reply \(reply))", diagnosis: diagnosis)
        }
        if (400...499).contains(reply) {
            throw CodeDeliveryFailure.refusedTemporarily(
                "\(what) refused the message for now (reply \(reply))", diagnosis: diagnosis)
        }
        if result.isBodyHandedOver {
            throw CodeDeliveryFailure.uncertain(
                "\(what) did not confirm the message (\(result.isTimeout ? "timed out" : result.description))",
                diagnosis: diagnosis)
        }
        throw CodeDeliveryFailure.refusedTemporarily(
            "\(what) could not be reached (\(result.description))", diagnosis: diagnosis)
    }

    /// The whole message (CRLF line ends) and its plain-text body (for the masked log).
    func compose(_ message: CodeMessage) throws(RainError) -> (bytes: [UInt8], text: String) {
        let delivery = message.delivery
        guard delivery.kind == "email" else {
            throw RainError.invalid(
                "the smtp code sender sends to email addresses only; configure an sms sender for phone numbers",
                field: "contact")
        }
        try CodeMessageText.requireSingleLine(delivery.contact, field: "contact")
        guard let template = settings.templates[message.purpose] else {
            throw RainError.invalid("no template for \(message.purpose.rawValue)", field: "codeSender.templates")
        }
        let appName = settings.appNames[delivery.appID] ?? delivery.appID
        try CodeMessageText.requireSingleLine(appName, field: "appId")
        let subject = CodeMessageText.render(template.subject, message, appName: appName)
        try CodeMessageText.requireSingleLine(subject, field: "codeSender.templates.\(message.purpose.rawValue).subject")
        let text = CodeMessageText.render(template.text, message, appName: appName)
        let html = CodeMessageText.render(template.html, message, appName: appName, escape: CodeMessageText.htmlEscaped)

        let boundary = "rain-\(try SecureRandom.identifier(prefix: "b"))"
        let domain = settings.from.split(separator: "@").last.map(String.init) ?? "localhost"
        let messageID = "<\(try SecureRandom.identifier(prefix: "code"))@\(domain)>"
        let from = settings.fromName.map { "\(Self.encodedWord($0)) <\(settings.from)>" } ?? settings.from
        var lines = [
            "From: \(from)",
            "To: <\(delivery.contact)>",
            "Subject: \(Self.encodedWord(subject))",
            "Date: \(Self.rfc5322Date(delivery.sentAt))",
            "Message-ID: \(messageID)",
            "MIME-Version: 1.0",
            "Auto-Submitted: auto-generated",
            "Content-Type: multipart/alternative; boundary=\"\(boundary)\"",
            "",
        ]
        for (type, body) in [("text/plain", text), ("text/html", html)] {
            lines += [
                "--\(boundary)",
                "Content-Type: \(type); charset=utf-8",
                "Content-Transfer-Encoding: base64",
                "",
            ]
            lines += Self.base64Lines(Self.crlf(body))
        }
        lines += ["--\(boundary)--", ""]
        return (Array(lines.joined(separator: "\r\n").utf8), text)
    }

    /// LF (or CRLF) line ends as CRLF.
    static func crlf(_ text: String) -> String {
        text.replacing("\r\n", with: "\n").replacing("\n", with: "\r\n")
    }

    /// Base64 in lines of 76 characters.
    static func base64Lines(_ text: String) -> [String] {
        let encoded = Data(text.utf8).base64EncodedString()
        var out: [String] = []
        var index = encoded.startIndex
        while index < encoded.endIndex {
            let end = encoded.index(index, offsetBy: 76, limitedBy: encoded.endIndex) ?? encoded.endIndex
            out.append(String(encoded[index..<end]))
            index = end
        }
        return out
    }

    /// A header value as it is when plain printable ASCII, else an RFC 2047 encoded word.
    static func encodedWord(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) && !text.contains("=?") { return text }
        return "=?UTF-8?B?\(Data(text.utf8).base64EncodedString())?="
    }

    /// `Wed, 02 Dec 2026 11:41:37 +0000`.
    static func rfc5322Date(_ date: Date) -> String {
        DateText.rfc5322(date)
    }
}
