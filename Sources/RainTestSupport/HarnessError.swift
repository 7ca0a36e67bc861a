/// A failure of the harness itself (binary missing, daemon not ready, process hung), with the
/// daemon's log attached where it helps.
public struct HarnessError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
