/// Encodes a ``CBORValue`` in the CTAP2 canonical form: shortest heads, definite lengths, and map
/// keys sorted by major type, then encoded length, then bytes. Used by the software authenticator
/// for attestation objects, authenticator extensions and COSE keys.
public enum CBOREncoder {
    /// The canonical encoding of `value`.
    /// - Parameter value: the item.
    /// - Returns: its bytes.
    public static func encode(_ value: CBORValue) -> [UInt8] {
        var output: [UInt8] = []
        append(value, to: &output)
        return output
    }

    private static func append(_ value: CBORValue, to output: inout [UInt8]) {
        switch value {
        case .unsigned(let n):
            appendHead(major: 0, n, to: &output)
        case .negative(let n):
            appendHead(major: 1, n, to: &output)
        case .bytes(let bytes):
            appendHead(major: 2, UInt64(bytes.count), to: &output)
            output += bytes
        case .text(let text):
            let utf8 = Array(text.utf8)
            appendHead(major: 3, UInt64(utf8.count), to: &output)
            output += utf8
        case .array(let elements):
            appendHead(major: 4, UInt64(elements.count), to: &output)
            for element in elements { append(element, to: &output) }
        case .map(let entries):
            appendHead(major: 5, UInt64(entries.count), to: &output)
            let encoded = entries.map { (key: encode($0.key), value: encode($0.value)) }
            for entry in encoded.sorted(by: { precedes($0.key, $1.key) }) {
                output += entry.key
                output += entry.value
            }
        case .bool(let flag):
            output.append(flag ? 0xF5 : 0xF4)
        case .null:
            output.append(0xF6)
        }
    }

    /// CTAP2 canonical key order: lower major type first, then shorter encoding, then lower bytes.
    private static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let majorA = (a.first ?? 0) >> 5
        let majorB = (b.first ?? 0) >> 5
        if majorA != majorB { return majorA < majorB }
        if a.count != b.count { return a.count < b.count }
        return a.lexicographicallyPrecedes(b)
    }

    private static func appendHead(major: UInt8, _ argument: UInt64, to output: inout [UInt8]) {
        let type = major << 5
        switch argument {
        case 0..<24:
            output.append(type | UInt8(argument))
        case 24...0xFF:
            output += [type | 24, UInt8(argument)]
        case 0x100...0xFFFF:
            output.append(type | 25)
            appendBigEndian(argument, width: 2, to: &output)
        case 0x1_0000...0xFFFF_FFFF:
            output.append(type | 26)
            appendBigEndian(argument, width: 4, to: &output)
        default:
            output.append(type | 27)
            appendBigEndian(argument, width: 8, to: &output)
        }
    }

    private static func appendBigEndian(_ value: UInt64, width: Int, to output: inout [UInt8]) {
        for index in stride(from: width - 1, through: 0, by: -1) {
            output.append(UInt8(truncatingIfNeeded: value >> UInt64(8 * index)))
        }
    }
}
