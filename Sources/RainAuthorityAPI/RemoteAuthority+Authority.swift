import RainCore
import RainWire

// The calls of the `Authority` protocol are generated (Generated/authority_calls.pb.swift, from
// `service Authority`); `GetInfo` is the service's own, not a call of the protocol.
extension RemoteAuthority {
    /// What the authority is: its version, protocol version, capabilities and frame limit.
    /// - Throws: RAIN_301 when it cannot be reached.
    public func getInfo() async throws(RainError) -> GetInfoResponse {
        try await call(AuthorityMethod.getInfo, GetInfoRequest(), as: GetInfoResponse.self, kind: .read)
    }
}
