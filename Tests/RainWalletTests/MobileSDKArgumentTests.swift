import Foundation
import RainCore
import Testing

@testable import RainWallet

/// The SDK's restore waits refuse a wait that cannot be one before any request (the socket here
/// does not exist: a request would fail with RAIN_101 instead).
@Suite struct MobileSDKArgumentTests {
    static let provider = RainProvider(RainWalletConfig(socketPath: "/nonexistent/rainwallet.sock"))

    @Test("a negative timeoutMs is RAIN_102 naming timeoutMs", arguments: [Int64(-1), .min])
    func negativeMilliseconds(_ timeoutMs: Int64) async {
        do {
            try await Self.provider.awaitSessionRestore(timeoutMs: timeoutMs)
            Issue.record("accepted \(timeoutMs)")
        } catch let error as RainError {
            #expect(error.code == .invalidArgument)
            #expect(error.details.field == "timeoutMs")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test("a negative or non-finite timeout is RAIN_102 naming timeout", arguments: [-0.5, .nan, .infinity, -.infinity])
    func badSeconds(_ timeout: Double) async {
        do {
            try await Self.provider.awaitSessionRestore(timeout: timeout)
            Issue.record("accepted \(timeout)")
        } catch let error as RainError {
            #expect(error.code == .invalidArgument)
            #expect(error.details.field == "timeout")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test("a wait of 0 or more goes to the daemon (here: none, RAIN_101)", arguments: [Int64(0), 1, Int64(UInt32.max) + 1])
    func validMilliseconds(_ timeoutMs: Int64) async {
        await #expect(throws: RainError.notInitialized) { try await Self.provider.awaitSessionRestore(timeoutMs: timeoutMs) }
    }
}
