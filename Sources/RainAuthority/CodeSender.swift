import FoundationEssentials
import RainAuthorityAPI
import RainCodeSenderSettings
import RainCore

/// Delivers login codes to people: the role behind the `outbox`, `command`, `smtp` and `sms`
/// senders (docs/operations.md "Sending codes").
///
/// A delivery carries the code in clear: implementations never log it and never put it in an
/// error message.
///
/// How a failure is reported decides who pays for it (honest delivery): throw
/// `CodeDeliveryFailure.refusedTemporarily` (RAIN_301 `delivery_unavailable`) or
/// `.refusedPermanently` (RAIN_501 `delivery_refused`) when the provider refused before accepting
/// the message, so the send-limit slot is given back; `.uncertain` (RAIN_501 `delivery_uncertain`)
/// when the message was handed off and no answer came (it may have arrived: the slot stays
/// counted). Any other error counts as uncertain. A sender that talks to a server attaches a
/// `CodeDeliveryDiagnosis` (`RainError.underlying`) for the authority's log.
///
/// A delivery ends within `CodeMessage.timeLimit` when it is set (the caller's deadline less the
/// time to answer), as well as within the sender's own timeouts.
public protocol CodeSender: Sendable {
    /// Delivers one code.
    /// - Throws: see the protocol's discussion.
    func deliver(_ delivery: OutboxDelivery) async throws

    /// Delivers one code with what a message to a person says besides it: why it was sent and
    /// when it expires. The default forwards to `deliver(_:)`.
    func deliver(_ message: CodeMessage) async throws
}

extension CodeSender {
    /// Forwards to `deliver(_:)`: senders that write the code as data need nothing more.
    public func deliver(_ message: CodeMessage) async throws {
        try await deliver(message.delivery)
    }
}

/// One code to deliver, with the purpose and the expiry a message's templates use.
public struct CodeMessage: Sendable, Equatable {
    /// Why a code is sent: it picks the message's templates.
    public typealias Purpose = CodeMessagePurpose

    /// The app, contact and code.
    public var delivery: OutboxDelivery
    /// Why the code is sent.
    public var purpose: Purpose
    /// When the code stops working.
    public var expiresAt: Date
    /// How long the delivery may take from when it is handed to the sender: what is left of the
    /// caller's deadline once the authority keeps time to answer. Nil: only the sender's own
    /// timeouts bound it (a caller without a deadline).
    public var timeLimit: Duration?

    /// A message for `delivery`, bounded by `timeLimit` when it is set.
    public init(delivery: OutboxDelivery, purpose: Purpose, expiresAt: Date, timeLimit: Duration? = nil) {
        self.delivery = delivery
        self.purpose = purpose
        self.expiresAt = expiresAt
        self.timeLimit = timeLimit
    }

    /// A login code handed over without its message (`CodeSender.deliver(_ delivery:)`): it
    /// expires the default code lifetime (`AuthoritySettings().codeLifetime`) after it was sent.
    public static func login(_ delivery: OutboxDelivery) -> CodeMessage {
        CodeMessage(
            delivery: delivery, purpose: .login,
            expiresAt: delivery.sentAt.addingTimeInterval(TimeInterval(AuthoritySettings().codeLifetime.components.seconds)))
    }
}

/// The errors a sender reports, classified by whether the provider can have accepted the message.
public enum CodeDeliveryFailure {
    /// `details.reason` of a permanent refusal before acceptance (RAIN_501).
    public static let refusedReason = "delivery_refused"
    /// `details.reason` of a temporary refusal before acceptance (RAIN_301): trying again later
    /// may work.
    public static let unavailableReason = "delivery_unavailable"
    /// `details.reason` of a failure after the hand-off.
    public static let uncertainReason = "delivery_uncertain"

    /// RAIN_301 `delivery_unavailable`: the provider refused for now (a 4xx SMTP reply, HTTP 408,
    /// 429 or 5xx, no connection, no greeting); nobody received the code, the send-limit slot is
    /// given back.
    public static func refusedTemporarily(_ what: String, diagnosis: CodeDeliveryDiagnosis? = nil) -> RainError {
        RainError(
            .network, "\(what); the code was not sent, try again in a moment",
            details: RainError.Details(reason: unavailableReason), underlying: diagnosis)
    }

    /// RAIN_501 `delivery_refused`: the provider refused for good (bad credentials, a refused
    /// recipient, an untrusted certificate); nobody received the code, the slot is given back.
    public static func refusedPermanently(_ what: String, diagnosis: CodeDeliveryDiagnosis? = nil) -> RainError {
        RainError(
            .provider, "\(what); the code was not sent (the operator must fix the sender's settings or the contact)",
            details: RainError.Details(reason: refusedReason), underlying: diagnosis)
    }

    /// RAIN_501 `delivery_uncertain`: the message was handed off and no acceptance came back (a
    /// timeout, a dropped connection): it may have arrived, so it counts against the send limits.
    public static func uncertain(_ what: String, diagnosis: CodeDeliveryDiagnosis? = nil) -> RainError {
        RainError(
            .provider,
            "\(what) after the message was handed over: it may have arrived; check before asking for another code",
            details: RainError.Details(reason: uncertainReason), underlying: diagnosis)
    }

    /// True when `error` says nobody can have received the code: a refusal before acceptance, a
    /// value the sender would not send (RAIN_102) or a sender's own limit (RAIN_302).
    public static func isRefusedBeforeAcceptance(_ error: any Error) -> Bool {
        guard let rain = error as? RainError else { return false }
        switch rain.code {
        case .network, .invalidArgument, .refused: return true
        case .provider: return rain.details.reason == refusedReason
        default: return false
        }
    }
}

/// What a failed delivery looked like on the network, for the operator's log: which server, how
/// the transfer ended and what the server last answered. Never the code, the contact or a
/// credential. Carried in the failure's `RainError.underlying` (never sent over the wire).
public struct CodeDeliveryDiagnosis: Error, Sendable, Equatable {
    /// `host:port` of the SMTP server, or the SMS gateway's origin (no user information, path or
    /// query).
    public var server: String
    /// How the transfer ended: libcurl's result as `number (text)`, e.g. `28 (Timeout was
    /// reached)`; nil when it ended normally.
    public var transferError: String?
    /// The server's last SMTP reply code (`smtp 451`) or HTTP status (`http 503`); nil when none
    /// came.
    public var reply: String?

    /// A diagnosis of a delivery through `server`.
    public init(server: String, transferError: String? = nil, reply: String? = nil) {
        self.server = server
        self.transferError = transferError
        self.reply = reply
    }
}
