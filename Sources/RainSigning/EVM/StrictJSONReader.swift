import RainCore

/// A strict JSON reader (RFC 8259) for text a user's signature depends on.
///
/// It refuses what a lenient parser would guess at: invalid UTF-8, a byte order mark, comments,
/// trailing commas, control characters and unknown escapes in strings, lone surrogates, numbers
/// outside the grammar (leading zeros, `+`, `.5`), duplicate keys (two parsers could keep
/// different ones), and anything after the value.
package enum StrictJSONReader {
    /// Parses `bytes` as one JSON value.
    /// - Parameters:
    ///   - bytes: UTF-8 text.
    ///   - field: the request field the text came from: the root of every error path
    ///     ("typedData" gives "typedData.message.from").
    ///   - maximumDepth: how deeply arrays and objects may nest; the outermost counts 1.
    /// - Returns: the value.
    /// - Throws: RAIN_102 with reason `invalid_utf8` (`field`), `invalid_json` (the path of the
    ///   innermost container being read), `duplicate_key` (the key's path), `too_deep` (the path
    ///   of the first container beyond the limit) or `trailing_bytes` (`field`).
    package static func parse(_ bytes: [UInt8], field: String, maximumDepth: Int) throws(RainError) -> StrictJSONValue {
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw RainError.invalid("\(field) is not valid UTF-8; send UTF-8 JSON text", field: field, reason: "invalid_utf8")
        }
        var parser = Parser(bytes: bytes, root: field, maximumDepth: maximumDepth)
        parser.skipWhitespace()
        let value = try parser.value(path: field, depth: 0)
        parser.skipWhitespace()
        guard parser.offset == bytes.count else {
            throw RainError.invalid(
                "\(field) has text after its JSON value (at byte \(parser.offset)); send exactly one JSON value",
                field: field, reason: "trailing_bytes")
        }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        let root: String
        let maximumDepth: Int
        var offset = 0

        init(bytes: [UInt8], root: String, maximumDepth: Int) {
            self.bytes = bytes
            self.root = root
            self.maximumDepth = maximumDepth
        }

        private var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { offset += 1 }
        }

        private func syntax(_ problem: String, path: String) -> RainError {
            let place = offset < bytes.count ? "at byte \(offset)" : "at the end"
            return RainError.invalid(
                "\(path) is not valid JSON \(place): \(problem); send RFC 8259 JSON", field: path, reason: "invalid_json")
        }

        mutating func value(path: String, depth: Int) throws(RainError) -> StrictJSONValue {
            guard let byte = current else { throw syntax("a value is missing", path: path) }
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard depth < maximumDepth else {
                    throw RainError.invalid(
                        "\(path) nests arrays and objects more than \(maximumDepth) deep; send flatter JSON",
                        field: path, reason: "too_deep")
                }
                return byte == UInt8(ascii: "{")
                    ? try object(path: path, depth: depth + 1) : try array(path: path, depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string(path: path))
            case UInt8(ascii: "t"): return try literal("true", .bool(true), path: path)
            case UInt8(ascii: "f"): return try literal("false", .bool(false), path: path)
            case UInt8(ascii: "n"): return try literal("null", .null, path: path)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number(path: path))
            default: throw syntax("a value cannot start here", path: path)
            }
        }

        private mutating func literal(_ text: String, _ value: StrictJSONValue, path: String) throws(RainError) -> StrictJSONValue
        {
            let expected = Array(text.utf8)
            guard offset + expected.count <= bytes.count, Array(bytes[offset..<offset + expected.count]) == expected else {
                throw syntax("expected \(text)", path: path)
            }
            offset += expected.count
            return value
        }

        private mutating func object(path: String, depth: Int) throws(RainError) -> StrictJSONValue {
            offset += 1
            var members: [StrictJSONMember] = []
            var keys = Set<String>()
            skipWhitespace()
            if current == UInt8(ascii: "}") {
                offset += 1
                return .object([])
            }
            while true {
                skipWhitespace()
                guard current == UInt8(ascii: "\"") else { throw syntax("expected a key in double quotes", path: path) }
                let key = try string(path: path)
                let memberPath = path + "." + key
                guard keys.insert(key).inserted else {
                    throw RainError.invalid(
                        "\(memberPath) appears twice; send each key once", field: memberPath, reason: "duplicate_key")
                }
                skipWhitespace()
                guard current == UInt8(ascii: ":") else { throw syntax("expected ':' after the key", path: path) }
                offset += 1
                skipWhitespace()
                members.append(StrictJSONMember(key: key, value: try value(path: memberPath, depth: depth)))
                skipWhitespace()
                switch current {
                case UInt8(ascii: ","): offset += 1
                case UInt8(ascii: "}"):
                    offset += 1
                    return .object(members)
                default: throw syntax("expected ',' or '}'", path: path)
                }
            }
        }

        private mutating func array(path: String, depth: Int) throws(RainError) -> StrictJSONValue {
            offset += 1
            var elements: [StrictJSONValue] = []
            skipWhitespace()
            if current == UInt8(ascii: "]") {
                offset += 1
                return .array([])
            }
            while true {
                skipWhitespace()
                elements.append(try value(path: "\(path)[\(elements.count)]", depth: depth))
                skipWhitespace()
                switch current {
                case UInt8(ascii: ","): offset += 1
                case UInt8(ascii: "]"):
                    offset += 1
                    return .array(elements)
                default: throw syntax("expected ',' or ']'", path: path)
                }
            }
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, kept as written.
        private mutating func number(path: String) throws(RainError) -> String {
            let start = offset
            func isDigit(_ byte: UInt8?) -> Bool { byte.map { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } ?? false }
            if current == UInt8(ascii: "-") { offset += 1 }
            guard isDigit(current) else { throw syntax("a number needs a digit", path: path) }
            if current == UInt8(ascii: "0") {
                offset += 1
                guard !isDigit(current) else { throw syntax("a number has no leading zeros", path: path) }
            } else {
                while isDigit(current) { offset += 1 }
            }
            if current == UInt8(ascii: ".") {
                offset += 1
                guard isDigit(current) else { throw syntax("a fraction needs a digit", path: path) }
                while isDigit(current) { offset += 1 }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                offset += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { offset += 1 }
                guard isDigit(current) else { throw syntax("an exponent needs a digit", path: path) }
                while isDigit(current) { offset += 1 }
            }
            return String(decoding: bytes[start..<offset], as: UTF8.self)
        }

        private mutating func string(path: String) throws(RainError) -> String {
            offset += 1
            var output: [UInt8] = []
            while true {
                guard let byte = current else { throw syntax("a string is not closed", path: path) }
                offset += 1
                switch byte {
                case UInt8(ascii: "\""):
                    // The input is valid UTF-8 and escapes add whole scalars, so this never repairs.
                    return String(decoding: output, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    try escape(into: &output, path: path)
                case 0x00..<0x20:
                    throw syntax("a control character must be escaped in a string", path: path)
                default:
                    output.append(byte)
                }
            }
        }

        private mutating func escape(into output: inout [UInt8], path: String) throws(RainError) {
            guard let byte = current else { throw syntax("an escape is not finished", path: path) }
            offset += 1
            let simple: [UInt8: UInt8] = [
                UInt8(ascii: "\""): 0x22, UInt8(ascii: "\\"): 0x5C, UInt8(ascii: "/"): 0x2F, UInt8(ascii: "b"): 0x08,
                UInt8(ascii: "f"): 0x0C, UInt8(ascii: "n"): 0x0A, UInt8(ascii: "r"): 0x0D, UInt8(ascii: "t"): 0x09,
            ]
            if let resolved = simple[byte] {
                output.append(resolved)
                return
            }
            guard byte == UInt8(ascii: "u") else { throw syntax("unknown escape", path: path) }
            var scalar = try hexQuad(path: path)
            if (0xD800..<0xDC00).contains(scalar) {
                guard current == UInt8(ascii: "\\"), offset + 1 < bytes.count, bytes[offset + 1] == UInt8(ascii: "u") else {
                    throw syntax("a high surrogate must be followed by a low one", path: path)
                }
                offset += 2
                let low = try hexQuad(path: path)
                guard (0xDC00..<0xE000).contains(low) else {
                    throw syntax("a high surrogate must be followed by a low one", path: path)
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw syntax("a low surrogate without a high one", path: path)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw syntax("not a Unicode scalar", path: path) }
            UTF8.encode(unicode) { output.append($0) }
        }

        private mutating func hexQuad(path: String) throws(RainError) -> UInt32 {
            guard offset + 4 <= bytes.count,
                let value = UInt32(String(decoding: bytes[offset..<offset + 4], as: UTF8.self), radix: 16),
                bytes[offset..<offset + 4].allSatisfy({ $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "-") })
            else { throw syntax("\\u needs four hex digits", path: path) }
            offset += 4
            return value
        }
    }
}
