import RainCore

/// Contacts as they appear in logs: enough to tell deliveries apart, not enough to read the address.
enum ContactRedaction {
    /// `u***@example.com` for an email, `+1555***67` for a phone number.
    static func redacted(_ contact: RainWalletContact) -> String {
        switch contact {
        case .email(let value):
            let parts = value.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let first = parts[0].first else { return "***" }
            return "\(first)***@\(parts[1])"
        case .phone(let value):
            let chars = Array(value)
            // Keep at most "+" and 4 digits in front and 2 at the end, hiding at least 3 digits.
            let tail = 2
            let head = max(0, min(5, chars.count - tail - 3))
            guard chars.count > head + tail else { return "***" }
            return String(chars[..<head]) + "***" + String(chars[(chars.count - tail)...])
        }
    }
}
