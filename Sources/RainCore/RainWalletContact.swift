import FoundationEssentials

/// A contact that identifies an account: an email address or an E.164 phone number.
public enum RainWalletContact: Sendable, Hashable, CustomStringConvertible {
    case email(String)
    case phone(String)

    /// The raw value as given.
    public var value: String {
        switch self {
        case .email(let v), .phone(let v): return v
        }
    }

    /// `email` or `phone`.
    public var kindName: String {
        switch self {
        case .email: return "email"
        case .phone: return "phone"
        }
    }

    public var description: String { "\(kindName):\(value)" }

    /// The normalized contact (docs/errors.md, login-code rules), or RAIN_102 naming what is wrong.
    ///
    /// Email: trimmed and lowercased; exactly one `@`, a local part of 1–64 characters, a domain
    /// with a dot, no whitespace, at most 254 characters in all.
    /// Phone: trimmed; `(0)` (a trunk zero) is refused; spaces, dots, hyphens and parentheses are
    /// removed; the rest must match `^\+[1-9][0-9]{7,14}$`.
    /// - Throws: `RainError` with code RAIN_102 and reason `invalid_email` or `invalid_phone`.
    public func normalized() throws(RainError) -> RainWalletContact {
        switch self {
        case .email(let raw): return .email(try Self.normalizeEmail(raw))
        case .phone(let raw): return .phone(try Self.normalizePhone(raw))
        }
    }

    static func trimmed(_ s: String) -> Substring {
        var sub = Substring(s)
        while let f = sub.first, f.isWhitespace { sub.removeFirst() }
        while let l = sub.last, l.isWhitespace { sub.removeLast() }
        return sub
    }

    static func normalizeEmail(_ raw: String) throws(RainError) -> String {
        func fail(_ why: String) -> RainError {
            .invalid("invalid email address: \(why)", field: "email", reason: "invalid_email")
        }
        let email = trimmed(raw).lowercased()
        if email.isEmpty { throw fail("it is empty") }
        if email.utf8.count > 254 { throw fail("it is longer than 254 characters") }
        if email.contains(where: { $0.isWhitespace || $0.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) }
        ) {
            throw fail("it contains a space or control character")
        }
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        if parts.count != 2 { throw fail("it must contain exactly one @") }
        let local = parts[0], domain = parts[1]
        if local.isEmpty { throw fail("the part before @ is empty") }
        if local.utf8.count > 64 { throw fail("the part before @ is longer than 64 characters") }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        if labels.count < 2 || labels.contains(where: \.isEmpty) {
            throw fail("the domain must have a dot between non-empty labels, like example.com")
        }
        return email
    }

    static func normalizePhone(_ raw: String) throws(RainError) -> String {
        func fail(_ why: String) -> RainError {
            .invalid("invalid phone number: \(why); use E.164 like +15551234567", field: "phone", reason: "invalid_phone")
        }
        let phone = trimmed(raw)
        if phone.contains("(0)") {
            throw fail("a trunk zero \"(0)\" is not part of the international number")
        }
        let stripped = phone.filter { !" .-()".contains($0) }
        let utf8 = Array(stripped.utf8)
        guard utf8.first == UInt8(ascii: "+") else { throw fail("it must start with +") }
        let digits = utf8.dropFirst()
        guard digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw fail("only digits may follow +")
        }
        guard digits.first != UInt8(ascii: "0") else { throw fail("the country code cannot start with 0") }
        guard (8...15).contains(digits.count) else { throw fail("it must have 8 to 15 digits") }
        return String(stripped)
    }
}
