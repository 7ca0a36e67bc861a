import RainCore

/// Limits that bound what decoding untrusted CBOR may cost.
public struct CBORLimits: Sendable, Hashable {
    /// The deepest nesting of arrays and maps accepted: a top-level array is at depth 1.
    public var maximumDepth: Int
    /// The most data items accepted in one input, counting every key, value and element.
    public var maximumItems: Int
    /// The longest input accepted, in bytes.
    public var maximumInputBytes: Int

    /// Creates limits.
    public init(maximumDepth: Int = 16, maximumItems: Int = 4096, maximumInputBytes: Int = 1 << 20) {
        self.maximumDepth = maximumDepth
        self.maximumItems = maximumItems
        self.maximumInputBytes = maximumInputBytes
    }

    /// Depth 16, 4096 items, 1 MiB: far beyond any attestation object or COSE key.
    public static let `default` = CBORLimits()
}

/// Decodes CBOR from untrusted input through libcbor, bounded.
///
/// libcbor 0.8 allocates what a header declares before it reads the content: a 5-byte array header
/// declaring 2^28 items makes it allocate gigabytes. So every input is first walked header by
/// header in Swift, and refused unless each declared length fits in the bytes that remain, nothing
/// is indefinite-length, nesting and item count stay within ``CBORLimits``, integers and lengths
/// use their shortest head, no map repeats a key, and only integers, byte and text strings, arrays,
/// maps, `true`, `false` and `null` appear. Only then does libcbor parse exactly the bytes of that
/// item; the result is copied into a ``CBORValue`` and freed.
public enum CBORDecoder {
    /// Decodes `bytes`, which must hold exactly one data item.
    /// - Parameters:
    ///   - bytes: the encoded item.
    ///   - limits: the bounds to enforce.
    /// - Returns: the item.
    /// - Throws: RAIN_102 with `details.reason` `malformed_cbor` naming the problem and its byte
    ///   offset: truncated input, trailing bytes, a limit exceeded, or any construct listed above.
    public static func decode(_ bytes: [UInt8], limits: CBORLimits = .default) throws(RainError) -> CBORValue {
        var statistics = Statistics()
        return try decode(bytes, limits: limits, statistics: &statistics)
    }

    /// Decodes the one data item that starts at `offset` and returns it with its encoded length;
    /// bytes after it are left to the caller (authenticator data puts extensions after the key).
    /// - Throws: RAIN_102 `malformed_cbor` as ``decode(_:limits:)``, except for trailing bytes.
    public static func decodePrefix(
        _ bytes: [UInt8], at offset: Int, limits: CBORLimits = .default
    ) throws(RainError) -> (value: CBORValue, length: Int) {
        var statistics = Statistics()
        return try decodePrefix(bytes, at: offset, limits: limits, statistics: &statistics)
    }

    /// What decoding did, for tests that prove a hostile header never reaches libcbor.
    package struct Statistics: Sendable {
        /// How many times `cbor_load` ran.
        package var libcborLoads = 0
        package init() {}
    }

    package static func decode(
        _ bytes: [UInt8], limits: CBORLimits, statistics: inout Statistics
    ) throws(RainError) -> CBORValue {
        guard bytes.count <= limits.maximumInputBytes else {
            throw malformed("input longer than \(limits.maximumInputBytes) bytes", offset: 0)
        }
        var walker = CBORHeaderWalker(bytes: bytes, position: 0, limits: limits)
        try walker.walkItem(depth: 1)
        guard walker.position == bytes.count else {
            throw malformed("\(bytes.count - walker.position) trailing bytes after the item", offset: walker.position)
        }
        statistics.libcborLoads += 1
        return try loadWithLibcbor(bytes, range: 0..<bytes.count)
    }

    package static func decodePrefix(
        _ bytes: [UInt8], at offset: Int, limits: CBORLimits, statistics: inout Statistics
    ) throws(RainError) -> (value: CBORValue, length: Int) {
        guard offset >= 0, offset <= bytes.count else { throw malformed("offset outside the input", offset: offset) }
        guard bytes.count - offset <= limits.maximumInputBytes else {
            throw malformed("input longer than \(limits.maximumInputBytes) bytes", offset: offset)
        }
        var walker = CBORHeaderWalker(bytes: bytes, position: offset, limits: limits)
        try walker.walkItem(depth: 1)
        let end = walker.position
        statistics.libcborLoads += 1
        let value = try loadWithLibcbor(bytes, range: offset..<end)
        return (value, end - offset)
    }

