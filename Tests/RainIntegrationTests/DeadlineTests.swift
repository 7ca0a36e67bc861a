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
        let slow = try SlowEchoRequest(delayMilliseconds: 3000, data: [7]).encode()
        let started = ContinuousClock.now
        var failure: RainError?
        do {
            _ = try await conn.call(method: Method.slowEcho, payload: slow, timeoutMilliseconds: 200)
        } catch {
            failure = error
        }
        #expect(failure?.code == .provider)
        #expect(failure?.details.reason == "deadline_exceeded")
        #expect(ContinuousClock.now - started < .seconds(2))
        // Within its deadline the same call succeeds, on the same connection.
        let quick = try await conn.call(
            method: Method.slowEcho, payload: try SlowEchoRequest(delayMilliseconds: 10, data: [9]).encode(),
            timeoutMilliseconds: 5000)
        #expect(try SlowEchoResponse.decode(quick).data == [9])
    }
}
