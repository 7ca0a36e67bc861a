/// An EIP-712 member type: an atomic type, `bytes` or `string`, a struct declared in `types`, or
/// an array of any of these (`T[]`, `T[k]`, nested).
indirect enum EIP712Type: Sendable, Equatable {
    /// `uint8` … `uint256`.
    case uint(bits: Int)
    /// `int8` … `int256`.
    case int(bits: Int)
    /// `address`.
    case address
    /// `bool`.
    case bool
    /// `bytes1` … `bytes32`.
    case fixedBytes(Int)
    /// `bytes`, encoded as its Keccak-256.
    case bytes
    /// `string`, encoded as the Keccak-256 of its UTF-8.
    case string
    /// A struct declared in `types`.
    case structure(String)
    /// `T[]` (length nil) or `T[k]`.
    case array(EIP712Type, length: Int?)

    /// The most array dimensions a type may have: a value nests at most
    /// `EIP712TypedData.maximumMessageDepth` levels, so more could never hold an element, and the
    /// bound keeps parsing and the nested type shallow.
    static let maximumDimensions = 8

    /// Parses a type as written in `types`. Array suffixes apply right to left: `uint8[2][]` is a
    /// dynamic array of `uint8[2]`, as in Solidity.
    /// - Parameters:
    ///   - text: the type text.
    ///   - declared: the struct names `types` declares.
    /// - Returns: the type, or `nil` when the text is not a type (its base neither atomic nor
    ///   declared, an array length not a positive decimal without leading zeros, more than
    ///   `maximumDimensions` dimensions).
    static func parse(_ text: Substring, declared: Set<String>) -> EIP712Type? {
        var rest = text
        var lengths: [Int?] = []
        while rest.hasSuffix("]") {
            guard lengths.count < maximumDimensions, let open = rest.lastIndex(of: "[") else { return nil }
            let lengthText = rest[rest.index(after: open)..<rest.index(before: rest.endIndex)]
            if lengthText.isEmpty {
                lengths.append(nil)
            } else {
                guard let length = positiveDecimal(lengthText) else { return nil }
                lengths.append(length)
            }
            rest = rest[..<open]
        }
        var type: EIP712Type
        if let atomic = elementary(String(rest)) {
            type = atomic
        } else if declared.contains(String(rest)) {
            type = .structure(String(rest))
        } else {
            return nil
        }
        // The suffixes were read outermost first, so the innermost is applied first.
        for length in lengths.reversed() { type = .array(type, length: length) }
        return type
    }

    /// The atomic and dynamic types, by name; nil for any other name.
    static func elementary(_ name: String) -> EIP712Type? {
        switch name {
        case "address": return .address
        case "bool": return .bool
        case "bytes": return .bytes
        case "string": return .string
        default: break
        }
        for (prefix, make) in [("uint", EIP712Type.uint(bits:)), ("int", EIP712Type.int(bits:))] where name.hasPrefix(prefix) {
            let digits = name.dropFirst(prefix.count)
            guard let bits = positiveDecimal(digits), bits >= 8, bits <= 256, bits % 8 == 0 else { return nil }
            return make(bits)
        }
        if name.hasPrefix("bytes") {
            let digits = name.dropFirst(5)
            guard let size = positiveDecimal(digits), size >= 1, size <= 32 else { return nil }
            return .fixedBytes(size)
        }
        return nil
    }

    /// Digits only, no sign, no leading zero, at most six: `Int.init` alone would take "+8".
    private static func positiveDecimal(_ text: Substring) -> Int? {
        guard let first = text.utf8.first, first != UInt8(ascii: "0"), text.utf8.count <= 6,
            text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        return Int(text)
    }

    /// The struct this type is, or holds at any array depth.
    var structName: String? {
        switch self {
        case .structure(let name): name
        case .array(let element, _): element.structName
        default: nil
        }
    }
}
