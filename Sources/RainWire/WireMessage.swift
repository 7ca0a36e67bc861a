import RainCore

/// A request or response payload: encodes to and decodes from protobuf bytes.
public protocol WireMessage: Sendable {
    /// Decodes protobuf bytes.
    /// - Throws: RAIN_102 (reason `undecodable_payload`) for bytes that are not this message.
    static func decode(_ bytes: [UInt8]) throws(RainError) -> Self
    /// Encodes to protobuf bytes.
    /// - Throws: RAIN_102 for a string with an embedded NUL (protobuf-c cannot carry it).
    func encode() throws(RainError) -> [UInt8]
}
