import RainCore
import Testing

/// The `RainError` `body` throws, or nil when it succeeds or throws something else.
func rainError(_ body: () async throws -> Void) async -> RainError? {
    do {
        try await body()
        return nil
    } catch let error as RainError {
        return error
    } catch {
        Issue.record("expected a RainError, got \(error)")
        return nil
    }
}
