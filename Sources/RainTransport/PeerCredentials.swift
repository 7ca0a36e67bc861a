import RainCore

/// The process on the other end of a Unix socket (SO_PEERCRED).
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// A TCP peer's numeric source address (`192.0.2.7`, `2001:db8::1`); nil for a Unix peer, or
    /// when it could not be read. The authority counts code sends per address.
    public var address: String? = nil

    /// The placeholder for a TCP peer, which has no Unix credentials: pid 0, uid and gid
    /// `UInt32.max` (never a real uid).
    public static let tcpPeer = PeerCredentials(pid: 0, uid: UInt32.max, gid: UInt32.max)

    /// A TCP peer at `address` (see `tcpPeer`).
    public static func tcpPeer(address: String?) -> PeerCredentials {
        PeerCredentials(pid: 0, uid: UInt32.max, gid: UInt32.max, address: address)
    }
}
