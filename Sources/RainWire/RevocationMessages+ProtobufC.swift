internal import CProtobufC
internal import CRainProto
import RainCore

// Swift ⇄ protobuf-c for the pushed revocations of the authority hop (proto/authority.proto).

extension AuthorityWatchRevocationsRequest {
    /// Decodes an `AuthorityWatchRevocationsRequest` (empty; unknown fields are ignored).
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityWatchRevocationsRequest {
        try unpackMessage(
            bytes, name: "AuthorityWatchRevocationsRequest", rain__wallet__v1__authority_watch_revocations_request__init
        ) { _ throws(RainError) in AuthorityWatchRevocationsRequest() }
    }
    /// Encodes as an `AuthorityWatchRevocationsRequest` (zero bytes).
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension AuthorityRevocation {
    /// Decodes an `AuthorityRevocation`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityRevocation {
        try unpackMessage(bytes, name: "AuthorityRevocation", rain__wallet__v1__authority_revocation__init) {
            (p) throws(RainError) in
            let m = p.pointee
            return AuthorityRevocation(
                appID: try readString(m.app_id, field: "app_id"), deviceID: try readString(m.device_id, field: "device_id"),
                reason: try readString(m.reason, field: "reason"), heartbeatIntervalMilliseconds: m.heartbeat_interval_ms,
                isRecheck: m.recheck != 0)
        }
    }
    /// Encodes as an `AuthorityRevocation`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_revocation__init)
        m.app_id = try arena.string(appID, field: "app_id")
        m.device_id = try arena.string(deviceID, field: "device_id")
        m.reason = try arena.string(reason, field: "reason")
        m.heartbeat_interval_ms = heartbeatIntervalMilliseconds
        m.recheck = isRecheck ? 1 : 0
        return packMessage(&m)
    }
}
