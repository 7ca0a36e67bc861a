import RainCore

/// Recursive Length Prefix, Ethereum's serialization of transactions (Yellow Paper, appendix B).
///
/// The decoder is strict: each value has exactly one accepted encoding, so the bytes the user's
/// summary is decoded from are the only bytes that could produce it. It refuses a single byte
/// below 0x80 written as a one-byte string, a long form for a payload of 55 bytes or fewer, a
/// length with leading zero bytes, a list whose items do not fill it exactly, truncated input and
/// bytes after the item.
package enum RLP {
    /// A decoded item: a byte string or a list of items.
    package indirect enum Item: Sendable, Equatable {
        /// A byte string (an integer, an address, call data).
        case bytes([UInt8])
        /// A list.
        case list([Item])
    }

    /// How deeply lists may nest. A transaction needs three (the transaction, its access list,
    /// an entry's storage keys); the margin admits well-formed input the caller then refuses by
    /// shape, while bounding the decoder's recursion.
    package static let maximumDepth = 16

    /// The encoding of `item`.
    /// - Parameter item: the item.
    /// - Returns: its canonical bytes.
    package static func encode(_ item: Item) -> [UInt8] {
        switch item {
        case .bytes(let bytes):
            if bytes.count == 1, bytes[0] < 0x80 { return bytes }
            return header(length: bytes.count, shortBase: 0x80) + bytes
        case .list(let items):
            let payload = items.flatMap { encode($0) }
            return header(length: payload.count, shortBase: 0xC0) + payload
        }
    }

    /// The item for an unsigned integer: its big-endian bytes without leading zeros (zero is the
    /// empty string).
    package static func integer(_ value: UInt256) -> Item { .bytes(value.minimalBigEndianBytes) }

    /// Decodes exactly one item that fills `bytes`.
    /// - Parameters:
    ///   - bytes: the encoding.
    ///   - field: the request field the bytes came from, for errors.
    /// - Returns: the item.
    /// - Throws: RAIN_102 (`field`) with reason `truncated` (the input ends inside an item),
    ///   `trailing_bytes` (bytes after the item), `non_canonical_rlp` (an encoding other than the
    ///   canonical one), `malformed_rlp` (an item overruns its list) or `too_deep` (lists nested
    ///   more than `maximumDepth`).
    package static func decode(_ bytes: [UInt8], field: String) throws(RainError) -> Item {
        let decoder = Decoder(bytes: bytes, field: field)
        let (item, end) = try decoder.item(at: 0, limit: bytes.count, depth: 0)
        guard end == bytes.count else {
            throw RainError.invalid(
                "\(field) has \(bytes.count - end) bytes after its RLP item; send exactly one encoded item",
                field: field, reason: "trailing_bytes")
        }
        return item
    }

    private static func header(length: Int, shortBase: UInt8) -> [UInt8] {
        if length <= 55 { return [shortBase + UInt8(length)] }
        let lengthBytes = UInt256(UInt64(length)).minimalBigEndianBytes
        return [shortBase + 55 + UInt8(lengthBytes.count)] + lengthBytes
    }

    /// Reads items by offset, so a list's items are checked against the list's own end.
    private struct Decoder {
        let bytes: [UInt8]
        let field: String

        /// The item at `offset`, which must end at or before `limit` (the end of its list).
        func item(at offset: Int, limit: Int, depth: Int) throws(RainError) -> (Item, Int) {
            guard offset < limit else { throw overrun(at: offset, limit: limit) }
            let prefix = bytes[offset]
            switch prefix {
            case 0x00..<0x80:
                return (.bytes([prefix]), offset + 1)
            case 0x80...0xB7:
                let start = offset + 1
                let end = start + Int(prefix - 0x80)
                guard end <= limit else { throw overrun(at: offset, limit: limit) }
                if end - start == 1, bytes[start] < 0x80 {
                    throw nonCanonical(at: offset, "a single byte below 0x80 is written as itself, not as a string")
                }
                return (.bytes(Array(bytes[start..<end])), end)
            case 0xB8...0xBF:
                let (start, end) = try longPayload(at: offset, lengthOfLength: Int(prefix - 0xB7), limit: limit)
                return (.bytes(Array(bytes[start..<end])), end)
            case 0xC0...0xF7:
                let start = offset + 1
                return try list(from: start, to: start + Int(prefix - 0xC0), header: offset, limit: limit, depth: depth)
            default:
                let (start, end) = try longPayload(at: offset, lengthOfLength: Int(prefix - 0xF7), limit: limit)
                return try list(from: start, to: end, header: offset, limit: limit, depth: depth)
            }
        }

        private func list(
            from start: Int, to end: Int, header: Int, limit: Int, depth: Int
        ) throws(RainError) -> (Item, Int) {
            guard end <= limit else { throw overrun(at: header, limit: limit) }
            guard depth < RLP.maximumDepth else {
                throw RainError.invalid(
                    "\(field) nests RLP lists more than \(RLP.maximumDepth) deep (at byte \(header)); no request needs that",
                    field: field, reason: "too_deep")
            }
            var items: [Item] = []
            var position = start
            while position < end {
                let (item, next) = try self.item(at: position, limit: end, depth: depth + 1)
                items.append(item)
                position = next
            }
            return (.list(items), end)
        }

        /// The payload bounds of a long string or list, whose length follows the prefix.
        private func longPayload(at offset: Int, lengthOfLength: Int, limit: Int) throws(RainError) -> (Int, Int) {
            let lengthStart = offset + 1
            guard lengthStart + lengthOfLength <= limit else { throw overrun(at: offset, limit: limit) }
            guard bytes[lengthStart] != 0 else {
                throw nonCanonical(at: offset, "a length is written without leading zero bytes")
            }
            var length = 0
            for byte in bytes[lengthStart..<lengthStart + lengthOfLength] {
                // More than the input holds is truncation whatever the exact figure, so stop counting
                // before it could overflow an Int.
                guard length <= bytes.count else { throw overrun(at: offset, limit: limit) }
                length = length << 8 | Int(byte)
            }
            guard length > 55 else {
                throw nonCanonical(at: offset, "a payload of 55 bytes or fewer uses the short form")
            }
            let start = lengthStart + lengthOfLength
            guard length <= limit - start else { throw overrun(at: offset, limit: limit) }
            return (start, start + length)
        }

        /// An item that runs past the input is truncation; one that runs past its list is malformed.
        private func overrun(at offset: Int, limit: Int) -> RainError {
            if limit == bytes.count {
                return RainError.invalid(
                    "\(field) ends inside an RLP item (at byte \(offset) of \(bytes.count)); send the whole encoding",
                    field: field, reason: "truncated")
            }
            return RainError.invalid(
                "\(field) has an RLP item at byte \(offset) that runs past the end of its list; send a well-formed encoding",
                field: field, reason: "malformed_rlp")
        }

        private func nonCanonical(at offset: Int, _ rule: String) -> RainError {
            RainError.invalid(
                "\(field) is not canonical RLP at byte \(offset): \(rule); send the canonical encoding",
                field: field, reason: "non_canonical_rlp")
        }
    }
}
