import FoundationEssentials
import RainCore

/// The `--json` output's writer: compact JSON with sorted keys, written as Foundation's
/// `JSONSerialization` (`.sortedKeys`) wrote it, slashes unescaped. `JSONSerialization` lives in the
/// Foundation module, which links ICU and its data into every binary (docs/performance.md, "Size").
enum JSONText {
    /// The JSON text of `value`, or nil when it holds something JSON cannot carry.
    static func text(_ value: Any) -> String? {
        var out = ""
        return write(value, into: &out) ? out : nil
    }

    private static func write(_ value: Any, into out: inout String) -> Bool {
        switch value {
        case let optional as OptionalValue:
            guard let wrapped = optional.wrappedAny else {
                out += "null"
                return true
            }
            return write(wrapped, into: &out)
        case let text as String: writeString(text, into: &out)
        case let flag as Bool: out += flag ? "true" : "false"
        case let number as Int: out += String(number)
        case let number as Int64: out += String(number)
        case let number as Int32: out += String(number)
        case let number as Int16: out += String(number)
        case let number as Int8: out += String(number)
        case let number as UInt: out += String(number)
        case let number as UInt64: out += String(number)
        case let number as UInt32: out += String(number)
        case let number as UInt16: out += String(number)
        case let number as UInt8: out += String(number)
        case let number as Double: return writeNumber(number, into: &out)
        case let number as Float: return writeNumber(Double(number), into: &out)
        case let json as JSONValue: return writeJSONValue(json, into: &out)
        case let members as [String: Any]:
            out += "{"
            for (index, key) in members.keys.sorted(by: collatesBefore).enumerated() {
                if index > 0 { out += "," }
                writeString(key, into: &out)
                out += ":"
                guard let member = members[key], write(member, into: &out) else { return false }
            }
            out += "}"
        case let elements as [Any]:
            out += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { out += "," }
                guard write(element, into: &out) else { return false }
            }
            out += "]"
        default: return false
        }
        return true
    }

    private static func writeJSONValue(_ value: JSONValue, into out: inout String) -> Bool {
        switch value {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .number(let number): return writeNumber(number, into: &out)
        case .string(let text): writeString(text, into: &out)
        case .array(let elements): return write(elements.map { $0 as Any }, into: &out)
        case .object(let members): return write(members.mapValues { $0 as Any }, into: &out)
        }
        return true
    }

    /// Whole numbers without a fraction (`1`, `-0`), others as their shortest form.
    private static func writeNumber(_ number: Double, into out: inout String) -> Bool {
        guard number.isFinite else { return false }
        if number == number.rounded(), abs(number) < 1e15 {
            out += number.sign == .minus && number == 0 ? "-0" : String(Int64(number))
        } else {
            out += "\(number)"
        }
        return true
    }

    private static func writeString(_ text: String, into out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case "\u{00}"..."\u{1F}":
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// The order `JSONSerialization` sorts keys in (a collation: punctuation, then digits with
    /// runs of digits compared as numbers, then letters ignoring case; on a tie lowercase first),
    /// for keys of ASCII letters, digits and punctuation; other scalars sort after letters by value.
    static func collatesBefore(_ a: String, _ b: String) -> Bool {
        let (primaryA, primaryB) = (primaryWeights(a), primaryWeights(b))
        if primaryA != primaryB { return primaryA.lexicographicallyPrecedes(primaryB) }
        // Same letters: the first difference in case decides, lowercase first; then fewer
        // scalars (`v2` before `v02`); then scalar values.
        let lettersA = a.unicodeScalars.filter { $0.properties.isAlphabetic }
        let lettersB = b.unicodeScalars.filter { $0.properties.isAlphabetic }
        for (x, y) in zip(lettersA, lettersB) where x != y { return x.properties.isLowercase }
        let (countA, countB) = (a.unicodeScalars.count, b.unicodeScalars.count)
        if countA != countB { return countA < countB }
        return a.unicodeScalars.lexicographicallyPrecedes(b.unicodeScalars)
    }

    /// The punctuation and symbols of ASCII in the order of the root collation.
    private static let punctuationOrder = Array("_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$".unicodeScalars)

    private static func primaryWeights(_ text: String) -> [UInt64] {
        var weights: [UInt64] = []
        var digits: UInt64? = nil
        for scalar in text.unicodeScalars {
            if ("0"..."9").contains(scalar) {
                let digit = UInt64(scalar.value - 0x30)
                let (times, overflowTimes) = (digits ?? 0).multipliedReportingOverflow(by: 10)
                let (sum, overflowSum) = times.addingReportingOverflow(digit)
                digits = overflowTimes || overflowSum ? UInt64.max >> 8 : min(sum, UInt64.max >> 8)
                continue
            }
            if let number = digits {
                weights += [1 << 60, number]
                digits = nil
            }
            if let index = punctuationOrder.firstIndex(of: scalar) {
                weights.append(UInt64(index) + 1)
            } else if scalar.isASCII, scalar.properties.isAlphabetic {
                weights.append((2 << 60) + UInt64(scalar.properties.lowercaseMapping.unicodeScalars.first?.value ?? scalar.value))
            } else {
                weights.append((3 << 60) + UInt64(scalar.value))
            }
        }
        if let number = digits { weights += [1 << 60, number] }
        return weights
    }
}

/// Lets `JSONText` see an `Optional` inside an `Any` without knowing its wrapped type.
private protocol OptionalValue {
    var wrappedAny: Any? { get }
}

extension Optional: OptionalValue {
    fileprivate var wrappedAny: Any? { self.map { $0 as Any } }
}
