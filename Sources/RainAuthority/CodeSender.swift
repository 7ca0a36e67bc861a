import RainAuthorityAPI
import RainCore

/// Delivers login codes to people: the role behind the `outbox` and `command` senders (README "Walkthrough").
///
/// A delivery carries the code in clear: implementations never log it and never put it in an
/// error message.
public protocol CodeSender: Sendable {
    /// Delivers one code.
    /// - Throws: RAIN_501 (or any error, which the authority reports as RAIN_501) when the code
    ///   could not be handed over.
    func deliver(_ delivery: OutboxDelivery) async throws
}
