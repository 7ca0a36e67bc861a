import FoundationEssentials
import RainCore
package import RainWire

/// `Audit/Read`'s answer: the entries as written, and the chain check when asked for.
package typealias AuditLogResponse = RainWire.ReadAuditLogResponse
/// The result of checking the audit log's hash chain.
package typealias AuditLogVerification = RainWire.AuditVerificationMessage

/// The daemon's audit log: read by `rainwallet audit`. Only the daemon's own uid may
/// read it.
extension RainProvider {
    /// The entries recorded at or after `since` (all when nil), oldest first, as the daemon wrote
    /// them (one JSON object per line); with `verify`, the result of checking the hash chain too.
    /// - Throws: RAIN_202 for a uid other than the daemon's; RAIN_102 or RAIN_502 when the log
    ///   cannot be read; RAIN_101 when the daemon is not running.
    nonisolated(nonsending) package func readAuditLog(since: Date?, verify: Bool) async throws(RainError) -> AuditLogResponse {
        try await call(
            Method.auditRead, ReadAuditLogRequest(since: since, isVerifyRequested: verify),
            as: ReadAuditLogResponse.self)
    }
}
