import Foundation
import RainTestSupport
import RainTransport
import RainWallet
import RainWire
import Testing

@Suite("Wire protocol against the real daemon")
struct ProtocolTests {
    static let profile = [MetadataEntry(key: profileMetadataKey, value: ProfileName.defaultName)]

    /// The slow call is held far longer than any scheduling delay (30 s) and is cancelled once the
    /// fast one has answered, so neither test depends on how fast the machine is: the fast answer
    /// must arrive while the slow call (sent first) is still in flight.
    static let heldMilliseconds: UInt32 = 30_000

    @Test("answers on one connection come back in completion order, not request order")
    func outOfOrderAnswers() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let connection = try ClientConnection(path: h.socketPath)
        defer { connection.close() }

        let slowPayload = try SlowEchoRequest(delayMilliseconds: Self.heldMilliseconds, data: Array("slow".utf8)).encode()
        let fastPayload = try SlowEchoRequest(delayMilliseconds: 0, data: Array("fast".utf8)).encode()
        let slowAnswered = Recorder<String>()
        let slow = Task {
            defer { slowAnswered.append("slow") }
            return try await connection.call(method: Method.testSlowEcho, payload: slowPayload)
        }
        // A head start so the slow call is usually on the wire first (ordering only: the assertions
        // below hold whichever goes first, and the raw test below fixes the wire order exactly).
        try await Task.sleep(for: .milliseconds(50))
        let fast = try await connection.call(method: Method.testSlowEcho, payload: fastPayload)
        #expect(try SlowEchoResponse.decode(fast).data == Array("fast".utf8))
        #expect(slowAnswered.all.isEmpty, "the fast call was answered only after the slow one")
        slow.cancel()
        switch await slow.result {
        case .success: Issue.record("the held call answered before it was cancelled")
        case .failure(let error): #expect((error as? RainError)?.details.reason == "cancelled")
        }
    }

    @Test("two requests written in one go: the fast one (sent second) is answered first")
    func outOfOrderAnswersRaw() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)

        let frames =
            try Envelope.requestFrame(
                id: 1, method: Method.testSlowEcho,
                payload: SlowEchoRequest(delayMilliseconds: Self.heldMilliseconds, data: [1]).encode())
            + Envelope.requestFrame(
                id: 2, method: Method.testSlowEcho, payload: SlowEchoRequest(delayMilliseconds: 0, data: [2]).encode())
        try raw.write(frames)
        let first = try await onThread { try raw.readEnvelope() }
        #expect(first?.requestID == 2)
        #expect(first?.response?.status.isOK == true)
        // Then the held call ends at once when cancelled, instead of after its delay.
        try raw.write(try Envelope(requestID: 1, kind: .cancel).encodeFrame())
        let second = try await onThread { try raw.readEnvelope() }
        #expect(second?.requestID == 1)
        #expect(second?.response?.status.details.reason == "cancelled")
    }

    @Test("50 concurrent GetSessionState calls on one connection all succeed")
    func manyConcurrentCalls() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        try await h.provider().awaitSessionRestore()
        let connection = try ClientConnection(path: h.socketPath)
        defer { connection.close() }
        let payload = try GetSessionStateRequest().encode()

        let states = try await withThrowingTaskGroup(of: AuthState.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    let bytes = try await connection.call(
                        method: Method.sessionGetState, payload: payload, metadata: Self.profile)
                    return try SessionSnapshot.decode(bytes).authState
                }
            }
            var all: [AuthState] = []
            for try await s in group { all.append(s) }
            return all
        }
        #expect(states.count == 50)
        #expect(states.allSatisfy { $0 == .unauthenticated })
    }

    @Test("an unknown method is RAIN_102")
    func unknownMethod() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let e = try #require(await rainError { _ = try await h.call("/rain.wallet.v1.Nope/Nothing", payload: []) })
        #expect(e.code == .invalidArgument)
        // The daemon goes on serving.
        #expect(try await h.provider().daemonInfo().protocolVersion == protocolVersion)
    }

    @Test("an undecodable ConfirmLoginCode payload is RAIN_102")
    func undecodablePayload() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let e = try #require(await rainError { _ = try await h.call(Method.authConfirmLoginCode, payload: [0xFF, 0xFF]) })
        #expect(e.code == .invalidArgument)
    }

    @Test("a frame header declaring 2 MiB: one RAIN_102 answer with request id 0, then close; new connections still work")
    func oversizedFrame() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)

        try raw.write([0x00, 0x20, 0x00, 0x00])  // 2 MiB, no body
        let answer = try await onThread { try raw.readEnvelope() }
        let envelope = try #require(answer)
        #expect(envelope.requestID == 0)
        let response = try #require(envelope.response)
        #expect(response.status.code == RainError.Code.invalidArgument.rawValue)
        let closed = try await onThread { raw.isClosedByPeer() }
        #expect(closed)

        let info = try await h.provider().daemonInfo()
        #expect(info.protocolVersion == protocolVersion)
    }

    @Test("garbage envelope bytes: RAIN_102 with request id 0, and the connection keeps working")
    func garbageEnvelope() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)

        try raw.write(Frame.encode([0xFF, 0xFF, 0xFF]))
        let firstRead = try await onThread { try raw.readEnvelope() }
        let first = try #require(firstRead)
        #expect(first.requestID == 0)
        #expect(first.response?.status.code == RainError.Code.invalidArgument.rawValue)

        try raw.write(try Envelope.requestFrame(id: 5, method: Method.daemonGetInfo, payload: GetInfoRequest().encode()))
        let secondRead = try await onThread { try raw.readEnvelope() }
        let second = try #require(secondRead)
        #expect(second.requestID == 5)
        let response = try #require(second.response)
        #expect(response.status.isOK)
        #expect(try GetInfoResponse.decode(response.payload).protocolVersion == protocolVersion)
    }

    @Test("a request id already in flight is refused with RAIN_102; the first call still completes")
    func duplicateRequestID() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)

        let payload = try SlowEchoRequest(delayMilliseconds: 500, data: Array("first".utf8)).encode()
        let frame = try Envelope.requestFrame(id: 9, method: Method.testSlowEcho, payload: payload)
        try raw.write(frame + frame)
        let answers = try await onThread { [try raw.readEnvelope(), try raw.readEnvelope()] }.compactMap { $0 }
        #expect(answers.count == 2)

        let refusals = answers.filter { $0.response?.status.isOK == false }
        let successes = answers.filter { $0.response?.status.isOK == true }
        #expect(refusals.count == 1)
        #expect(refusals.first?.response?.status.code == RainError.Code.invalidArgument.rawValue)
        #expect(successes.count == 1)
        #expect(successes.first?.requestID == 9)
        if let ok = successes.first?.response {
            #expect(try SlowEchoResponse.decode(ok.payload).data == Array("first".utf8))
        }

        // Once answered, the id may be used again.
        try raw.write(try Envelope.requestFrame(id: 9, method: Method.daemonGetInfo, payload: GetInfoRequest().encode()))
        let againRead = try await onThread { try raw.readEnvelope() }
        let again = try #require(againRead)
        #expect(again.requestID == 9)
        #expect(again.response?.status.isOK == true)
    }

    @Test("GetState on the quick lane keeps the connection's rules: a duplicate id refused, many in one write answered")
    func quickLaneKeepsTheRules() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let raw = try RawConnection(path: h.socketPath)
        let getState = { (id: UInt64) throws -> [UInt8] in
            try Envelope(
                requestID: id,
                kind: .request(
                    WireRequest(
                        method: Method.sessionGetState, payload: [],
                        metadata: [MetadataEntry(key: profileMetadataKey, value: "default")]))
            ).encodeFrame()
        }
        // The first request admits the connection (the ordinary path); the quick lane serves the next.
        try raw.write(try getState(1))
        let firstRead = try await onThread { try raw.readEnvelope() }
        let first = try #require(firstRead)
        #expect(first.response?.status.isOK == true)

        // A call in flight under id 9: a GetState under the same id is refused, as on the ordinary path.
        let slow = try SlowEchoRequest(delayMilliseconds: 500, data: Array("slow".utf8)).encode()
        try raw.write(try Envelope.requestFrame(id: 9, method: Method.testSlowEcho, payload: slow) + (try getState(9)))
        let answers = try await onThread { [try raw.readEnvelope(), try raw.readEnvelope()] }.compactMap { $0 }
        let refusal = try #require(answers.first { $0.response?.status.isOK == false })
        #expect(refusal.requestID == 0)
        #expect(refusal.response?.status.details.reason == "duplicate_request_id")
        #expect(answers.contains { $0.requestID == 9 && $0.response?.status.isOK == true })

        // Fifty in one write: fifty answers, in order, each the state of the session.
        try raw.write(try (100..<150).flatMap { try getState(UInt64($0)) })
        let many = try await onThread { try (0..<50).map { _ in try raw.readEnvelope() } }.compactMap { $0 }
        #expect(many.map(\.requestID) == Array(100..<150))
        for answer in many {
            let response = try #require(answer.response)
            #expect(response.status.isOK)
            #expect(try SessionSnapshot.decode(response.payload).authState != .authenticated)
        }
    }

    @Test("GetInfo reports the protocol version, the frame limit and the test capability")
    func getInfo() async throws {
        let h = try await DaemonHarness.start()
        defer { h.shutdown() }
        let info = try await h.provider().daemonInfo()
        #expect(info.protocolVersion == protocolVersion)
        #expect(info.maxFrameBytes == UInt32(Frame.defaultMaximumLength))
        #expect(info.capabilities.contains("login-code"))
        #expect(info.capabilities.contains("test-methods"))
        #expect(!info.daemonVersion.isEmpty)
    }
}
