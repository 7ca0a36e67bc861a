import Dispatch
import Foundation
import RainAuthorityAPI
import RainCore
import RainCrypto

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
    public var templates: [CodeMessage.Purpose: String]

    /// The default messages.
    public static let defaultTemplates: [CodeMessage.Purpose: String] = [
        .login: "{{code}} is your {{app}} login code. It expires in {{minutes}} min.",
        .contactVerification: "{{code}} is your {{app}} verification code. It expires in {{minutes}} min.",
    ]

    /// Settings with the default templates and timeouts (10 s to connect, 30 s in all).
    public init(
        url: String, api: API, allowedCountryCodes: [String], hourlyBudget: Int = 100, caFile: String? = nil,
        connectTimeout: Duration = .seconds(10), timeout: Duration = .seconds(30), appNames: [String: String] = [:],
        templates: [CodeMessage.Purpose: String] = SMSSettings.defaultTemplates
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
        for purpose in CodeMessage.Purpose.allCases {
            guard let template = templates[purpose] else {
                throw RainError.invalid("\(path).templates.\(purpose.rawValue) is missing", field: "\(path).templates")
            }
            try CodeMessageText.requireBodyText(template, field: "\(path).templates.\(purpose.rawValue)")
        }
    }
}

/// Delivers codes by SMS through an HTTPS gateway (libcurl): a signed JSON webhook or the
/// form-encoded API of most providers (see `SMSSettings.API`).
///
/// Before the request: the number's country calling code must be allowed (else RAIN_102,
/// reason `countryNotAllowed`) and the hourly budget must have room (else RAIN_302, reason
/// `smsBudget`, with when to retry); both refusals give the send-limit slot back. A 2xx answer is
/// acceptance; 401/403 and other 4xx are RAIN_501 refusals, 408/429/5xx RAIN_301 refusals (the
/// budget's slot is given back too); a timeout or a dropped connection once the request was sent
/// is RAIN_501 saying it may have arrived, and keeps its budget slot. Requests run on the sender's
/// own concurrent queue. The code is never logged; the message only masked, at debug.
///
/// The budget is counted in an `SMSBudget`: the authority's store in the daemons (shared by every
/// instance on it, kept across restarts), else this sender's memory. A store that cannot count it
/// is a RAIN_301 refusal: nothing is sent.
public final class SMSCodeSender: CodeSender {
    /// The window `SMSSettings.hourlyBudget` counts messages in.
    public static let budgetWindow: Duration = .seconds(3600)

    /// The settings.
    public let settings: SMSSettings
    private let secret: String
    private let clock: any RainClock
    private let logger: Logger
    /// Where the messages handed to the gateway are counted.
    private let budget: any SMSBudget
    private let queue = DispatchQueue(label: "rain.authority.sms", attributes: .concurrent)

    /// A sender with `settings`, whose secret file (webhook secret or API token) is read now.
    /// - Parameter budget: where the hourly budget is counted (the authority's store:
    ///   `StoreSMSBudget`); nil: in this sender's memory (`InMemorySMSBudget`).
    /// - Throws: RAIN_102 for invalid settings or a secret file that is missing, linked, owned by
    ///   another user or readable by others.
    public init(
        settings: SMSSettings, budget: (any SMSBudget)? = nil, clock: any RainClock = SystemClock(), logger: Logger
    ) throws(RainError) {
        try settings.validate()
        switch settings.api {
        case .webhook(let file): secret = try CodeMessageText.readSecretFile(file, field: "codeSender.secretFile")
        case .form(_, let file, _): secret = try CodeMessageText.readSecretFile(file, field: "codeSender.tokenFile")
        }
        self.settings = settings
        self.budget = budget ?? InMemorySMSBudget()
        self.clock = clock
        self.logger = logger
    }

    /// Sends a login code (`CodeMessage.login`: the default code lifetime after `sentAt`).
    public func deliver(_ delivery: OutboxDelivery) async throws(RainError) {
        try await deliver(CodeMessage.login(delivery))
    }

