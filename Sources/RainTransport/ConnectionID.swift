import RainCore

/// Identifies one accepted connection for the life of the server.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "c\(rawValue)" }
}
