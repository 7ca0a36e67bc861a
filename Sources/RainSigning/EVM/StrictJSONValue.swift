/// A JSON value (RFC 8259) as the strict reader keeps it: numbers as the text written, so no
/// digit is lost to a `Double`, and object members in their order.
package indirect enum StrictJSONValue: Sendable, Equatable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, exactly as written ("-12", "1.5e3", "123456789012345678901234567890").
    case number(String)
    /// A string, escapes resolved.
    case string(String)
    /// An array.
    case array([StrictJSONValue])
    /// An object's members in the order written; keys are unique.
    case object([StrictJSONMember])

    /// What a message calls this kind of value ("a string", "an object").
    package var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// One member of a JSON object.
package struct StrictJSONMember: Sendable, Equatable {
    /// The key.
    package var key: String
    /// The value.
    package var value: StrictJSONValue

    /// A member.
    package init(key: String, value: StrictJSONValue) {
        self.key = key
        self.value = value
    }
}
