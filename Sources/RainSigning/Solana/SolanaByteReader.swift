import RainCore

/// Reads a Solana message's bytes front to back, naming the field being read in every refusal.
///
/// Every read checks the bytes left first, so a count read from the input never sizes an
/// allocation larger than the input itself.
struct SolanaByteReader {
    private let bytes: [UInt8]
    /// The index of the next byte to read.
    private(set) var offset: Int

    /// A reader over `bytes`, starting at `offset`.
    init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    /// The bytes not read yet.
    var remaining: Int { bytes.count - offset }

    /// One byte.
    /// - Throws: RAIN_102 (`field`, reason `truncated`) at the end of the input.
    mutating func byte(_ field: String) throws(RainError) -> UInt8 {
        guard remaining >= 1 else { throw Self.truncated(field) }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// `count` bytes.
    /// - Throws: RAIN_102 (`field`, reason `truncated`) when fewer are left.
    mutating func bytes(_ count: Int, _ field: String) throws(RainError) -> [UInt8] {
        guard count >= 0, remaining >= count else { throw Self.truncated(field) }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// A compact-u16 ("shortvec"): 7 bits a byte, least significant first, high bit set while more
    /// bytes follow, at most 3 bytes.
    ///
    /// Strict as solana-program's `decode_shortu16_len`: a zero byte after the first is an alias
    /// of a shorter encoding and is refused, and so is a value above 0xffff or a third byte that
    /// continues. A canonical encoding keeps the bytes signed equal to what every decoder reads.
    /// - Throws: RAIN_102 (`field`) with reason `truncated`, `non_canonical_compact_u16` or
    ///   `compact_u16_overflow`.
    mutating func compactU16(_ field: String) throws(RainError) -> Int {
        var value = 0
        for position in 0..<3 {
            let byte = try byte(field)
            if byte == 0 && position > 0 {
                throw RainError.invalid(
                    "\(field) is a compact-u16 with a needless zero byte: encode it in the fewest bytes",
                    field: field, reason: "non_canonical_compact_u16")
            }
            value |= Int(byte & 0x7f) << (7 * position)
            if byte & 0x80 == 0 {
                guard value <= 0xffff else { break }
                return value
            }
        }
        throw RainError.invalid(
            "\(field) is a compact-u16 above 0xffff or longer than 3 bytes", field: field, reason: "compact_u16_overflow")
    }

    /// A compact-u16 count of items of `itemSize` bytes each, checked against the bytes left
    /// before anything is allocated for them.
    /// - Throws: RAIN_102 (`field`) as ``compactU16(_:)``, or reason `truncated` when the items
    ///   cannot fit in what is left.
    mutating func count(ofItemsOfAtLeast itemSize: Int, _ field: String) throws(RainError) -> Int {
        let count = try compactU16(field)
        guard count * itemSize <= remaining else { throw Self.truncated(field) }
        return count
    }

    /// The refusal of input that ends inside `field`.
    static func truncated(_ field: String) -> RainError {
        RainError.invalid(
            "the transaction ends inside \(field): send the whole message", field: field, reason: "truncated")
    }
}
