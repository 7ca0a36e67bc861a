/// Trimming with the character sets of Foundation's `CharacterSet.whitespaces`,
/// `.whitespacesAndNewlines` and `.newlines`, written here because `CharacterSet` lives in the
/// Foundation module that links ICU (see docs/performance.md, "Size").
extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (Unicode category Zs, U+0009, U+200B), as
    /// `trimmingCharacters(in: .whitespaces)`.
    package func trimmingWhitespace() -> String { trimming(where: Self.isWhitespace) }

    /// The text without leading and trailing whitespace and newlines, as
    /// `trimmingCharacters(in: .whitespacesAndNewlines)`.
    package func trimmingWhitespaceAndNewlines() -> String {
        trimming { Self.isWhitespace($0) || Self.isNewline($0) }
    }

    /// The text without leading and trailing newlines (U+000A–U+000D, U+0085, U+2028, U+2029), as
    /// `trimmingCharacters(in: .newlines)`.
    package func trimmingNewlines() -> String { trimming(where: Self.isNewline) }

    /// The text without leading and trailing scalars found in `characters`, as
    /// `trimmingCharacters(in: CharacterSet(charactersIn: characters))`.
    package func trimming(charactersIn characters: String) -> String {
        let set = Set(characters.unicodeScalars)
        return trimming { set.contains($0) }
    }

    /// Trims whole Unicode scalars, as `CharacterSet` does (not grapheme clusters).
    private func trimming(where isTrimmed: (Unicode.Scalar) -> Bool) -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isTrimmed($0) }) else { return "" }
        guard let last = scalars.lastIndex(where: { !isTrimmed($0) }) else { return "" }
        return String(String.UnicodeScalarView(scalars[first...last]))
    }

    /// Foundation's whitespace: tab, the space separators (Zs) and U+200B ZERO WIDTH SPACE.
    private static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09, 0x20, 0xA0, 0x1680, 0x2000...0x200B, 0x202F, 0x205F, 0x3000: return true
        default: return false
        }
    }

    private static func isNewline(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A...0x0D, 0x85, 0x2028, 0x2029: return true
        default: return false
        }
    }
}
