/// Base64 with the URL- and filename-safe alphabet (RFC 4648 §5).
public enum Base64URL {
    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Maps an ASCII byte to its 6-bit value, or 0xFF when it is not in the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    /// Encodes `bytes` without padding.
    /// - Parameter bytes: the data.
    /// - Returns: the text, `⌈4n/3⌉` characters long.
    public static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= bytes.count {
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            append(group, characters: 4, to: &output)
            index += 3
        }
        switch bytes.count - index {
        case 1:
            append(UInt32(bytes[index]) << 16, characters: 2, to: &output)
        case 2:
            append(UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8, characters: 3, to: &output)
        default:
            break
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func append(_ group: UInt32, characters: Int, to output: inout [UInt8]) {
        for position in 0..<characters {
            output.append(alphabet[Int((group >> UInt32(18 - 6 * position)) & 0x3F)])
        }
    }

    /// Decodes base64url text, with or without `=` padding.
    ///
    /// Strict: the standard alphabet's `+` and `/`, whitespace, misplaced or partial padding, and
    /// unused trailing bits that are not zero are all rejected, so each byte string has exactly one
    /// accepted unpadded form (tokens compare by their text).
    /// - Parameter s: the text.
    /// - Returns: the bytes, or `nil` when `s` is not valid base64url.
    public static func decode(_ s: String) -> [UInt8]? {
        var characters = Array(s.utf8)
        var padding = 0
        while padding < characters.count, characters[characters.count - 1 - padding] == UInt8(ascii: "=") {
            padding += 1
        }
        if padding > 0 {
            guard padding <= 2, characters.count % 4 == 0 else { return nil }
            characters.removeLast(padding)
        }
        let remainder = characters.count % 4
        guard remainder != 1 else { return nil }
        if padding > 0, padding + remainder != 4 { return nil }

        var output: [UInt8] = []
        output.reserveCapacity(characters.count * 3 / 4)
        var index = 0
        while index + 4 <= characters.count {
            guard let group = decodeGroup(characters[index..<(index + 4)]) else { return nil }
            output.append(UInt8(truncatingIfNeeded: group >> 16))
            output.append(UInt8(truncatingIfNeeded: group >> 8))
            output.append(UInt8(truncatingIfNeeded: group))
            index += 4
        }
        switch remainder {
        case 2:
            guard let group = decodeGroup(characters[index..<(index + 2)]), group & 0xFFFF == 0 else { return nil }
            output.append(UInt8(truncatingIfNeeded: group >> 16))
        case 3:
            guard let group = decodeGroup(characters[index..<(index + 3)]), group & 0xFF == 0 else { return nil }
            output.append(UInt8(truncatingIfNeeded: group >> 16))
            output.append(UInt8(truncatingIfNeeded: group >> 8))
        default:
            break
        }
        return output
    }

    /// Packs up to four characters into the top bits of a 24-bit group; nil on a bad character.
    private static func decodeGroup(_ characters: ArraySlice<UInt8>) -> UInt32? {
        var group: UInt32 = 0
        var shift: UInt32 = 18
        for character in characters {
            let value = values[Int(character)]
            guard value != 0xFF else { return nil }
            group |= UInt32(value) << shift
            shift &-= 6
        }
        return group
    }
}
