import RainCore
import RainCrypto
import Testing

@testable import RainSigning

/// Shared values for the EVM tests.
enum EVMTestSupport {
    /// Runs `body` and checks it is refused with exactly this code, field and reason.
    static func expectRefusal(
        _ code: RainError.Code, field: String, reason: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws -> Void
    ) {
        do {
            try body()
            Issue.record("accepted; expected \(code) \(field) \(reason)", sourceLocation: sourceLocation)
        } catch let error as RainError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            #expect(error.details.field == field, "\(error)", sourceLocation: sourceLocation)
            #expect(error.details.reason == reason, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("threw \(error), not a RainError", sourceLocation: sourceLocation)
        }
    }
}
