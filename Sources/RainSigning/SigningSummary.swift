/// What the user reads before a signature: a title and lines of label and value, decoded from the
/// exact bytes that are signed. Values that come from the request (a token's claimed name, a
/// typed-data string) are kept as they are here; the prompt makes every value displayable.
public struct SigningSummary: Sendable, Equatable {
    /// One line: "To: 0x…", "Value: 1.5 ETH".
    public struct Line: Sendable, Equatable {
        /// What the value is ("Chain", "To", "Value", "Field mail.contents").
        public var label: String
        /// The value.
        public var value: String
        /// A line the user must notice (an unlimited approval, an undecoded call): the prompt
        /// marks it.
        public var isWarning: Bool

        /// A line.
        public init(_ label: String, _ value: String, isWarning: Bool = false) {
            self.label = label
            self.value = value
            self.isWarning = isWarning
        }
    }

    /// What is asked, in a few words: "Sign a transaction on Base (8453)".
    public var title: String
    /// The lines, in the order shown.
    public var lines: [Line]

    /// A summary.
    public init(title: String, lines: [Line] = []) {
        self.title = title
        self.lines = lines
    }

    /// Adds a line.
    public mutating func add(_ label: String, _ value: String, isWarning: Bool = false) {
        lines.append(Line(label, value, isWarning: isWarning))
    }

    /// Adds a warning line.
    public mutating func warn(_ text: String) {
        lines.append(Line("Warning", text, isWarning: true))
    }
}

/// Amounts as people read them: integer units shifted by a token's decimals, every digit kept.
public enum AmountText {
    /// `digits` (a non-negative integer in decimal, no sign, no leading zeros but "0") shifted
    /// by `decimals`, trailing fractional zeros dropped: ("1500000", 6) → "1.5"; ("5", 18) →
    /// "0.000000000000000005".
    public static func decimal(_ digits: String, decimals: Int) -> String {
        guard decimals > 0 else { return digits }
        let padded = String(repeating: "0", count: max(0, decimals + 1 - digits.count)) + digits
        let split = padded.index(padded.endIndex, offsetBy: -decimals)
        let whole = padded[..<split]
        var fraction = padded[split...]
        while fraction.last == "0" { fraction = fraction.dropLast() }
        return fraction.isEmpty ? String(whole) : "\(whole).\(fraction)"
    }
}
