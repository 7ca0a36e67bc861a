import RainCore

/// The settings of the `smtp` code sender (config `codeSender` with `"type": "smtp"`).
public struct SMTPSettings: Sendable, Equatable {
    /// How the connection is protected.
    public enum Security: String, Sendable, Equatable, CaseIterable {
        /// Plain connection upgraded with STARTTLS, which is required (port 587).
        case startTLS = "starttls"
        /// TLS from the first byte (port 465).
        case implicitTLS = "tls"
        /// No TLS: only to a server on this machine (a local relay).
        case none
    }

    /// The subject, plain-text body and HTML body of one purpose's email.
    public struct Template: Sendable, Equatable {
        public var subject: String
        public var text: String
        public var html: String

        public init(subject: String, text: String, html: String) {
            self.subject = subject
            self.text = text
            self.html = html
        }
    }

    /// The server's host name or IP address.
    public var host: String
    /// The server's port (587 for STARTTLS, 465 for implicit TLS).
    public var port: Int
    public var security: Security
    /// A file (mode 0600, the daemon's user) holding the user name on its first line and the
    /// password on its second; nil: no authentication.
    public var credentialsFile: String?
    /// The sender's address (`MAIL FROM` and `From:`).
    public var from: String
    /// The name shown with `from`; nil: none.
    public var fromName: String?
    /// A PEM bundle of the certificate authorities to trust instead of the system's.
    public var caFile: String?
    public var connectTimeout: Duration
    /// The whole conversation's limit (a server silent after the message may hold a delivery up
    /// to about 1.5 times this: libcurl's SMTP cleanup waits for its reply on its own).
    public var timeout: Duration
    /// Display names of app ids, for `{{app}}`.
    public var appNames: [String: String]
    /// The templates of each purpose.
    public var templates: [CodeMessagePurpose: Template]

    /// The default templates.
    public static let defaultTemplates: [CodeMessagePurpose: Template] = [
        .login: Template(
            subject: "Your {{app}} login code",
            text:
                "Your {{app}} login code is {{code}}.\n\nIt expires in {{minutes}} minutes. If you did not ask for it, ignore this email.\n",
            html:
                "<p>Your {{app}} login code is <strong>{{code}}</strong>.</p>\n<p>It expires in {{minutes}} minutes. If you did not ask for it, ignore this email.</p>\n"
        ),
        .contactVerification: Template(
            subject: "Confirm this address for {{app}}",
            text:
                "Your {{app}} verification code is {{code}}.\n\nIt expires in {{minutes}} minutes. If you did not ask for it, ignore this email.\n",
            html:
                "<p>Your {{app}} verification code is <strong>{{code}}</strong>.</p>\n<p>It expires in {{minutes}} minutes. If you did not ask for it, ignore this email.</p>\n"
        ),
    ]

    /// Settings with the default templates and timeouts (10 s to connect, 30 s in all).
    public init(
        host: String, port: Int, security: Security, from: String, credentialsFile: String? = nil,
        fromName: String? = nil, caFile: String? = nil, connectTimeout: Duration = .seconds(10),
        timeout: Duration = .seconds(30), appNames: [String: String] = [:],
        templates: [CodeMessagePurpose: Template] = SMTPSettings.defaultTemplates
    ) {
        self.host = host
        self.port = port
        self.security = security
        self.from = from
        self.credentialsFile = credentialsFile
        self.fromName = fromName
        self.caFile = caFile
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.appNames = appNames
        self.templates = templates
    }

    /// Checks every value a message is made of.
    /// - Throws: RAIN_102 (`details.field` under `path`) for a control character in a one-line value
    ///   or a subject, a body with a control character other than a line feed or tab, a port out of
    ///   range, `none` to a server that is not on this machine, or a from-address without `@`.
    public func validate(path: String = "codeSender") throws(RainError) {
        guard (1...65535).contains(port) else {
            throw RainError.invalid("\(path).port must be from 1 to 65535", field: "\(path).port")
        }
        try CodeMessageText.requireSingleLine(host, field: "\(path).host")
        guard !host.isEmpty, !host.contains("/"), !host.contains("@") else {
            throw RainError.invalid("\(path).host must be a host name or an IP address", field: "\(path).host")
        }
        if security == .none, !CodeMessageText.isLoopback(host) {
            throw RainError.invalid(
                "\(path).security \"none\" sends codes in clear: only to a server on this machine (127.0.0.1, ::1, "
                    + "localhost); use \"starttls\" or \"tls\"", field: "\(path).security")
        }
        try CodeMessageText.requireSingleLine(from, field: "\(path).from")
        guard from.contains("@"), !from.contains("<"), !from.contains(">"), !from.contains(" ") else {
            throw RainError.invalid("\(path).from must be an address like codes@example.com", field: "\(path).from")
        }
        if let fromName { try CodeMessageText.requireSingleLine(fromName, field: "\(path).fromName") }
        for (app, name) in appNames.sorted(by: { $0.key < $1.key }) {
            try CodeMessageText.requireSingleLine(name, field: "\(path).appNames.\(app)")
        }
        for purpose in CodeMessagePurpose.allCases {
            guard let template = templates[purpose] else {
                throw RainError.invalid("\(path).templates.\(purpose.rawValue) is missing", field: "\(path).templates")
            }
            let field = "\(path).templates.\(purpose.rawValue)"
            try CodeMessageText.requireSingleLine(template.subject, field: "\(field).subject")
            try CodeMessageText.requireBodyText(template.text, field: "\(field).text")
            try CodeMessageText.requireBodyText(template.html, field: "\(field).html")
        }
    }
}
