import RainCore
import RainCrypto

/// EIP-712 typed data, read from `eth_signTypedData_v4` JSON and checked against its own `types`
/// before anything is hashed or shown.
///
/// The JSON must be exactly `{types, primaryType, domain, message}`. Every struct in `types` is
/// a list of `{name, type}`; `EIP712Domain` must be there, with only EIP-712's domain fields
/// (`name`, `version`, `chainId`, `verifyingContract`, `salt`) and `chainId` among them. The
/// domain and the message must carry exactly the members their types declare: an undeclared
/// member would be signed by no hash but could still be shown by an app, and a missing one would
/// be hashed as zero by some signers and refused by others.
///
/// Depth: the message's struct and array values nest at most `maximumMessageDepth` (8) levels.
/// The message itself is level 1; each struct or array value inside a struct or array is one
/// level deeper than it. `Mail{from: Person}` reaches level 2; a `uint8[][]` member of the
/// message reaches level 3 (the outer array 2, each inner array 3). Atomic values, `bytes` and
/// `string` add no level. This is the nesting of JSON objects and arrays inside `message`,
/// counting `message` itself.
struct EIP712TypedData: Sendable {
    /// A struct member's declaration.
    struct Field: Sendable, Equatable {
        /// Its name.
        var name: String
        /// Its type as written, for `encodeType`.
        var typeText: String
        /// Its type.
        var type: EIP712Type
    }

    /// The largest JSON text accepted.
    static let maximumSize = 64 * 1024
    /// How many struct and array levels the message may have (see the type's documentation).
    static let maximumMessageDepth = 8
    /// The JSON reader's own nesting limit: the top-level object, `message`, and room to refuse
    /// a too-deep message with its path rather than as unreadable JSON.
    static let maximumJSONDepth = 16

    /// The EIP-712 domain fields and their types; no other is accepted in `EIP712Domain`.
    static let domainFields: [String: String] = [
        "name": "string", "version": "string", "chainId": "uint256", "verifyingContract": "address", "salt": "bytes32",
    ]

    /// The declared structs, by name.
    var types: [String: [Field]]
    /// The message's struct.
    var primaryType: String
    /// The domain, an `EIP712Domain` struct.
    var domain: EIP712Value
    /// The message, a `primaryType` struct.
    var message: EIP712Value
    /// The domain's `chainId` (the caller checks it is supported).
    var chainID: UInt64

    /// Reads and checks typed data.
    /// - Parameter json: the `eth_signTypedData_v4` JSON text.
    /// - Throws: RAIN_102 with the path as field, reason: `too_large` (`typedData`), the JSON
    ///   reader's (`invalid_utf8`, `invalid_json`, `duplicate_key`, `too_deep`,
    ///   `trailing_bytes`), `wrong_type` (a value of the wrong JSON kind), `unknown_field`,
    ///   `missing_field`, `undeclared_field` (a member its struct does not declare),
    ///   `undeclared_type`, `invalid_type`, `invalid_name`, `duplicate_field`,
    ///   `invalid_domain_field`, `unsupported_primary_type`, `too_deep` (the message beyond 8
    ///   levels), `not_an_integer`, `invalid_address`, `invalid_bytes`, `wrong_length`. RAIN_406
    ///   (`out_of_range`) for an integer outside its type's range. RAIN_104
    ///   (`typedData.domain.chainId`) for a chain id above 64 bits.
    init(json: [UInt8]) throws(RainError) {
        guard json.count <= Self.maximumSize else {
            throw RainError.invalid(
                "the typed data is \(json.count) bytes; at most \(Self.maximumSize) can be signed, so send less",
                field: "typedData", reason: "too_large")
        }
        let root = try StrictJSONReader.parse(json, field: "typedData", maximumDepth: Self.maximumJSONDepth)
        let top = try Self.members(root, path: "typedData")
        let required = ["types", "primaryType", "domain", "message"]
        for member in top where !required.contains(member.key) {
            throw RainError.invalid(
                "typedData has an unknown member \"\(member.key)\"; send only types, primaryType, domain and message",
                field: "typedData.\(member.key)", reason: "unknown_field")
        }
        var parts: [String: StrictJSONValue] = [:]
        for member in top { parts[member.key] = member.value }
        func part(_ name: String) throws(RainError) -> StrictJSONValue {
            guard let value = parts[name] else { throw Self.missing("typedData.\(name)") }
            return value
        }
        types = try Self.declarations(try part("types"))
        guard case .string(let primary) = try part("primaryType") else {
            throw Self.wrongType("typedData.primaryType", expected: "a string", got: try part("primaryType"))
        }
        guard types[primary] != nil else {
            throw RainError.invalid(
                "primaryType \"\(primary)\" is not declared in types; declare it or name a declared struct",
                field: "typedData.primaryType", reason: "undeclared_type")
        }
        guard primary != "EIP712Domain" else {
            throw RainError.invalid(
                "primaryType is EIP712Domain, which signs no message; send the message's own struct",
                field: "typedData.primaryType", reason: "unsupported_primary_type")
        }
        primaryType = primary
        let checker = EIP712ValueChecker(types: types)
        domain = try checker.value(try part("domain"), as: .structure("EIP712Domain"), path: "typedData.domain", depth: 0)
        message = try checker.value(try part("message"), as: .structure(primary), path: "typedData.message", depth: 0)
        guard case .uint(let id) = domain[member: "chainId"] else {
            throw RainError.invalid(
                "the domain has no chainId, so the signature would be valid on every chain; declare chainId in "
                    + "EIP712Domain and set it in the domain", field: "typedData.domain.chainId", reason: "missing_field")
        }
        guard let chainID = id.uint64 else {
            throw RainError(
                .chainNotSupported, "chain id \(id) is not supported; the wallet signs for the chains of its table",
                details: RainError.Details(reason: "chain_not_supported", field: "typedData.domain.chainId"))
        }
        self.chainID = chainID
    }

