import RainCore
import RainWire
import Synchronization

/// Daemon/GetInfo's answers, kept encoded: what the daemon is never changes, and the rest (the
/// link, the keys, the audit anchor) changes rarely, so the bytes are made again only when one of
/// those moved (`DeviceHealth.version`, the anchor's word). Two answers are kept: the daemon's
/// own user sees the audit anchor, other users do not.
final class InfoAnswers: Sendable {
    private struct Kept {
        var health: UInt64
        var anchor: String?
        var bytes: [UInt8]
    }

    private let info: GetInfoResponse
    private let health: DeviceHealth
    private let anchoring: AuditAnchoring?
    /// Index 0: another uid's answer; 1: the daemon's own user's.
    private let kept = Mutex<[Kept?]>([nil, nil])

    init(info: GetInfoResponse, health: DeviceHealth, anchoring: AuditAnchoring?) {
        self.info = info
        self.health = health
        self.anchoring = anchoring
    }

    /// The answer now, for the daemon's own user (`isOwner`) or another.
    func response(isOwner: Bool) -> GetInfoResponse {
        var answer = info
        answer.authorityLink = health.authorityLink
        answer.storage = health.storage
        // The audit log's state is its user's alone, as the log is.
        if let anchoring, isOwner { answer.auditAnchor = anchoring.status.word }
        return answer
    }

    /// `response(isOwner:)` encoded, made again only when what it holds moved; nil when it does
    /// not encode (the route's loop handler then answers with the error).
    func encoded(isOwner: Bool) -> [UInt8]? {
        // Read before the answer is made: an answer made after is at least this new.
        let version = health.version
        let anchor = isOwner ? anchoring?.status.word : nil
        let index = isOwner ? 1 : 0
        if let k = kept.withLock({ $0[index] }), k.health == version, k.anchor == anchor { return k.bytes }
        guard let bytes = try? response(isOwner: isOwner).encode() else { return nil }
        kept.withLock { $0[index] = Kept(health: version, anchor: anchor, bytes: bytes) }
        return bytes
    }
}