    /// The length of the one item at `offset`, from its headers alone; libcbor is not called.
    /// - Throws: RAIN_102 `malformed_cbor` as ``decode(_:limits:)``.
    package static func itemLength(of bytes: [UInt8], at offset: Int, limits: CBORLimits = .default) throws(RainError) -> Int {
        var walker = CBORHeaderWalker(bytes: bytes, position: offset, limits: limits)
        try walker.walkItem(depth: 1)
        return walker.position - offset
    }

    static func malformed(_ problem: String, offset: Int) -> RainError {
        RainError.webAuthn(.malformedCBOR, "malformed CBOR at byte \(offset): \(problem)")
    }
}

/// Walks CBOR heads without allocating for what they declare (see ``CBORDecoder``).
struct CBORHeaderWalker {
    let bytes: [UInt8]
    var position: Int
    let limits: CBORLimits
    private var items = 0

    init(bytes: [UInt8], position: Int, limits: CBORLimits) {
        self.bytes = bytes
        self.position = position
        self.limits = limits
    }

    private var remaining: Int { bytes.count - position }

    /// Advances `position` past one complete item, checking it.
    mutating func walkItem(depth: Int) throws(RainError) {
        let start = position
        items += 1
        guard items <= limits.maximumItems else {
            throw CBORDecoder.malformed("more than \(limits.maximumItems) items", offset: start)
        }
        let (major, argument) = try readHead()
        if major == 4 || major == 5, depth > limits.maximumDepth {
            throw CBORDecoder.malformed("arrays and maps nested deeper than \(limits.maximumDepth)", offset: start)
        }
        switch major {
        case 0, 1, 7:
            return
        case 2, 3:
            guard argument <= UInt64(remaining) else {
                throw CBORDecoder.malformed(
                    "a string declares \(argument) bytes but only \(remaining) remain", offset: start)
            }
            position += Int(argument)
        case 4:
            // Every element takes at least one byte.
            guard argument <= UInt64(remaining) else {
                throw CBORDecoder.malformed(
                    "an array declares \(argument) items but only \(remaining) bytes remain", offset: start)
            }
            for _ in 0..<Int(argument) { try walkItem(depth: depth + 1) }
        case 5:
            guard argument <= UInt64(remaining / 2) else {
                throw CBORDecoder.malformed(
                    "a map declares \(argument) entries but only \(remaining) bytes remain", offset: start)
            }
            var keys = Set<ArraySlice<UInt8>>()
            for _ in 0..<Int(argument) {
                let keyStart = position
                try walkItem(depth: depth + 1)
                // Heads are minimal and there are no floats or tags, so equal keys have equal encodings.
                guard keys.insert(bytes[keyStart..<position]).inserted else {
                    throw CBORDecoder.malformed("duplicate map key", offset: keyStart)
                }
                try walkItem(depth: depth + 1)
            }
        default:
            throw CBORDecoder.malformed("tags are not accepted", offset: start)
        }
    }

    /// Reads one head: the major type and its argument (a value, a length or a count).
    private mutating func readHead() throws(RainError) -> (major: UInt8, argument: UInt64) {
        let start = position
        guard position < bytes.count else { throw CBORDecoder.malformed("input ends before an item", offset: start) }
        let initial = bytes[position]
        position += 1
        let major = initial >> 5
        let additional = initial & 0x1F
        if major == 7 {
            switch additional {
            case 20, 21, 22: return (7, UInt64(additional))
            case 23: throw CBORDecoder.malformed("undefined is not accepted", offset: start)
            case 25, 26, 27: throw CBORDecoder.malformed("floating-point values are not accepted", offset: start)
            case 31: throw CBORDecoder.malformed("unexpected break (indefinite length)", offset: start)
            default: throw CBORDecoder.malformed("simple value \(additional) is not accepted", offset: start)
            }
        }
        switch additional {
        case 0..<24:
            return (major, UInt64(additional))
        case 24...27:
            let width = 1 << Int(additional - 24)
            guard width <= remaining else {
                throw CBORDecoder.malformed("input ends inside a \(width)-byte argument", offset: start)
            }
            var value: UInt64 = 0
            for byte in bytes[position..<(position + width)] { value = value << 8 | UInt64(byte) }
            position += width
            let smallest: UInt64 = width == 1 ? 24 : 1 << UInt64(4 * width)
            guard value >= smallest else {
                throw CBORDecoder.malformed("non-minimal encoding of \(value)", offset: start)
            }
            return (major, value)
        case 31:
            throw CBORDecoder.malformed("indefinite-length items are not accepted", offset: start)
        default:
            throw CBORDecoder.malformed("reserved additional information \(additional)", offset: start)
        }
    }
}