    /// Sends the code's SMS and returns once the gateway accepted it.
    /// - Throws: as the type's discussion says.
    public func deliver(_ message: CodeMessage) async throws(RainError) {
        let delivery = message.delivery
        guard delivery.kind == "phone" else {
            throw RainError.invalid(
                "the sms code sender sends to phone numbers only; configure an smtp sender for email", field: "contact")
        }
        try CodeMessageText.requireSingleLine(delivery.contact, field: "contact")
        try requireAllowedCountry(delivery.contact)
        let appName = settings.appNames[delivery.appID] ?? delivery.appID
        try CodeMessageText.requireSingleLine(appName, field: "appId")
        guard let template = settings.templates[message.purpose] else {
            throw RainError.invalid("no template for \(message.purpose.rawValue)", field: "codeSender.templates")
        }
        let text = CodeMessageText.render(template, message, appName: appName)
        let transfer = try request(message, text: text)
        let slot = try await takeBudgetSlot()
        logger.debug(
            "sms.message", ["app": delivery.appID, "text": CodeMessageText.masked(text, code: delivery.code)])
        let result: CurlTransfer.Result
        do {
            result = try await queue.runBlocking { () throws(RainError) in try transfer.perform() }
            try Self.check(result, gateway: Self.origin(of: settings.url))
        } catch {
            if CodeDeliveryFailure.isRefusedBeforeAcceptance(error) { await giveBack(slot) }
            throw error
        }
        logger.info("sms.accepted", ["app": delivery.appID, "status": String(result.responseCode)])
    }

