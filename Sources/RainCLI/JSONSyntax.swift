/// Where a text stops being JSON, for the message that refuses it: `JSONDecoder` says only that
/// the data is not valid JSON. The wording follows what `JSONSerialization` said
/// (`Invalid value around character 6.`, the offset in bytes from 0); `JSONSerialization` itself
/// lives in the Foundation module, which links ICU and its data (docs/performance.md, "Size").
enum JSONSyntax {
    /// The first syntax error in `bytes` (one JSON value, whitespace around it), or nil when the
    /// syntax is right.
    static func firstError(in bytes: [UInt8]) -> String? {
        var scanner = Scanner(bytes: bytes)
        do throws(Problem) {
            scanner.skipWhitespace()
            try scanner.value(depth: 0)
            scanner.skipWhitespace()
            if scanner.offset < bytes.count { throw Problem.invalidValue(scanner.offset) }
            return nil
        } catch {
            return error.text
        }
    }

    private enum Problem: Error {
        case invalidValue(Int)
        case endOfFile
        case invalidEscape(Int)
        case leadingZero(Int)
        case tooDeep(Int)

        var text: String {
            switch self {
            case .invalidValue(let at): return "Invalid value around character \(at)."
            case .endOfFile: return "Unexpected end of file during JSON parse."
            case .invalidEscape(let at): return "Invalid escape sequence around character \(at)."
            case .leadingZero(let at): return "Number with leading zero around character \(at)."
            case .tooDeep(let at): return "Too many nested arrays or dictionaries around character \(at)."
            }
        }
    }

    private struct Scanner {
        let bytes: [UInt8]
        var offset = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func skipWhitespace() {
            while offset < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[offset]) { offset += 1 }
        }

        func peek() throws(Problem) -> UInt8 {
            guard offset < bytes.count else { throw .endOfFile }
            return bytes[offset]
        }

        mutating func value(depth: Int) throws(Problem) {
            guard depth < 512 else { throw .tooDeep(offset) }
            switch try peek() {
            case UInt8(ascii: "{"): try container(close: UInt8(ascii: "}"), depth: depth, isObject: true)
            case UInt8(ascii: "["): try container(close: UInt8(ascii: "]"), depth: depth, isObject: false)
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default: throw .invalidValue(offset)
            }
        }

        mutating func container(close: UInt8, depth: Int, isObject: Bool) throws(Problem) {
            offset += 1
            skipWhitespace()
            if try peek() == close {
                offset += 1
                return
            }
            while true {
                skipWhitespace()
                if isObject {
                    guard try peek() == UInt8(ascii: "\"") else { throw .invalidValue(offset) }
                    try string()
                    skipWhitespace()
                    guard try peek() == UInt8(ascii: ":") else { throw .invalidValue(offset) }
                    offset += 1
                    skipWhitespace()
                }
                try value(depth: depth + 1)
                skipWhitespace()
                let next = try peek()
                offset += 1
                if next == close { return }
                guard next == UInt8(ascii: ",") else { throw .invalidValue(offset - 1) }
            }
        }

        mutating func string() throws(Problem) {
            offset += 1
            while true {
                let byte = try peek()
                switch byte {
                case UInt8(ascii: "\""):
                    offset += 1
                    return
                case UInt8(ascii: "\\"):
                    let backslash = offset
                    offset += 1
                    let escaped = try peek()
                    if escaped == UInt8(ascii: "u") {
                        for _ in 0..<4 {
                            offset += 1
                            guard (try peek()).isHexDigit else { throw .invalidEscape(backslash) }
                        }
                    } else if !Array("\"\\/bfnrt".utf8).contains(escaped) {
                        throw .invalidEscape(backslash)
                    }
                    offset += 1
                case 0x00..<0x20: throw .invalidValue(offset)
                default: offset += 1
                }
            }
        }

        mutating func literal(_ word: String) throws(Problem) {
            for expected in word.utf8 {
                guard try peek() == expected else { throw .invalidValue(offset) }
                offset += 1
            }
        }

        mutating func number() throws(Problem) {
            if try peek() == UInt8(ascii: "-") { offset += 1 }
            let first = try peek()
            guard first.isDigit else { throw .invalidValue(offset) }
            offset += 1
            if first == UInt8(ascii: "0"), offset < bytes.count, bytes[offset].isDigit { throw .leadingZero(offset) }
            digits()
            if offset < bytes.count, bytes[offset] == UInt8(ascii: ".") {
                offset += 1
                guard (try peek()).isDigit else { throw .invalidValue(offset) }
                digits()
            }
            if offset < bytes.count, bytes[offset] | 0x20 == UInt8(ascii: "e") {
                offset += 1
                if [UInt8(ascii: "+"), UInt8(ascii: "-")].contains(try peek()) { offset += 1 }
                guard (try peek()).isDigit else { throw .invalidValue(offset) }
                digits()
            }
        }

        mutating func digits() {
            while offset < bytes.count, bytes[offset].isDigit { offset += 1 }
        }
    }
}

extension UInt8 {
    fileprivate var isDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
    fileprivate var isHexDigit: Bool { isDigit || (self | 0x20 >= UInt8(ascii: "a") && self | 0x20 <= UInt8(ascii: "f")) }
}
