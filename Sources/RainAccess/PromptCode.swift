import RainCore
import RainCrypto

/// The random code a prompt shows and the user types back to confirm. Four characters from an
/// alphabet without look-alikes (no `0`/`O`, `1`/`I`/`L`): 31^4 ≈ 920,000 codes, so a process that
/// injects keystrokes blind (`TIOCSTI`, a forged `OK`) cannot confirm, and each prompt takes one
/// answer only.
public struct PromptCode: Sendable, CustomStringConvertible {
    /// The characters a code is drawn from.
    public static let alphabet: [Character] = Array("ABCDEFGHJKMNPQRSTUVWXYZ23456789")
    /// How many characters a code has.
    public static let length = 4

    /// The code, in capitals.
    public let text: String

    /// A fresh code, each character uniform over `alphabet`.
    /// - Throws: RAIN_502 when the system's random source fails.
    public static func random() throws(RainError) -> PromptCode {
        var text = ""
        for _ in 0..<length {
            let index = try SecureRandom.uniform(upperBound: UInt32(alphabet.count))
            text.append(alphabet[Int(index)])
        }
        return PromptCode(text: text)
    }

    /// A code with known text (tests).
    package init(text: String) { self.text = text }

    /// True when `entered` is this code: surrounding spaces ignored, letters in either case,
    /// compared in constant time.
    public func matches(_ entered: [UInt8]) -> Bool {
        var normalized = entered[...]
        while let first = normalized.first, first == 0x20 || first == 0x09 { normalized = normalized.dropFirst() }
        while let last = normalized.last, last == 0x20 || last == 0x09 || last == 0x0d || last == 0x0a {
            normalized = normalized.dropLast()
        }
        let upper = normalized.map { (0x61...0x7a).contains($0) ? $0 - 0x20 : $0 }
        return constantTimeEquals(upper, Array(text.utf8))
    }

    /// Never prints the code (it is as good as a one-time password while the prompt is up).
    public var description: String { "<redacted>" }
}
