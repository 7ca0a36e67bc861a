import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore

/// What an authority counts about its codes and its store, always (a few counter updates per code
/// sent); `rainwalletd authority --metrics-listen` exposes them.
public final class AuthorityMetrics: Sendable {
    /// The outcomes a code delivery is counted under.
    public static let deliveryOutcomes = [
        "delivered", CodeDeliveryFailure.refusedReason, CodeDeliveryFailure.unavailableReason,
        CodeDeliveryFailure.uncertainReason,
    ]

    /// `rainwallet_authority_code_deliveries_total{outcome}`.
    public let deliveries = MetricCounter(
        "rainwallet_authority_code_deliveries_total",
        help: "Code deliveries (login and contact verification) by outcome: delivered, delivery_refused, "
            + "delivery_unavailable, delivery_uncertain.",
        labelNames: ["outcome"], initial: AuthorityMetrics.deliveryOutcomes.map { MetricLabels($0) })

    /// `rainwallet_authority_send_limit_refusals_total{limit}`.
    public let sendLimitRefusals = MetricCounter(
        "rainwallet_authority_send_limit_refusals_total",
        help: "Code sends refused (RAIN_302) by the send limit that refused them.",
        labelNames: ["limit"], initial: CodeSendLimit.allCases.map { MetricLabels($0.rawValue) })

    /// Counts a delivery that ended with `outcome` (one of `deliveryOutcomes`).
    func delivery(_ outcome: String) {
        deliveries.increment(MetricLabels(outcome))
    }

    /// The families, with the store's failed operations read when scraped.
    func families(store: any AuthorityStore) -> [any MetricFamily] {
        [
            deliveries, sendLimitRefusals,
            MetricCounterFunction(
                "rainwallet_authority_store_errors_total",
                help: "Store operations that failed (RAIN_502) since the authority started."
            ) { UInt64(max(0, store.failedOperationCount)) },
        ]
    }
}

/// Whether the authority's store answers, and with the master key this instance holds.
public enum StoreHealth: Sendable, Equatable {
    /// The store answered and records this instance's master key.
    case healthy
    /// The store did not answer (the message says why).
    case unreachable(String)
    /// The store answered, but records another master key (or none).
    case keyMismatch(String)
}

extension EmbeddedAuthority {
    /// The metric families of the codes and the store.
    public var metricFamilies: [any MetricFamily] { metrics.families(store: store) }

    /// Reads the store's master-key check (one small query) and compares it with this instance's
    /// key: the store is reachable and still the one this instance serves.
    public func storeHealth() async -> StoreHealth {
        do throws(RainError) {
            guard let check = try await store.keyCheck() else {
                return .keyMismatch("the store records no master key check")
            }
            guard constantTimeEquals(check.value, keys.storeKeyCheck) else {
                return .keyMismatch("the store records master key \(check.keyID), this instance holds \(keys.masterKeyID)")
            }
            return .healthy
        } catch {
            return .unreachable(error.message)
        }
    }
}
