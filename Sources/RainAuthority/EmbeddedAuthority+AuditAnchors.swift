import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainCrypto
import RainStore
import RainWire

/// Audit anchors: the head of a device's audit chain kept here, so that the device finds at its
/// next start a chain rewritten while it was stopped (docs/security.md "The audit log"). An anchor
/// belongs to the device key the connection proved first and only moves forward: more entries
/// replace it, the same head again changes nothing, anything else is refused. It is read from any
/// key the connection proved (the most entries wins), and a key move (`rebindDevice`) gives the
/// new key the anchor of the key it replaces.
extension EmbeddedAuthority {
    /// Moves the proven device key's anchor forward (see `Authority.anchorAuditHead`).
    public func anchorAuditHead(_ request: AuthorityAnchorAuditHeadRequest, caller: AuthorityCaller)
        async throws(RainError) -> AuthorityAnchorAuditHeadResponse
    {
        guard let head = request.head else { throw RainError.invalid("the request names no head", field: "head") }
        guard head.entries > 0, head.entries <= UInt64(Int64.max) else {
            throw RainError.invalid("an audit head counts 1 to 2^63-1 entries", field: "entries")
        }
        guard Self.isSHA256Hex(head.headHash) else {
            throw RainError.invalid("an audit head's hash is 64 lowercase hex digits", field: "headHash")
        }
        let keys = try anchorKeys(deviceID: request.deviceID, proof: caller.proof)
        let proposed = AuditAnchorRecord(
            deviceKey: keys[0], deviceID: request.deviceID, entries: head.entries, headHash: head.headHash,
            updatedAt: clock.now)
        switch try await store.anchorAuditHead(proposed) {
        case .stored, .unchanged:
            return AuthorityAnchorAuditHeadResponse()
        case .behind(let current):
            logger.warning(
                "audit_anchor.refused",
                [
                    "device": request.deviceID, "reason": AuditAnchorRefusal.behind.rawValue, "anchored": String(current.entries),
                    "proposed": String(head.entries),
                ])
            throw RainError(
                .refused,
                "this device's audit log was anchored at \(current.entries) entries; a head of \(head.entries) would move "
                    + "the anchor back", details: .init(reason: AuditAnchorRefusal.behind.rawValue))
        case .conflict(let current):
            logger.warning(
                "audit_anchor.refused",
                [
                    "device": request.deviceID, "reason": AuditAnchorRefusal.conflict.rawValue,
                    "anchored": String(current.entries),
                ])
            throw RainError(
                .refused,
                "this device's audit log was anchored at \(current.entries) entries with another last entry",
                details: .init(reason: AuditAnchorRefusal.conflict.rawValue))
        }
    }

    /// The anchor of the proven device keys (see `Authority.getAuditAnchor`).
    public func getAuditAnchor(_ request: AuthorityGetAuditAnchorRequest, caller: AuthorityCaller)
        async throws(RainError) -> AuthorityGetAuditAnchorResponse
    {
        let keys = try anchorKeys(deviceID: request.deviceID, proof: caller.proof)
        let anchor = try await store.auditAnchor(deviceKeys: keys)
        return AuthorityGetAuditAnchorResponse(
            anchor: anchor.map { AuthorityAuditAnchor(entries: $0.entries, headHash: $0.headHash) })
    }

    /// At a key move: the new key starts from the anchor of the keys it replaces (never moving an
    /// anchor it has already back), so the device's next start still checks its chain.
    func carryAuditAnchor(from current: [DevicePublicKey], to newKey: DevicePublicKey) async throws(RainError) {
        guard var anchor = try await store.auditAnchor(deviceKeys: current.map(Self.anchorKey)) else { return }
        anchor.deviceKey = Self.anchorKey(newKey)
        anchor.updatedAt = clock.now
        _ = try await store.anchorAuditHead(anchor)
    }

    /// The stored forms of the proven keys, the first the one an anchor is written to.
    /// - Throws: RAIN_102 for an empty device id; RAIN_501 `device_proof_required` without a
    ///   proof, or with another device's.
    private func anchorKeys(deviceID: String, proof: DeviceProof) throws(RainError) -> [String] {
        try Self.requireIdentifier(deviceID, field: "deviceId")
        guard !proof.isEmpty, proof.deviceID == deviceID else { throw DeviceBinding.proofRequired() }
        return proof.keys.map(Self.anchorKey)
    }

    /// A device key's stored form: `key:` and its wire bytes in base64.
    static func anchorKey(_ key: DevicePublicKey) -> String { "key:" + Data(key.wireBytes).base64EncodedString() }

    /// Whether `text` is 64 lowercase hex digits.
    static func isSHA256Hex(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.count == 64
            && bytes.allSatisfy {
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
            }
    }
}
