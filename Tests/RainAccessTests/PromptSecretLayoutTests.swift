import RainCore
import Testing

@testable import RainAccess

/// A prompt that asks for a PIN shows the request as a confirmation does, says what to type and,
/// after a wrong one, the tries left; it never shows a code to type back.
@Suite struct PromptSecretLayoutTests {
    static let request = PromptRequest(
        action: "log in with your passkey", caller: PromptLayoutTests.caller(path: "/usr/bin/example-app"),
        profile: "savings")

    @Test func itShowsTheActionTheAppTheProfileAndWhatToType() throws {
        let text = try Self.request.secretDescription(SecretQuestion(what: "the PIN of your security key (Key 5)"))
        #expect(text.contains("RainWallet needs the PIN of your security key (Key 5) to log in with your passkey"))
        #expect(text.contains("App: /usr/bin/example-app"))
        #expect(text.contains("Profile: savings"))
        #expect(text.contains("pid \(Int32.max)"))
        #expect(text.contains("type the PIN and press Enter"))
        #expect(!text.contains("tries left"))
        #expect(!text.contains("type the code"))
    }

    @Test(arguments: [(7, "7 tries left"), (1, "1 try left")])
    func afterAWrongPINItShowsTheTriesLeft(left: Int, shown: String) throws {
        let text = try Self.request.secretDescription(SecretQuestion(what: "the PIN", attemptsRemaining: left))
        #expect(text.contains("That PIN was wrong: \(shown) before the key blocks it."))
    }

    @Test func aRequestThatDoesNotFitIsRefusedNeverCut() {
        var request = Self.request
        request.action = String(repeating: "a", count: 4096)
        #expect(throws: RainError.self) { try request.secretDescription(SecretQuestion(what: "the PIN")) }
        do {
            _ = try request.secretDescription(SecretQuestion(what: "the PIN"))
        } catch {
            #expect(error.details.reason == PromptReason.tooLong)
        }
    }
}
