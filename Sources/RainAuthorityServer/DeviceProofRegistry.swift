import RainAuthorityAPI
import RainCore
import RainTransport
import RainWire
import Synchronization

/// The device proofs of the authority's connections: each connection's challenge and
/// the keys proven on it. An entry lives from the connection's first `BeginDeviceProof` until it
/// closes (`AuthorityService.connectionClosed`). Written on the loop thread only; the `Mutex`
/// keeps reads safe from anywhere.
final class DeviceProofRegistry: Sendable {
    private let entries = Mutex<[ConnectionID: ConnectionDeviceProof]>([:])

    /// The connection's challenge: drawn at the first request, the same for every later one.
    /// - Throws: RAIN_502 when the random source fails.
    func challenge(for connection: ConnectionID) throws(RainError) -> [UInt8] {
        if let existing = entries.withLock({ $0[connection]?.challenge }) { return existing }
        let fresh = try ConnectionDeviceProof()
        return entries.withLock { all in
            if let existing = all[connection] { return existing.challenge }
            all[connection] = fresh
            return fresh.challenge
        }
    }

    /// Checks a proof on `connection` (`ConnectionDeviceProof.verify`) and keeps its key.
    /// - Throws: RAIN_102 before a challenge (reason `no_challenge`); as `ConnectionDeviceProof.verify`.
    func prove(_ request: AuthorityProveDeviceRequest, on connection: ConnectionID, channelBinding: [UInt8]?)
        throws(RainError)
    {
        try entries.withLock { (all) throws(RainError) in
            guard var entry = all[connection] else {
                throw RainError.invalid(
                    "no device-proof challenge on this connection; call BeginDeviceProof first", field: "signature",
                    reason: "no_challenge")
            }
            try entry.verify(request, channelBinding: channelBinding)
            all[connection] = entry
        }
    }

    /// What `connection` proved (no keys when it proved nothing).
    func proof(for connection: ConnectionID) -> DeviceProof {
        entries.withLock { $0[connection]?.proof } ?? .none()
    }

    /// Forgets a closed connection.
    func drop(_ connection: ConnectionID) {
        _ = entries.withLock { $0.removeValue(forKey: connection) }
    }

    /// How many connections hold a challenge (tests).
    var count: Int { entries.withLock { $0.count } }
}