    // MARK: Types

    private static func declarations(_ json: StrictJSONValue) throws(RainError) -> [String: [Field]] {
        let declared = try members(json, path: "typedData.types")
        let names = Set(declared.map(\.key))
        var types: [String: [Field]] = [:]
        for declaration in declared {
            let path = "typedData.types.\(declaration.key)"
            guard isIdentifier(declaration.key), EIP712Type.elementary(declaration.key) == nil else {
                throw RainError.invalid(
                    "\(path): a struct's name must be an identifier ([A-Za-z_$][A-Za-z0-9_$]*) and not an atomic type; "
                        + "rename it", field: path, reason: "invalid_name")
            }
            guard case .array(let fieldsJSON) = declaration.value else {
                throw wrongType(path, expected: "an array of {name, type}", got: declaration.value)
            }
            var fields: [Field] = []
            for (index, fieldJSON) in fieldsJSON.enumerated() {
                let field = try self.field(fieldJSON, path: "\(path)[\(index)]", declared: names)
                guard !fields.contains(where: { $0.name == field.name }) else {
                    throw RainError.invalid(
                        "\(path) declares \"\(field.name)\" twice; declare each member once",
                        field: "\(path)[\(index)].name", reason: "duplicate_field")
                }
                fields.append(field)
            }
            types[declaration.key] = fields
        }
        guard let domainFields = types["EIP712Domain"] else {
            throw RainError.invalid(
                "types does not declare EIP712Domain; declare the domain's fields (name, version, chainId, "
                    + "verifyingContract, salt)", field: "typedData.types.EIP712Domain", reason: "missing_field")
        }
        for (index, field) in domainFields.enumerated() where Self.domainFields[field.name] != field.typeText {
            throw RainError.invalid(
                "EIP712Domain's \"\(field.name)\" (\(field.typeText)) is not an EIP-712 domain field; use only name "
                    + "(string), version (string), chainId (uint256), verifyingContract (address) and salt (bytes32)",
                field: "typedData.types.EIP712Domain[\(index)]", reason: "invalid_domain_field")
        }
        return types
    }

    private static func field(_ json: StrictJSONValue, path: String, declared: Set<String>) throws(RainError) -> Field {
        let parts = try members(json, path: path)
        for part in parts where part.key != "name" && part.key != "type" {
            throw RainError.invalid(
                "\(path) has an unknown member \"\(part.key)\"; a member is declared as {name, type}",
                field: "\(path).\(part.key)", reason: "unknown_field")
        }
        func text(_ key: String) throws(RainError) -> String {
            guard let value = parts.first(where: { $0.key == key })?.value else { throw missing("\(path).\(key)") }
            guard case .string(let text) = value else { throw wrongType("\(path).\(key)", expected: "a string", got: value) }
            return text
        }
        let name = try text("name")
        guard isIdentifier(name) else {
            throw RainError.invalid(
                "\(path).name \"\(name)\" is not an identifier ([A-Za-z_$][A-Za-z0-9_$]*); rename the member",
                field: "\(path).name", reason: "invalid_name")
        }
        let typeText = try text("type")
        guard let type = EIP712Type.parse(Substring(typeText), declared: declared) else {
            let base = String(typeText.prefix { $0 != "[" })
            if isIdentifier(base), !looksAtomic(base), !declared.contains(base) {
                throw RainError.invalid(
                    "\(path).type names \"\(base)\", which types does not declare; declare it or use an EIP-712 type",
                    field: "\(path).type", reason: "undeclared_type")
            }
            throw RainError.invalid(
                "\(path).type \"\(typeText)\" is not an EIP-712 type; use an atomic type, bytes, string, a declared "
                    + "struct, or an array of one (T[] or T[k], at most \(EIP712Type.maximumDimensions) dimensions)",
                field: "\(path).type", reason: "invalid_type")
        }
        return Field(name: name, typeText: typeText, type: type)
    }

    /// `uint7`, `bytes33`: a misspelt atomic type rather than a struct someone forgot to declare.
    private static func looksAtomic(_ name: String) -> Bool {
        for prefix in ["uint", "int", "bytes"] where name.hasPrefix(prefix) {
            let digits = name.utf8.dropFirst(prefix.utf8.count)
            if !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) { return true }
        }
        return false
    }

    /// Names go into `encodeType` between `(`, `,` and a space, so only identifiers keep it
    /// unambiguous.
    static func isIdentifier(_ text: String) -> Bool {
        func isLetter(_ byte: UInt8) -> Bool {
            (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z")) || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: "$")
        }
        guard let first = text.utf8.first, isLetter(first) else { return false }
        return text.utf8.allSatisfy { isLetter($0) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) }
    }

    // MARK: Errors

    static func members(_ json: StrictJSONValue, path: String) throws(RainError) -> [StrictJSONMember] {
        guard case .object(let members) = json else { throw wrongType(path, expected: "an object", got: json) }
        return members
    }

    static func wrongType(_ path: String, expected: String, got: StrictJSONValue) -> RainError {
        RainError.invalid("\(path) is \(got.kindName); send \(expected)", field: path, reason: "wrong_type")
    }

    static func missing(_ path: String) -> RainError {
        RainError.invalid("\(path) is missing; send it", field: path, reason: "missing_field")
    }
}
