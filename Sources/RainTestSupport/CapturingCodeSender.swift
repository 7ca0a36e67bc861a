import RainAuthority
import RainAuthorityAPI
import RainCore
import Synchronization

/// A code sender that keeps its deliveries in memory, so a test can read the code that would have
/// been sent; it can be told to fail. The one fake for every test of the authority and the device.
public final class CapturingCodeSender: CodeSender {
    private let state = Mutex<(deliveries: [OutboxDelivery], failure: RainError?)>(([], nil))

    /// A sender that delivers until told to fail.
    public init() {}

    /// Keeps the delivery, or throws the failure set with `fail(with:)`.
    public func deliver(_ delivery: OutboxDelivery) async throws {
        try state.withLock { s throws(RainError) in
            if let failure = s.failure { throw failure }
            s.deliveries.append(delivery)
        }
    }

    /// Everything delivered so far, oldest first.
    public var deliveries: [OutboxDelivery] { state.withLock { $0.deliveries } }

    /// Makes later deliveries fail with `error` (nil: succeed again).
    public func fail(with error: RainError?) { state.withLock { $0.failure = error } }

    /// The code of the latest delivery, nil before the first.
    public var lastCode: String? { state.withLock { $0.deliveries.last?.code } }

    /// The code of the latest delivery to `contact`.
    /// - Throws: RAIN_102 when nothing was delivered to it.
    public func lastCode(to contact: RainWalletContact) throws(RainError) -> String {
        guard let delivery = deliveries.last(where: { $0.contact == contact.value && $0.kind == contact.kindName }) else {
            throw RainError.invalid("no code was delivered to \(contact.kindName) \(contact.value)", field: "contact")
        }
        return delivery.code
    }
}
