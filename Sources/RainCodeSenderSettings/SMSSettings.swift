import RainCore

/// The settings of the `sms` code sender (config `codeSender` with `"type": "sms"`).
public struct SMSSettings: Sendable, Equatable {
    /// How the gateway is called.
    public enum API: Sendable, Equatable {
        /// POST of `{"appId","body","purpose","to"}` (JSON, sorted keys), signed: header
        /// `X-Rain-Timestamp` (Unix seconds) and `X-Rain-Signature: v1=HEX`, the HMAC-SHA256 under
        /// the secret of `TIMESTAMP + "." + BODY`. The secret is read from `secretFile` (0600).
        case webhook(secretFile: String)
        /// POST `application/x-www-form-urlencoded` of `To`, `From`, `Body`, with HTTP basic
        /// authentication `accountID:token`, the token read from `tokenFile` (0600): the shape
        /// most SMS providers take. `{{account}}` in the URL is replaced by the account id.
        case form(accountID: String, tokenFile: String, from: String)
    }

    /// `https://…` (plain `http://` only to this machine).
    public var url: String
    public var api: API
    /// A PEM bundle of the certificate authorities to trust instead of the system's.
    public var caFile: String?
    public var connectTimeout: Duration
    /// The whole request's limit.
    public var timeout: Duration
    /// At most this many messages handed to the gateway in any hour, by the authority: every
    /// instance on its store together, across restarts (`SMSBudget`; toll fraud: a flood of codes
    /// to premium numbers costs the operator).
    public var hourlyBudget: Int
    /// Country calling codes the sender may send to (`["1", "44"]`); a number outside them is refused.
    public var allowedCountryCodes: [String]
    /// Display names of app ids, for `{{app}}`.
    public var appNames: [String: String]
    /// The message of each purpose (placeholders as in `CodeMessageText`).
    public var templates: [CodeMessagePurpose: String]

    /// The default messages.
    public static let defaultTemplates: [CodeMessagePurpose: String] = [
        .login: "{{code}} is your {{app}} login code. It expires in {{minutes}} min.",
        .contactVerification: "{{code}} is your {{app}} verification code. It expires in {{minutes}} min.",
    ]

    /// Settings with the default templates and timeouts (10 s to connect, 30 s in all).
    public init(
        url: String, api: API, allowedCountryCodes: [String], hourlyBudget: Int = 100, caFile: String? = nil,
        connectTimeout: Duration = .seconds(10), timeout: Duration = .seconds(30), appNames: [String: String] = [:],
        templates: [CodeMessagePurpose: String] = SMSSettings.defaultTemplates
    ) {
        self.url = url
        self.api = api
        self.allowedCountryCodes = allowedCountryCodes
        self.hourlyBudget = hourlyBudget
        self.caFile = caFile
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.appNames = appNames
        self.templates = templates
    }

    /// Checks the settings.
    /// - Throws: RAIN_102 (`details.field` under `path`) for a URL that is not https (or http to
    ///   this machine), an empty or malformed country code list, a budget below 1, or a control
    ///   character in a value or template.
    public func validate(path: String = "codeSender") throws(RainError) {
        try CodeMessageText.requireSingleLine(url, field: "\(path).url")
        let isHTTPS = url.hasPrefix("https://")
        let isLocalHTTP =
            url.hasPrefix("http://")
            && CodeMessageText.isLoopback(String(url.dropFirst(7).prefix { $0 != "/" && $0 != ":" && $0 != "]" }))
        guard isHTTPS || isLocalHTTP else {
            throw RainError.invalid(
                "\(path).url must be https://… (plain http only to this machine)", field: "\(path).url")
        }
        guard hourlyBudget >= 1 else {
            throw RainError.invalid("\(path).hourlyBudget must be at least 1", field: "\(path).hourlyBudget")
        }
        guard !allowedCountryCodes.isEmpty,
            allowedCountryCodes.allSatisfy({ (1...3).contains($0.count) && $0.allSatisfy(\.isASCII) && Int($0) != nil })
        else {
            throw RainError.invalid(
                "\(path).allowedCountryCodes must list the country calling codes SMS may go to, like [\"1\", \"44\"]",
                field: "\(path).allowedCountryCodes")
        }
        if case .form(let account, _, let from) = api {
            try CodeMessageText.requireSingleLine(account, field: "\(path).accountId")
            try CodeMessageText.requireSingleLine(from, field: "\(path).from")
        }
        for (app, name) in appNames.sorted(by: { $0.key < $1.key }) {
            try CodeMessageText.requireSingleLine(name, field: "\(path).appNames.\(app)")
        }
        for purpose in CodeMessagePurpose.allCases {
            guard let template = templates[purpose] else {
                throw RainError.invalid("\(path).templates.\(purpose.rawValue) is missing", field: "\(path).templates")
            }
            try CodeMessageText.requireBodyText(template, field: "\(path).templates.\(purpose.rawValue)")
        }
    }
}
