import Foundation
import RainCore
import RainWire
import Testing

@testable import RainClientTransport

/// `ClientConnection` against a scripted server on the other end of a socket pair: answers read
/// directly or through the envelope decoder, calls in flight together (the pending calls' one
/// inline slot and their dictionary), a cancel frame, and the end of the connection failing every
/// call still in flight (each continuation resumed once: a lost one would hang the test).
@Suite(.timeLimit(.minutes(1))) struct ClientConnectionTests {
    /// The server's end of the pair: reads request frames, writes answers.
    final class ScriptedServer: Sendable {
        let fd: Int32
        init(fd: Int32) { self.fd = fd }
        deinit { Glibc.close(fd) }

        /// The next `count` envelopes, read on a thread of their own (not one of the cooperative
        /// pool's, which the calls need).
        func read(_ count: Int) async throws -> [Envelope] {
            let result = await withCheckedContinuation { (done: CheckedContinuation<Result<[Envelope], any Error>, Never>) in
                Thread { done.resume(returning: Result { try self.readBlocking(count) }) }.start()
            }
            return try result.get()
        }

        /// `read`, on the calling thread.
        func readBlocking(_ count: Int) throws -> [Envelope] {
            var decoder = FrameDecoder()
            var envelopes: [Envelope] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while envelopes.count < count {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                guard n > 0 else { throw RainError(.internalError, "the client closed the connection") }
                try decoder.append(buffer[0..<n])
                while let body = try decoder.nextFrame() { envelopes.append(try Envelope.decode(body)) }
            }
            return envelopes
        }

        func answer(_ envelope: Envelope) throws {
            let frame = try envelope.encodeFrame()
            let sent = frame.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            #expect(sent == frame.count)
        }

        func close() { Glibc.shutdown(fd, Int32(SHUT_RDWR)) }

        /// Reads the next frame, which must be the cancel of `request`, and answers the call as
        /// the daemon does: RAIN_401 `cancelled`.
        func expectCancel(of request: Envelope) async throws {
            let cancel = try #require(try await read(1).first)
            #expect(cancel == Envelope(requestID: request.requestID, kind: .cancel))
            let cancelled = RainError(.userCancelled, "cancelled", details: .init(reason: "cancelled"))
            try answer(Envelope(requestID: request.requestID, kind: .response(.failure(cancelled))))
        }
    }

    static func pair(
        inlineWaitMilliseconds: Int32 = ClientConnection.inlineWaitMilliseconds
    ) throws -> (ClientConnection, ScriptedServer) {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else {
            throw RainError(.internalError, "socketpair failed")
        }
        let connection = ClientConnection(
            fd: fds[0], path: "pair", peerName: "the test server", lostCode: .notInitialized,
            maximumFrameLength: Frame.defaultMaximumLength, inlineWaitMilliseconds: inlineWaitMilliseconds)
        return (connection, ScriptedServer(fd: fds[1]))
    }

    static let method = "/rain.wallet.v1.Session/GetState"

    @Test func callsInFlightTogetherGetTheirOwnAnswersAndTheRestFailWhenTheConnectionEnds() async throws {
        let (connection, server) = try Self.pair()
        let metadata = [MetadataEntry(key: profileMetadataKey, value: "default")]
        // Three calls, answered out of order: the second with a payload, the third with an error,
        // then the connection ends under the first.
        let calls = (0..<3).map { i in
            Task { () -> Result<[UInt8], RainError> in
                do throws(RainError) {
                    return .success(try await connection.call(method: Self.method, payload: [UInt8(i)], metadata: metadata))
                } catch {
                    return .failure(error)
                }
            }
        }
        let requests = try await server.read(3)
        #expect(Set(requests.map(\.requestID)).count == 3)
        func id(ofPayload p: UInt8) throws -> UInt64 {
            try #require(requests.first { $0.request?.payload == [p] }).requestID
        }
        for r in requests { #expect(r.request?.metadata == metadata && r.request?.method == Self.method) }
        try server.answer(Envelope(requestID: try id(ofPayload: 1), kind: .response(.ok([7, 8]))))
        let refusal = RainError(.invalidArgument, "refused", details: .init(reason: "because"))
        try server.answer(Envelope(requestID: try id(ofPayload: 2), kind: .response(.failure(refusal))))
        #expect(try await calls[1].value.get() == [7, 8])
        let error = await calls[2].value
        #expect(throws: RainError.self) { try error.get() }
        if case .failure(let e) = error {
            #expect(e.code == .invalidArgument && e.details.reason == "because" && !e.isConnectionFailure)
        }
        server.close()
        let lost = await calls[0].value
        if case .failure(let e) = lost {
            #expect(e.code == .notInitialized && e.isConnectionFailure)
        } else {
            Issue.record("the call in flight did not fail with the connection")
        }
        // A call after the end fails at once.
        await #expect(throws: RainError.self) { try await connection.call(method: Self.method, payload: []) }
        #expect(connection.isClosed)
    }

    @Test func oneCallAtATimeAndAnEmptyAnswer() async throws {
        let (connection, server) = try Self.pair()
        for i in 0..<5 {
            async let answer = connection.call(method: Self.method, payload: [])
            let request = try #require(try await server.read(1).first)
            try server.answer(Envelope(requestID: request.requestID, kind: .response(.ok(i % 2 == 0 ? [] : [UInt8(i)]))))
            #expect(try await answer == (i % 2 == 0 ? [] : [UInt8(i)]))
        }
        server.close()
    }

    @Test func aCancelledCallSendsItsCancelFrameAndEndsWithTheServersAnswer() async throws {
        let (connection, server) = try Self.pair()
        let call = Task { try await connection.call(method: Self.method, payload: []) }
        let request = try #require(try await server.read(1).first)
        call.cancel()
        try await server.expectCancel(of: request)
        let result = await call.result
        #expect(throws: RainError.self) { try result.get() }
        #expect((result.failure as? RainError)?.details.reason == "cancelled")
        server.close()
    }

    @Test func thePendingCallsKeepOneInlineAndTheRestByID() {
        var pending = ClientConnection.PendingCalls()
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        _ = stream
        let sink = ClientConnection.StreamSink(continuation)
        for id: UInt64 in [5, 6, 7] { pending.insert(.stream(sink), for: id) }
        #expect(pending[6] != nil && pending[5] != nil && pending[8] == nil)
        #expect(pending.remove(5) != nil)
        #expect(pending.remove(5) == nil)
        // The inline slot is free again, but the others stay by id.
        pending.insert(.stream(sink), for: 9)
        #expect(pending.remove(7) != nil)
        #expect(pending.removeAll().count == 2)
        #expect(pending.remove(6) == nil && pending.remove(9) == nil)
        pending.insert(.stream(sink), for: 10)
        #expect(pending[10] != nil)
        #expect(pending.removeAll().count == 1)
    }
}

extension Envelope {
    fileprivate var request: WireRequest? {
        if case .request(let r) = kind { r } else { nil }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let e) = self { e } else { nil }
    }
}
