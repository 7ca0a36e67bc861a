/// A typed-data value checked against its EIP-712 type: what is hashed and what is shown.
indirect enum EIP712Value: Sendable, Equatable {
    /// A `uintN`, within its range.
    case uint(UInt256)
    /// An `intN`, within its range: its sign and magnitude (zero is never negative).
    case int(isNegative: Bool, magnitude: UInt256)
    /// 20 bytes.
    case address([UInt8])
    /// A `bool`.
    case bool(Bool)
    /// A `bytesN`: exactly N bytes.
    case fixedBytes([UInt8])
    /// `bytes`.
    case bytes([UInt8])
    /// `string`.
    case string(String)
    /// An array's elements.
    case array([EIP712Value])
    /// A struct's members, in the order its type declares them.
    case structure(type: String, members: [Member])

    /// A struct member.
    struct Member: Sendable, Equatable {
        /// The declared name.
        var name: String
        /// The value.
        var value: EIP712Value
    }

    /// The member named `name`, when this is a struct.
    subscript(member name: String) -> EIP712Value? {
        guard case .structure(_, let members) = self else { return nil }
        return members.first { $0.name == name }?.value
    }

    /// A `uint`'s value.
    var uintValue: UInt256? {
        if case .uint(let value) = self { return value }
        return nil
    }

    /// An address's 20 bytes.
    var addressValue: [UInt8]? {
        if case .address(let value) = self { return value }
        return nil
    }
}
