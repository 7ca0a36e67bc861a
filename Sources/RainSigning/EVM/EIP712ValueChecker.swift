import RainCore
import RainCrypto

/// Checks JSON values against EIP-712 types, as `eth_signTypedData_v4` apps send them.
///
/// Integers are JSON numbers or strings, decimal (an optional `-`, then digits) or `0x` hex (not
/// negative), as eth-account reads them; no fraction or exponent, since a non-integer has no
/// `uintN` encoding. Addresses are `0x` and 40 hex digits, in one case or with a correct EIP-55
/// checksum. `bytes` and `bytesN` are `0x` hex (exactly N bytes for `bytesN`), `bool` a JSON
/// boolean and `string` a JSON string: the looser forms some libraries take (text as bytes, a
/// string as a bool) would let the prompt and the hash disagree.
struct EIP712ValueChecker {
    let types: [String: [EIP712TypedData.Field]]

    /// The checked value of `json` as `type`.
    /// - Parameters:
    ///   - path: the value's path, the errors' field.
    ///   - depth: the struct and array levels around the value (0 for the message itself).
    func value(_ json: StrictJSONValue, as type: EIP712Type, path: String, depth: Int) throws(RainError) -> EIP712Value {
        switch type {
        case .structure(let name):
            return try structure(json, name: name, path: path, depth: try deeper(depth, path: path))
        case .array(let element, let length):
            let depth = try deeper(depth, path: path)
            guard case .array(let items) = json else {
                throw EIP712TypedData.wrongType(path, expected: "an array", got: json)
            }
            if let length, items.count != length {
                throw RainError.invalid(
                    "\(path) has \(items.count) elements but its type has exactly \(length); send \(length)",
                    field: path, reason: "wrong_length")
            }
            var values: [EIP712Value] = []
            for (index, item) in items.enumerated() {
                values.append(try value(item, as: element, path: "\(path)[\(index)]", depth: depth))
            }
            return .array(values)
        case .uint(let bits):
            let (isNegative, magnitude) = try integer(json, path: path)
            guard !isNegative else { throw outOfRange(path, "uint\(bits) cannot be negative") }
            guard magnitude <= UInt256.maxValue(bits: bits) else {
                throw outOfRange(path, "\(magnitude) is above uint\(bits)'s largest value, 2^\(bits) - 1")
            }
            return .uint(magnitude)
        case .int(let bits):
            let (isNegative, magnitude) = try integer(json, path: path)
            let limit = UInt256.powerOfTwo(bits - 1)
            if isNegative {
                guard magnitude <= limit else { throw outOfRange(path, "-\(magnitude) is below int\(bits)'s smallest value") }
            } else {
                guard magnitude < limit else { throw outOfRange(path, "\(magnitude) is above int\(bits)'s largest value") }
            }
            return .int(isNegative: isNegative, magnitude: magnitude)
        case .address:
            guard case .string(let text) = json, text.hasPrefix("0x") || text.hasPrefix("0X"),
                EthereumAddress.checksummed(text) != nil, let bytes = Hex.decode(String(text.dropFirst(2)))
            else {
                throw RainError.invalid(
                    "\(path) is not an address; send 0x and 40 hex digits (all one case, or with a correct EIP-55 checksum)",
                    field: path, reason: "invalid_address")
            }
            return .address(bytes)
        case .bool:
            guard case .bool(let flag) = json else { throw EIP712TypedData.wrongType(path, expected: "true or false", got: json) }
            return .bool(flag)
        case .fixedBytes(let size):
            let bytes = try hexBytes(json, path: path)
            guard bytes.count == size else {
                throw RainError.invalid(
                    "\(path) is \(bytes.count) bytes but bytes\(size) is exactly \(size); send \(size) bytes",
                    field: path, reason: "wrong_length")
            }
            return .fixedBytes(bytes)
        case .bytes:
            return .bytes(try hexBytes(json, path: path))
        case .string:
            guard case .string(let text) = json else { throw EIP712TypedData.wrongType(path, expected: "a string", got: json) }
            return .string(text)
        }
    }

    private func deeper(_ depth: Int, path: String) throws(RainError) -> Int {
        guard depth < EIP712TypedData.maximumMessageDepth else {
            throw RainError.invalid(
                "\(path) nests structs and arrays more than \(EIP712TypedData.maximumMessageDepth) levels deep; "
                    + "send flatter typed data", field: path, reason: "too_deep")
        }
        return depth + 1
    }

    private func structure(_ json: StrictJSONValue, name: String, path: String, depth: Int) throws(RainError) -> EIP712Value {
        guard let fields = types[name] else {
            throw RainError.invalid("\(path)'s type \(name) is not declared; declare it", field: path, reason: "undeclared_type")
        }
        let given = try EIP712TypedData.members(json, path: path)
        for member in given where !fields.contains(where: { $0.name == member.key }) {
            throw RainError.invalid(
                "\(path).\(member.key) is not a member of \(name); send only its declared members or declare it",
                field: "\(path).\(member.key)", reason: "undeclared_field")
        }
        var members: [EIP712Value.Member] = []
        for field in fields {
            guard let json = given.first(where: { $0.key == field.name })?.value else {
                throw RainError.invalid(
                    "\(path).\(field.name) (\(field.typeText)) is missing; send every member \(name) declares",
                    field: "\(path).\(field.name)", reason: "missing_field")
            }
            members.append(
                EIP712Value.Member(
                    name: field.name, value: try value(json, as: field.type, path: "\(path).\(field.name)", depth: depth)))
        }
        return .structure(type: name, members: members)
    }

    /// A sign and a magnitude; the type's range is the caller's to check.
    private func integer(_ json: StrictJSONValue, path: String) throws(RainError) -> (Bool, UInt256) {
        let text: String
        switch json {
        case .number(let number): text = number
        case .string(let string): text = string
        default:
            throw EIP712TypedData.wrongType(path, expected: "an integer (a number, or a decimal or 0x-hex string)", got: json)
        }
        let notInteger = RainError.invalid(
            "\(path) is not an integer; send a JSON integer, or a string of decimal digits or 0x and hex digits",
            field: path, reason: "not_an_integer")
        if case .string = json, text.hasPrefix("0x") || text.hasPrefix("0X") {
            let digits = text.dropFirst(2)
            guard !digits.isEmpty, digits.utf8.allSatisfy(Self.isHexDigit) else { throw notInteger }
            guard let value = UInt256(hex: digits) else { throw outOfRange(path, "it is above 2^256 - 1") }
            return (false, value)
        }
        let isNegative = text.hasPrefix("-")
        let digits = isNegative ? text.dropFirst() : Substring(text)
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw notInteger
        }
        guard let value = UInt256(decimal: digits) else { throw outOfRange(path, "its magnitude is above 2^256 - 1") }
        return (isNegative && !value.isZero, value)
    }

    private func hexBytes(_ json: StrictJSONValue, path: String) throws(RainError) -> [UInt8] {
        guard case .string(let text) = json, text.hasPrefix("0x") || text.hasPrefix("0X"),
            let bytes = Hex.decode(String(text.dropFirst(2)))
        else {
            throw RainError.invalid(
                "\(path) is not hex bytes; send 0x and an even number of hex digits", field: path, reason: "invalid_bytes")
        }
        return bytes
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }

    private func outOfRange(_ path: String, _ problem: String) -> RainError {
        RainError(
            .invalidAmount, "\(path) is out of range: \(problem); send a value its type holds",
            details: RainError.Details(reason: "out_of_range", field: path))
    }
}
