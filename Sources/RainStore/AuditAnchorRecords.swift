import FoundationEssentials
import RainCore

/// The audit chain's head a device keeps at the authority (`AuthorityStore.anchorAuditHead`): one
/// row per device key, only ever moving forward.
package struct AuditAnchorRecord: Sendable, Equatable {
    /// The device key it belongs to, in its stored form (`key:` and its wire bytes in base64).
    package var deviceKey: String
    /// The device that anchored it last.
    package var deviceID: String
    /// The entries of the chain up to its head (the head entry's seq); at least 1.
    package var entries: UInt64
    /// The lowercase hex SHA-256 of the head entry's line.
    package var headHash: String
    /// When it was anchored.
    package var updatedAt: Date

    /// Creates a record.
    package init(deviceKey: String, deviceID: String, entries: UInt64, headHash: String, updatedAt: Date) {
        self.deviceKey = deviceKey
        self.deviceID = deviceID
        self.entries = entries
        self.headHash = headHash
        self.updatedAt = updatedAt
    }

    /// Whether `other` is the same point of the chain.
    package func isSameHead(as other: AuditAnchorRecord) -> Bool {
        entries == other.entries && headHash == other.headHash
    }
}

/// What `AuthorityStore.anchorAuditHead` did with a proposed head.
package enum AuditAnchorOutcome: Sendable, Equatable {
    /// The head is the key's anchor now (the first, or one with more entries).
    case stored
    /// The same head was anchored already: nothing changed.
    case unchanged
    /// Refused, nothing changed: the anchor has more entries than the proposed head.
    case behind(AuditAnchorRecord)
    /// Refused, nothing changed: the anchor has as many entries and another hash.
    case conflict(AuditAnchorRecord)

    /// The forward-only rule, a pure function of the key's anchor (`current`, nil for none) and the
    /// proposed head.
    package static func decide(current: AuditAnchorRecord?, proposed: AuditAnchorRecord) -> AuditAnchorOutcome {
        guard let current else { return .stored }
        if proposed.entries > current.entries { return .stored }
        if proposed.entries < current.entries { return .behind(current) }
        return proposed.headHash == current.headHash ? .unchanged : .conflict(current)
    }
}
