/// Profile names become file names: `[a-z0-9][a-z0-9-]{0,63}`.
public enum ProfileName {
    /// The profile used when a caller names none.
    public static let defaultName = "default"

    /// Checks a profile name.
    /// - Throws: RAIN_102 naming the rule.
    public static func validate(_ name: String) throws(RainError) {
        // On the name's own bytes (no copy): checked on every call.
        let bytes = name.utf8
        func isLowerAlnum(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) }
        guard let first = bytes.first, isLowerAlnum(first), bytes.count <= 64,
            bytes.allSatisfy({ isLowerAlnum($0) || $0 == UInt8(ascii: "-") })
        else {
            throw RainError.invalid(
                "invalid profile name: use 1 to 64 of a-z, 0-9 and '-', starting with a letter or digit",
                field: "profile")
        }
    }
}
