import Dispatch
import FoundationEssentials
import RainAuthorityAPI
import RainCodeSenderSettings
import RainCore
import RainCrypto

/// Delivers codes by SMS through an HTTPS gateway (libcurl): a signed JSON webhook or the
/// form-encoded API of most providers (see `SMSSettings.API`).
///
/// Before the request: the number's country calling code must be allowed (else RAIN_102,
/// reason `country_not_allowed`) and the hourly budget must have room (else RAIN_302, reason
/// `sms_budget`, with when to retry); both refusals give the send-limit slot back. A 2xx answer is
/// acceptance; 401/403 and other 4xx are RAIN_501 `delivery_refused`, 408/429/5xx and no
/// connection RAIN_301 `delivery_unavailable` (the budget's slot is given back too); a timeout or a
/// dropped connection once the request was sent is RAIN_501 `delivery_uncertain`, saying it may
/// have arrived, and keeps its budget slot. A request ends within the settings' connect and total
/// timeouts and within the message's `timeLimit`, whichever is shortest. Requests run on the sender's
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
            result = try await transfer.perform(on: queue, within: message.timeLimit)
            try Self.check(result, gateway: Self.origin(of: settings.url))
        } catch {
            if CodeDeliveryFailure.isRefusedBeforeAcceptance(error) { await giveBack(slot) }
            throw error
        }
        logger.info("sms.accepted", ["app": delivery.appID, "status": String(result.responseCode)])
    }

    /// The gateway request for `message`.
    func request(_ message: CodeMessage, text: String) throws(RainError) -> CurlTransfer {
        let total = min(settings.timeout, message.timeLimit ?? settings.timeout)
        var transfer = CurlTransfer(
            url: settings.url, protocols: settings.url.hasPrefix("https://") ? "https" : "http",
            caFile: settings.caFile, body: [], connectTimeout: min(settings.connectTimeout, total), totalTimeout: total)
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
            transfer.url = settings.url.replacing("{{account}}", with: Self.formEncoded(accountID))
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
        return mac.map { CFormat.string("%02x", UInt32($0)) }.joined()
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
                out += CFormat.string("%%%02X", UInt32(byte))
            }
        }
        return out
    }

    /// Refuses a number whose country calling code is not in `allowedCountryCodes`.
    /// - Throws: RAIN_102 (field `contact`, reason `country_not_allowed`).
    func requireAllowedCountry(_ number: String) throws(RainError) {
        let digits = number.hasPrefix("+") ? number.dropFirst() : Substring(number)
        // Calling codes are prefix-free (ITU-T E.164), so at most one matches.
        if settings.allowedCountryCodes.contains(where: { digits.hasPrefix($0) }) { return }
        var error = RainError.invalid(
            "this authority does not send SMS to this country's numbers (allowed calling codes: "
                + "\(settings.allowedCountryCodes.map { "+\($0)" }.joined(separator: ", "))); use an email address "
                + "or ask the operator to add it to codeSender.allowedCountryCodes", field: "contact")
        error.details.reason = "country_not_allowed"
        throw error
    }

    /// Counts one message against the hourly budget.
    /// - Returns: the slot, for `giveBack`.
    /// - Throws: RAIN_302 (reason and limit `sms_budget`) with when a slot frees; RAIN_301
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
                reason: "sms_budget", retryAfterMilliseconds: wait, limit: "sms_budget",
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
        let status = result.responseCode
        let diagnosis = CodeDeliveryDiagnosis(
            server: gateway, transferError: result.isSuccess ? nil : result.codeName,
            reply: status > 0 ? "http \(status)" : nil)
        if result.isSuccess {
            switch status {
            case 200...299: return
            case 401, 403:
                throw CodeDeliveryFailure.refusedPermanently(
                    "\(what) refused the credentials (HTTP \(status))", diagnosis: diagnosis)
            case 408, 429, 500...599:
                throw CodeDeliveryFailure.refusedTemporarily(
                    "\(what) refused the message for now (HTTP \(status))", diagnosis: diagnosis)
            default:
                throw CodeDeliveryFailure.refusedPermanently(
                    "\(what) refused the message (HTTP \(status))", diagnosis: diagnosis)
            }
        }
        if result.isCertificateFailure {
            throw CodeDeliveryFailure.refusedPermanently(
                "\(what)'s TLS certificate is not trusted (\(result.description)); set codeSender.caFile",
                diagnosis: diagnosis)
        }
        if result.isBodyHandedOver {
            throw CodeDeliveryFailure.uncertain(
                "\(what) did not answer (\(result.isTimeout ? "timed out" : result.description))", diagnosis: diagnosis)
        }
        throw CodeDeliveryFailure.refusedTemporarily(
            "\(what) could not be reached (\(result.description))", diagnosis: diagnosis)
    }

    /// `https://host:port` of a URL, for messages and logs (never its user information, path or
    /// query).
    static func origin(of url: String) -> String {
        guard let range = url.firstRange(of: "://") else { return "<url>" }
        let authority = url[range.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        return String(url[..<range.upperBound]) + String(host)
    }
}
