import RainAuthorityAPI
import Testing

/// `details.reason` and `details.limit` are snake_case everywhere (PROTOCOL.md §6.1): the limits'
/// raw values are those strings. (`scripts/lint` refuses a camelCase literal in the sources.)
@Suite("Reason spelling")
struct ReasonSpellingTests {
    static func isSnakeCase(_ s: String) -> Bool {
        !s.isEmpty && s.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
    }

    @Test("every send limit and wrong-guess budget is named in snake_case, as its reason and limit")
    func limitsAreSnakeCase() {
        for limit in CodeSendLimit.allCases { #expect(Self.isSnakeCase(limit.rawValue), "\(limit.rawValue)") }
        for limit in CodeGuessLimit.allCases { #expect(Self.isSnakeCase(limit.rawValue), "\(limit.rawValue)") }
        #expect(CodeSendLimit.contactCooldown.rawValue == "contact_cooldown")
        #expect(CodeGuessLimit.deviceKeyGuessWindow.rawValue == "device_key_guess_window")
    }
}
