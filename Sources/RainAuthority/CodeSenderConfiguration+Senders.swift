import RainAuthorityAPI
import RainCodeSenderSettings
import RainCore

extension CodeSenderConfiguration {
    /// The sender: reads and checks the secret files now.
    /// - Parameter smsBudget: where the SMS sender counts its hourly budget (the authority's
    ///   store, `StoreSMSBudget`); nil: in the sender's memory.
    /// - Throws: RAIN_102 for a secret file that is missing, linked, another user's or readable by others.
    public func makeSender(smsBudget: (any SMSBudget)? = nil, logger: Logger) throws(RainError) -> any CodeSender {
        let email = try smtp.map { (s) throws(RainError) in try SMTPCodeSender(settings: s, logger: logger.child("smtp")) }
        let phone = try sms.map { (s) throws(RainError) in
            try SMSCodeSender(settings: s, budget: smsBudget, logger: logger.child("sms"))
        }
        return ContactKindCodeSender(email: email, phone: phone)
    }
}

/// Routes each code by its contact's kind: email to the SMTP sender, phone numbers to the SMS
/// sender; a kind without a sender is refused with RAIN_102 before anything is sent.
public struct ContactKindCodeSender: CodeSender {
    let email: (any CodeSender)?
    let phone: (any CodeSender)?

    /// A router over the two senders (nil: that kind is refused).
    public init(email: (any CodeSender)?, phone: (any CodeSender)?) {
        self.email = email
        self.phone = phone
    }

    func sender(for kind: String) throws(RainError) -> any CodeSender {
        switch kind {
        case "email":
            if let email { return email }
        case "phone":
            if let phone { return phone }
        default: break
        }
        throw RainError.invalid(
            "this authority does not send codes to \(kind == "phone" ? "phone numbers" : "this kind of contact"); "
                + "use \(kind == "phone" ? "an email address" : "a phone number")", field: "contact")
    }

    /// Forwards to the sender of the delivery's contact kind.
    public func deliver(_ delivery: OutboxDelivery) async throws {
        try await sender(for: delivery.kind).deliver(delivery)
    }

    /// Forwards to the sender of the message's contact kind.
    public func deliver(_ message: CodeMessage) async throws {
        try await sender(for: message.delivery.kind).deliver(message)
    }
}
