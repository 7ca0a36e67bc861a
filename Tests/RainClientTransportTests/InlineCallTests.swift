import Foundation
import RainCore
import RainWire
import Testing

@testable import RainClientTransport

/// `ClientConnection.callInline`: a call made by a task that runs on the connection's reader thread
/// (`withTaskExecutorPreference(connection)`) is answered there without suspending; when its answer
/// is late the wait is handed to the task (`awaitAnswer`), whose cancel and whose connection's end
/// behave as in `call`. Against the scripted server of `ClientConnectionTests`.
@Suite(.timeLimit(.minutes(1))) struct InlineCallTests {
    typealias Server = ClientConnectionTests.ScriptedServer
    static let method = ClientConnectionTests.method
    static let metadata = EncodedMetadata([MetadataEntry(key: profileMetadataKey, value: "default")])

    /// How a call went: answered inline, handed to the task, or not inline at all.
    enum Path: Equatable { case inline, handedOn, notInline }

    /// A call as `RainProvider.callBytes` makes it; `beforeWaiting` runs when the wait was handed
    /// on, before the task waits.
    static func call(
        _ connection: ClientConnection, _ payload: [UInt8], beforeWaiting: () async -> Void = {}
    ) async throws(RainError) -> (path: Path, answer: [UInt8]) {
        switch try connection.callInline(method: method, payload: payload, metadata: metadata) {
        case .answered(let bytes)?: return (.inline, bytes)
        case .waiting(let id, let box)?:
            await beforeWaiting()
            return (.handedOn, try await connection.awaitAnswer(id: id, box: box))
        case nil: return (.notInline, try await connection.call(method: method, payload: payload, metadata: metadata))
        }
    }

    /// `call` made by a task that runs on the connection's reader thread.
    static func onConnectionThread(
        _ connection: ClientConnection, _ payload: [UInt8], beforeWaiting: @escaping @Sendable () async -> Void = {}
    ) -> Task<(path: Path, answer: [UInt8]), any Error> {
        Task {
            try await withTaskExecutorPreference(connection) { () async throws(RainError) -> (path: Path, answer: [UInt8]) in
                try await call(connection, payload, beforeWaiting: beforeWaiting)
            }
        }
    }

    /// Answers every request with its own payload reversed, on a thread of its own, until the
    /// client goes away.
    static func echo(_ server: Server) {
        Thread {
            while let request = try? server.readBlocking(1).first {
                guard case .request(let r) = request.kind else { continue }
                try? server.answer(Envelope(requestID: request.requestID, kind: .response(.ok(r.payload.reversed()))))
            }
        }.start()
    }

    /// An inline wait no answer of the scripted server outlasts, even on a loaded machine.
    static let longWait: Int32 = 5_000

    @Test func aCallOnTheConnectionsThreadIsAnsweredThere() async throws {
        let (connection, server) = try ClientConnectionTests.pair(inlineWaitMilliseconds: Self.longWait)
        Self.echo(server)
        let paths = try await withTaskExecutorPreference(connection) { () async throws(RainError) -> [Path] in
            var paths: [Path] = []
            for i in 0..<20 {
                let (path, answer) = try await Self.call(connection, [UInt8(i), 1, 2])
                #expect(answer == [2, 1, UInt8(i)])
                paths.append(path)
            }
            return paths
        }
        #expect(paths == Array(repeating: .inline, count: 20))
        // Elsewhere than on the connection's thread, nothing is made inline.
        let elsewhere = try await Self.call(connection, [9])
        #expect(elsewhere == (.notInline, [9]))
        server.close()
    }

    @Test func aLateAnswerIsHandedToTheTaskAndKeptUntilItWaits() async throws {
        let (connection, server) = try ClientConnectionTests.pair()
        let call = Self.onConnectionThread(connection, [1]) {
            // The loop runs while this task sleeps: the answer written meanwhile waits in the box.
            try? await Task.sleep(for: .milliseconds(600))
        }
        let request = try #require(try await server.read(1).first)
        // No answer within the inline wait (10 ms): the call is handed on. Then the answer comes.
        try await Task.sleep(for: .milliseconds(300))
        try server.answer(Envelope(requestID: request.requestID, kind: .response(.ok([4, 2]))))
        let (path, answer) = try await call.value
        #expect(path == .handedOn)
        #expect(answer == [4, 2])
        server.close()
    }

    @Test func aHandedOnCallThatIsCancelledSendsItsCancel() async throws {
        let (connection, server) = try ClientConnectionTests.pair()
        let call = Self.onConnectionThread(connection, [])
        let request = try #require(try await server.read(1).first)
        try await Task.sleep(for: .milliseconds(300))
        call.cancel()
        try await server.expectCancel(of: request)
        let result = await call.result
        #expect((result.failure as? RainError)?.details.reason == "cancelled")
        server.close()
    }

    @Test func aHandedOnCallFailsWhenTheConnectionEnds() async throws {
        let (connection, server) = try ClientConnectionTests.pair()
        let call = Self.onConnectionThread(connection, [])
        _ = try await server.read(1)
        try await Task.sleep(for: .milliseconds(300))
        server.close()
        let result = await call.result
        let error = try #require(result.failure as? RainError)
        #expect(error.code == .notInitialized && error.isConnectionFailure)
        #expect(connection.isClosed)
    }

    @Test func framesOfOtherCallsReadDuringAnInlineWaitReachTheirCalls() async throws {
        let (connection, server) = try ClientConnectionTests.pair(inlineWaitMilliseconds: Self.longWait)
        // B waits the usual way (not on the connection's thread); A then waits inline.
        let b = Task { try await connection.call(method: Self.method, payload: [2]) }
        let requestB = try #require(try await server.read(1).first)
        let a = Self.onConnectionThread(connection, [1])
        let requestA = try #require(try await server.read(1).first)
        // Both answers in one write, B's first: A's inline read hands B's to B.
        try server.answer([
            Envelope(requestID: requestB.requestID, kind: .response(.ok([20]))),
            Envelope(requestID: requestA.requestID, kind: .response(.ok([10]))),
        ])
        #expect(try await b.value == [20])
        #expect(try await a.value == (.inline, [10]))
        server.close()
    }

    @Test func anErrorAnsweredInlineIsThrown() async throws {
        let (connection, server) = try ClientConnectionTests.pair(inlineWaitMilliseconds: Self.longWait)
        Thread {
            guard let request = try? server.readBlocking(1).first else { return }
            let refusal = RainError(.invalidArgument, "refused", details: .init(reason: "because"))
            try? server.answer(Envelope(requestID: request.requestID, kind: .response(.failure(refusal))))
        }.start()
        let result = await Self.onConnectionThread(connection, []).result
        let error = try #require(result.failure as? RainError)
        #expect(error.code == .invalidArgument && error.details.reason == "because" && !error.isConnectionFailure)
        server.close()
    }
}

extension ClientConnectionTests.ScriptedServer {
    /// Writes the frames of `envelopes` in one write.
    func answer(_ envelopes: [Envelope]) throws {
        var bytes: [UInt8] = []
        for e in envelopes { bytes += try e.encodeFrame() }
        let sent = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        #expect(sent == bytes.count)
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let e) = self { e } else { nil }
    }
}
