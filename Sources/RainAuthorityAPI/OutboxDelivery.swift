import FoundationEssentials
import RainCore
import RainWire

/// One delivery in the development outbox.
public struct OutboxDelivery: Sendable, Equatable, Codable {
    public var appID: String
    /// `email` or `phone`.
    public var kind: String
    public var contact: String
    public var code: String
    public var sentAt: Date

    public init(appID: String, kind: String, contact: String, code: String, sentAt: Date) {
        self.appID = appID
        self.kind = kind
        self.contact = contact
        self.code = code
        self.sentAt = sentAt
    }
}

extension ListOutboxResponse {
    /// The outbox as it travels (the authority hop and the device protocol share the message).
    public init(deliveries: [OutboxDelivery]) {
        self.init(
            entries: deliveries.map { d in
                OutboxEntry(
                    contact: d.kind == "phone" ? .phone(d.contact) : .email(d.contact), code: d.code, sentAt: d.sentAt,
                    appID: d.appID)
            })
    }

    /// The deliveries the entries describe; an entry of an unknown contact kind keeps an empty kind
    /// and contact.
    public var deliveries: [OutboxDelivery] {
        entries.map { e in
            OutboxDelivery(
                appID: e.appID, kind: e.contact?.kindName ?? "", contact: e.contact?.value ?? "", code: e.code,
                sentAt: e.sentAt)
        }
    }
}
