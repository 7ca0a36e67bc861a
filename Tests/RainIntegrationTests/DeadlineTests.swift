import Foundation
import RainTestSupport
import RainTransport
import RainWallet
import RainWire
import Testing

@Suite("Per-call deadlines (timeout_ms)")
struct DeadlineTests {
    @Test("a call past its timeout_ms is answered RAIN_501 deadline_exceeded; the late answer is dropped")
    func deadlineAnswersTheCaller() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let conn = try ClientConnection(path: h.socketPath)
        defer { conn.close() }
        // Held for 30 s, far past the 200 ms deadline: only the deadline can end it in time, so no
        // elapsed time needs asserting (a call that ran to its end would succeed and fail the test).
        let slow = try SlowEchoRequest(delayMilliseconds: 30_000, data: [7]).encode()
        var failure: RainError?
        do {
            _ = try await conn.call(method: Method.testSlowEcho, payload: slow, timeoutMilliseconds: 200)
        } catch {
            failure = error
        }
        #expect(failure?.code == .provider)
        #expect(failure?.details.reason == "deadline_exceeded")
        // Within its deadline the same call succeeds, on the same connection.
        let quick = try await conn.call(
            method: Method.testSlowEcho, payload: try SlowEchoRequest(delayMilliseconds: 10, data: [9]).encode(),
            timeoutMilliseconds: 5000)
        #expect(try SlowEchoResponse.decode(quick).data == [9])
    }
}
