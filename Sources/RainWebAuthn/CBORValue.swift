/// One CBOR data item (RFC 8949), restricted to what WebAuthn uses: integers, byte and text
/// strings, arrays, maps, `true`, `false` and `null`. Tags, floats, `undefined` and other simple
/// values are refused by the decoder and cannot be expressed here.
public indirect enum CBORValue: Sendable, Hashable {
    /// Major type 0: an unsigned integer.
    case unsigned(UInt64)
    /// Major type 1: the negative integer `−1 − n`.
    case negative(UInt64)
    /// Major type 2: a byte string.
    case bytes([UInt8])
    /// Major type 3: a text string (valid UTF-8).
    case text(String)
    /// Major type 4: an array.
    case array([CBORValue])
    /// Major type 5: a map, its entries in their encoded order (keys are unique).
    case map([MapEntry])
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null

    /// One key–value pair of a map.
    public struct MapEntry: Sendable, Hashable {
        /// The key.
        public var key: CBORValue
        /// The value.
        public var value: CBORValue

        /// Creates an entry.
        public init(_ key: CBORValue, _ value: CBORValue) {
            self.key = key
            self.value = value
        }
    }

    /// An integer item for `value`: major type 0 when it is not negative, 1 otherwise.
    public static func integer(_ value: Int64) -> CBORValue {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-(value + 1)))
    }

    /// The value of an integer item when it fits in `Int64`; nil for other items.
    public var integerValue: Int64? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int64.max) ? Int64(n) : nil
        case .negative(let n): return n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: return nil
        }
    }

    /// The bytes of a byte string; nil for other items.
    public var bytesValue: [UInt8]? {
        if case .bytes(let bytes) = self { return bytes }
        return nil
    }

    /// The text of a text string; nil for other items.
    public var textValue: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    /// The entries of a map; nil for other items.
    public var mapEntries: [MapEntry]? {
        if case .map(let entries) = self { return entries }
        return nil
    }

    /// The elements of an array; nil for other items.
    public var arrayElements: [CBORValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    /// The value under an integer key of a map (COSE labels); nil when absent or not a map.
    public subscript(label: Int64) -> CBORValue? {
        self[CBORValue.integer(label)]
    }

    /// The value under a text key of a map; nil when absent or not a map.
    public subscript(key: String) -> CBORValue? {
        self[CBORValue.text(key)]
    }

    /// The value under `key` in a map; nil when absent or not a map.
    public subscript(key: CBORValue) -> CBORValue? {
        mapEntries?.first { $0.key == key }?.value
    }
}
