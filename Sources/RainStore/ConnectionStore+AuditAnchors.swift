import FoundationEssentials
import RainAuthorityAPI
import RainCore

// The audit anchors: each device key's audit-chain head, moved forward in one transaction.
extension ConnectionStore {
    /// The anchor with the most entries among `deviceKeys` (stored forms), or nil when none has one.
    package func auditAnchor(deviceKeys: [String]) async throws(RainError) -> AuditAnchorRecord? {
        try await perform { db throws(RainError) -> AuditAnchorRecord? in
            var best: AuditAnchorRecord?
            for key in deviceKeys {
                if let found = try StoreOperations.auditAnchor(db, deviceKey: key), found.entries > best?.entries ?? 0 {
                    best = found
                }
            }
            return best
        }
    }

    /// Moves the anchor of `anchor.deviceKey` forward to `anchor` (see `AuditAnchorOutcome.decide`).
    package func anchorAuditHead(_ anchor: AuditAnchorRecord) async throws(RainError) -> AuditAnchorOutcome {
        try await perform { db throws(RainError) in
            try db.transaction("anchor an audit head") { () throws(RainError) -> AuditAnchorOutcome in
                // Two anchors of one key (two instances) decide one after the other.
                try db.lock("audit-anchor", anchor.deviceKey)
                let outcome = AuditAnchorOutcome.decide(
                    current: try StoreOperations.auditAnchor(db, deviceKey: anchor.deviceKey), proposed: anchor)
                guard outcome == .stored else { return outcome }
                try db.execute(
                    """
                    INSERT INTO audit_anchors (device_key, device_id, entries, head_hash, updated_at)
                    VALUES ($1, $2, $3, $4, $5)
                    ON CONFLICT (device_key) DO UPDATE SET device_id = excluded.device_id, entries = excluded.entries,
                        head_hash = excluded.head_hash, updated_at = excluded.updated_at
                    """,
                    values: [
                        .text(anchor.deviceKey), .text(anchor.deviceID), .integer(Int64(clamping: anchor.entries)),
                        .text(anchor.headHash), .integer(anchor.updatedAt.unixMilliseconds),
                    ], operation: "anchor an audit head")
                return outcome
            }
        }
    }
}

extension StoreOperations {
    /// The anchor of `deviceKey`, or nil; in the caller's transaction when there is one (which
    /// holds the key's lock when it writes).
    static func auditAnchor<DB: StoreConnection>(_ db: DB, deviceKey: String) throws(RainError) -> AuditAnchorRecord? {
        let op = "read an audit anchor"
        guard
            let row = try db.query(
                "SELECT device_key, device_id, entries, head_hash, updated_at FROM audit_anchors WHERE device_key = $1",
                values: [.text(deviceKey)], operation: op
            ).first
        else { return nil }
        return AuditAnchorRecord(
            deviceKey: try row.text(0, op), deviceID: try row.text(1, op), entries: UInt64(max(0, try row.integer(2, op))),
            headHash: try row.text(3, op), updatedAt: Date(unixMilliseconds: try row.integer(4, op)))
    }
}
