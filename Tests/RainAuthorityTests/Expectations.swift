import RainCore
import Testing

/// The RAIN_201 `details.reason` of the error `body` throws; records an issue when it succeeds or
/// throws another code.
func sessionRefusal(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async -> String? {
    guard let error = await rainError(body) else {
        Issue.record("expected RAIN_201, but the call succeeded", sourceLocation: sourceLocation)
        return nil
    }
    #expect(error.code == .sessionExpired, "expected RAIN_201, got \(error)", sourceLocation: sourceLocation)
    return error.details.reason
}

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