    /// The gateway request for `message`.
    func request(_ message: CodeMessage, text: String) throws(RainError) -> CurlTransfer {
        var transfer = CurlTransfer(
            url: settings.url, protocols: settings.url.hasPrefix("https://") ? "https" : "http",
            caFile: settings.caFile, body: [], connectTimeout: settings.connectTimeout, totalTimeout: settings.timeout)
        switch settings.api {
        case .webhook:
            struct Payload: Encodable {
                var appId: String
                var body: String
                var purpose: String
                var to: String
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let payload = Payload(
                appId: message.delivery.appID, body: text, purpose: message.purpose.rawValue,
                to: message.delivery.contact)
            let body: [UInt8]
            do {
                body = Array(try encoder.encode(payload))
            } catch {
                throw RainError(.internalError, "cannot encode an SMS webhook request")
            }
            let timestamp = String(clock.now.unixMilliseconds / 1000)
            transfer.body = body
            transfer.headers = [
                "Content-Type: application/json",
                "X-Rain-Timestamp: \(timestamp)",
                "X-Rain-Signature: v1=\(Self.signature(timestamp: timestamp, body: body, secret: secret))",
            ]
        case .form(let accountID, _, let from):
            transfer.url = settings.url.replacingOccurrences(of: "{{account}}", with: Self.formEncoded(accountID))
            transfer.username = accountID
            transfer.password = secret
            transfer.headers = ["Content-Type: application/x-www-form-urlencoded"]
            let fields = [("To", message.delivery.contact), ("From", from), ("Body", text)]
            transfer.body = Array(fields.map { "\($0.0)=\(Self.formEncoded($0.1))" }.joined(separator: "&").utf8)
        }
        return transfer
    }

    /// `v1=` signature of the webhook: lowercase hex HMAC-SHA256 of `TIMESTAMP.BODY`.
    public static func signature(timestamp: String, body: [UInt8], secret: String) -> String {
        let mac = HMACSHA256.authenticate(
            Array(timestamp.utf8) + [UInt8(ascii: ".")] + body, key: SymmetricKey(bytes: Array(secret.utf8)))
        return mac.map { String(format: "%02x", $0) }.joined()
    }

    /// `application/x-www-form-urlencoded` escaping (RFC 3986 unreserved characters kept).
    static func formEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.append(Character(Unicode.Scalar(byte)))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    /// Refuses a number whose country calling code is not in `allowedCountryCodes`.
    /// - Throws: RAIN_102 (field `contact`, reason `countryNotAllowed`).
    func requireAllowedCountry(_ number: String) throws(RainError) {
        let digits = number.hasPrefix("+") ? number.dropFirst() : Substring(number)
        // Calling codes are prefix-free (ITU-T E.164), so at most one matches.
        if settings.allowedCountryCodes.contains(where: { digits.hasPrefix($0) }) { return }
        var error = RainError.invalid(
            "this authority does not send SMS to this country's numbers (allowed calling codes: "
                + "\(settings.allowedCountryCodes.map { "+\($0)" }.joined(separator: ", "))); use an email address "
                + "or ask the operator to add it to codeSender.allowedCountryCodes", field: "contact")
        error.details.reason = "countryNotAllowed"
        throw error
    }

    /// Counts one message against the hourly budget.
    /// - Returns: the slot, for `giveBack`.
    /// - Throws: RAIN_302 (reason and limit `smsBudget`) with when a slot frees; RAIN_301
    ///   (`CodeDeliveryFailure.refusedTemporarily`: nothing was sent) when the store fails.
    func takeBudgetSlot() async throws(RainError) -> SMSBudgetSlot {
        let now = clock.now
        let limit = settings.hourlyBudget
        let outcome: SMSBudgetOutcome
        do {
            outcome = try await budget.take(limit: limit, window: Self.budgetWindow, now: now)
        } catch {
            logger.error("sms.budget_unavailable", ["code": error.code.description])
            throw CodeDeliveryFailure.refusedTemporarily("the SMS budget could not be checked (\(error.code))")
        }
        let clears: Date
        switch outcome {
        case .taken(let slot): return slot
        case .full(let retryAfter): clears = retryAfter
        }
        let wait = UInt64(max(0, clears.unixMilliseconds - now.unixMilliseconds))
        logger.warning("sms.budget_exhausted", ["hourlyBudget": String(limit)])
        throw RainError(
            .refused,
            "this authority's hourly SMS budget (\(limit)) is used up; try again in \((wait + 999) / 1000) s or use an "
                + "email address",
            details: RainError.Details(
                reason: "smsBudget", retryAfterMilliseconds: wait, limit: "smsBudget",
                retryAfter: Date(unixMilliseconds: clears.unixMilliseconds)))
    }

    /// Gives back a budget slot (the gateway refused the message). A store that fails now keeps
    /// the slot counted until it leaves the window: logged, never in the way of the refusal.
    func giveBack(_ slot: SMSBudgetSlot) async {
        do {
            try await budget.giveBack(slot)
        } catch {
            logger.warning("sms.budget_give_back_failed", ["code": error.code.description])
        }
    }

    /// Turns a finished request into success or a classified failure.
    static func check(_ result: CurlTransfer.Result, gateway: String) throws(RainError) {
        let what = "the SMS gateway \(gateway)"
        if result.isSuccess {
            let status = result.responseCode
            switch status {
            case 200...299: return
            case 401, 403:
                throw CodeDeliveryFailure.refusedPermanently("\(what) refused the credentials (HTTP \(status))")
            case 408, 429, 500...599:
                throw CodeDeliveryFailure.refusedTemporarily("\(what) refused the message for now (HTTP \(status))")
            default:
                throw CodeDeliveryFailure.refusedPermanently("\(what) refused the message (HTTP \(status))")
            }
        }
        if result.isCertificateFailure {
            throw CodeDeliveryFailure.refusedPermanently(
                "\(what)'s TLS certificate is not trusted (\(result.description)); set codeSender.caFile")
        }
        if result.isBodyHandedOver {
            throw CodeDeliveryFailure.uncertain(
                "\(what) did not answer (\(result.isTimeout ? "timed out" : result.description))")
        }
        throw CodeDeliveryFailure.refusedTemporarily("\(what) could not be reached (\(result.description))")
    }

    /// `https://host:port` of a URL, for messages (never its path or query).
    static func origin(of url: String) -> String {
        guard let range = url.range(of: "://") else { return url }
        let rest = url[range.upperBound...]
        return String(url[..<range.upperBound]) + String(rest.prefix { $0 != "/" && $0 != "?" })
    }
}
