import RainCore
import Testing

@testable import RainWallet

/// An app's authenticator written as the mobile SDK's are: plain `throws`, its own error type.
struct PlatformSheet: PasskeyAuthenticator {
    struct SheetFailed: Error {}
    func createCredential(optionsJSON: String, origin: String) async throws -> String { throw SheetFailed() }
    func getAssertion(optionsJSON: String, origin: String) async throws -> String { throw CancellationError() }
}

@Suite("What the app sees of its authenticator's errors")
struct AuthenticatorErrorTests {
    @Test("a RainError passes as it is; a CancellationError is RAIN_401; any other error is RAIN_501")
    func mapping() async {
        let sheet = PlatformSheet()
        var created: (any Error)?
        do { _ = try await sheet.createCredential(optionsJSON: "{}", origin: "https://example.com") } catch { created = error }
        var asserted: (any Error)?
        do { _ = try await sheet.getAssertion(optionsJSON: "{}", origin: "https://example.com") } catch { asserted = error }

        let other = RainProvider.authenticatorError(created ?? PlatformSheet.SheetFailed())
        #expect(other.code == .provider)
        #expect(other.message.contains("passkey authenticator failed"))
        let cancelled = RainProvider.authenticatorError(asserted ?? PlatformSheet.SheetFailed())
        #expect(cancelled.code == .userCancelled)
        let dismissed = RainError(.userCancelled, "dismissed")
        #expect(RainProvider.authenticatorError(dismissed) == dismissed)
        #expect(RainProvider.authenticatorError(dismissed).message == "dismissed")
    }
}
