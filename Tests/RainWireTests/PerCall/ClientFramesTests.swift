import Foundation
import RainCore
import Testing

@testable import RainWire

/// The client's per-call frames (ClientFrames.swift) against the envelope's codec and protobuf-c:
/// the same request and cancel bytes written, and an OK response read the same or left to
/// `Envelope.decode`.
@Suite struct ClientFramesTests {
    typealias Seeded = EnvelopeCodecTests.Seeded

    @Test func aRequestFrameHasTheBytesOfTheEnvelopeAndOfProtobufC() throws {
        var g = Seeded(state: 0x5DEE_CE66_D1CE_4E5B)
        for _ in 0..<3000 {
            let id = EnvelopeCodecTests.number(&g)
            let method = EnvelopeCodecTests.string(&g)
            let payload = EnvelopeCodecTests.bytes(&g)
            let timeout = UInt32(truncatingIfNeeded: EnvelopeCodecTests.number(&g))
            let metadata = (0..<Int(g.next() % 3)).map { _ in
                MetadataEntry(key: EnvelopeCodecTests.string(&g), value: EnvelopeCodecTests.string(&g))
            }
            let envelope = Envelope(
                requestID: id,
                kind: .request(
                    WireRequest(method: method, payload: payload, timeoutMilliseconds: timeout, metadata: metadata)))
            let encoded = EncodedMetadata(metadata)
            // Written directly (not through the envelope's encoder after a size computed wrong).
            #expect(encoded.fields != nil)
            let frame = try ClientFrames.request(
                id: id, method: method, payload: payload, timeoutMilliseconds: timeout, metadata: encoded)
            #expect(frame == (try envelope.encodeFrame()), "\(envelope)")
            #expect(frame == Frame.encode(try envelope.encodeReference()), "\(envelope)")
            // The same bytes written into a buffer: its length foretold, nothing when too small.
            let layout = try #require(
                ClientFrames.requestLayout(
                    id: id, method: method, payloadCount: payload.count, timeoutMilliseconds: timeout, metadata: encoded))
            #expect(layout.length == frame.count)
            for room in [frame.count + 7, frame.count, frame.count - 1] {
                var buffer = [UInt8](repeating: 0xEE, count: room)
                let written = buffer.withUnsafeMutableBufferPointer { b in
                    ClientFrames.writeRequest(
                        layout, id: id, method: method, payload: payload, timeoutMilliseconds: timeout, into: b)
                }
                if room >= frame.count {
                    #expect(written == frame.count)
                    #expect(Array(buffer.prefix(frame.count)) == frame)
                } else {
                    #expect(written == nil)
                }
            }
            // The same bytes from the request's tail (an inline call's repeat), under this id and
            // under others of every varint length.
            let tail = try #require(
                ClientFrames.RequestTail(method: method, payload: payload, timeoutMilliseconds: timeout, metadata: encoded))
            #expect(tail.matches(method: method, payload: payload, timeoutMilliseconds: timeout, metadata: encoded))
            for otherID in [id, 1, 127, 128, UInt64.max] {
                let expected = try ClientFrames.request(
                    id: otherID, method: method, payload: payload, timeoutMilliseconds: timeout, metadata: encoded)
                var buffer = [UInt8](repeating: 0xEE, count: tail.maximumFrameLength)
                let written = buffer.withUnsafeMutableBufferPointer { tail.write(id: otherID, into: $0) }
                #expect(written == expected.count, "id \(otherID)")
                #expect(Array(buffer.prefix(expected.count)) == expected, "id \(otherID)")
                #expect(buffer.dropFirst(expected.count).allSatisfy { $0 == 0xEE })
            }
            var short = [UInt8](repeating: 0, count: tail.maximumFrameLength - 1)
            #expect(short.withUnsafeMutableBufferPointer { tail.write(id: 1, into: $0) } == nil)
        }
    }

    @Test func aRequestTailMatchesOnlyItsOwnRequest() throws {
        let metadata = EncodedMetadata([MetadataEntry(key: profileMetadataKey, value: "default")])
        let other = EncodedMetadata([MetadataEntry(key: profileMetadataKey, value: "work")])
        let tail = try #require(
            ClientFrames.RequestTail(method: "/a", payload: [1], timeoutMilliseconds: 5, metadata: metadata))
        #expect(tail.matches(method: "/a", payload: [1], timeoutMilliseconds: 5, metadata: metadata))
        // Equal values in other storage match too.
        #expect(
            tail.matches(
                method: String("/a".reversed().reversed()), payload: Array([1]), timeoutMilliseconds: 5,
                metadata: EncodedMetadata([MetadataEntry(key: profileMetadataKey, value: "default")])))
        #expect(!tail.matches(method: "/b", payload: [1], timeoutMilliseconds: 5, metadata: metadata))
        #expect(!tail.matches(method: "/a", payload: [2], timeoutMilliseconds: 5, metadata: metadata))
        #expect(!tail.matches(method: "/a", payload: [1], timeoutMilliseconds: 6, metadata: metadata))
        #expect(!tail.matches(method: "/a", payload: [1], timeoutMilliseconds: 5, metadata: other))
        // A NUL is refused as the envelope refuses it: no tail.
        #expect(ClientFrames.RequestTail(method: "a\u{0}", payload: [], timeoutMilliseconds: 0, metadata: metadata) == nil)
    }

    @Test func aLayoutOfAnotherRequestWritesNothing() throws {
        let metadata = EncodedMetadata([MetadataEntry(key: profileMetadataKey, value: "default")])
        let layout = try #require(
            ClientFrames.requestLayout(id: 1, method: "/a", payloadCount: 0, timeoutMilliseconds: 0, metadata: metadata))
        var buffer = [UInt8](repeating: 0, count: 256)
        let written = buffer.withUnsafeMutableBufferPointer { b in
            ClientFrames.writeRequest(layout, id: 1, method: "/abc", payload: [], timeoutMilliseconds: 0, into: b)
        }
        #expect(written == nil)
    }

    @Test func aCancelFrameHasTheBytesOfTheEnvelopeAndOfProtobufC() throws {
        for id: UInt64 in [0, 1, 127, 128, 16_384, UInt64(UInt32.max), UInt64.max] {
            let envelope = Envelope(requestID: id, kind: .cancel)
            #expect(ClientFrames.cancel(id: id) == (try envelope.encodeFrame()), "\(id)")
            #expect(ClientFrames.cancel(id: id) == Frame.encode(try envelope.encodeReference()), "\(id)")
        }
    }

    @Test func aNULInTheMethodOrTheMetadataIsRefusedAsTheEnvelopeRefusesIt() throws {
        let cases: [(String, [MetadataEntry])] = [
            ("a\u{0}b", []),
            ("m", [MetadataEntry(key: "pro\u{0}file", value: "default")]),
            ("m", [MetadataEntry(key: "profile", value: "x"), MetadataEntry(key: "k", value: "\u{0}")]),
        ]
        for (method, metadata) in cases {
            let encoded = EncodedMetadata(metadata)
            let direct = Result { () throws(RainError) in
                try ClientFrames.request(id: 1, method: method, payload: [], timeoutMilliseconds: 0, metadata: encoded)
            }
            let envelope = Result { () throws(RainError) in
                try Envelope(requestID: 1, kind: .request(WireRequest(method: method, payload: [], metadata: metadata)))
                    .encodeFrame()
            }
            EnvelopeCodecTests.expectSameOutcome(direct, envelope, "\(method) \(metadata)")
            #expect(throws: RainError.self) { try direct.get() }
            // Nothing is measured for a buffer: the caller makes the frame with `request`, which refuses it.
            #expect(
                ClientFrames.requestLayout(id: 1, method: method, payloadCount: 0, timeoutMilliseconds: 0, metadata: encoded)
                    == nil)
        }
    }

    /// What `okResponse` reads of `bytes`, as an envelope (nil when it leaves them to `decode`).
    static func read(_ bytes: [UInt8]) -> Envelope? {
        bytes.withUnsafeBufferPointer { ClientFrames.okResponse($0) }.map {
            Envelope(requestID: $0.requestID, kind: .response(.ok($0.payload)))
        }
    }

    @Test func anOKResponseIsReadAsTheEnvelopeReaderReadsIt() throws {
        var g = Seeded(state: 0x1405_7B7E_F767_814F)
        var taken = 0
        for _ in 0..<3000 {
            let e = EnvelopeCodecTests.envelope(&g)
            let bytes = try e.encode()
            let direct = Self.read(bytes)
            if let direct {
                taken += 1
                #expect(direct == (try Envelope.decodeReference(bytes)), "\(e)")
            }
            // Every successful response to a call is taken; nothing else is.
            var isOKResponse = false
            if case .response(let r) = e.kind, r.status.isOK, e.requestID != 0 { isOKResponse = true }
            #expect((direct != nil) == isOKResponse, "\(e)")
        }
        #expect(taken > 100, "taken \(taken)")
    }

    @Test func whatTheResponseReaderTakesProtobufCReadsTheSame() throws {
        var g = Seeded(state: 0x94D0_49BB_1331_11EB)
        var taken = 0
        for _ in 0..<20_000 {
            var bytes = try EnvelopeCodecTests.envelope(&g).encode()
            g.mutate(&bytes)
            guard let direct = Self.read(bytes) else { continue }
            taken += 1
            #expect((try? Envelope.decodeReference(bytes)) == direct, "\(bytes)")
        }
        #expect(taken > 100, "taken \(taken)")
    }

    @Test func responsesItDoesNotTakeGoToTheEnvelopeReader() {
        let forms: [[UInt8]] = [
            // Request id 0 (the server refusing the connection), with and without the field.
            [0x1A, 0x00],
            [0x08, 0x00, 0x1A, 0x00],
            // A status with code 0 and a message: success for protobuf-c, left to it.
            [0x08, 0x03, 0x1A, 0x05, 0x0A, 0x03, 0x12, 0x01, 0x78],
            // A stream message; a cancel; a trailing field; the payload field twice.
            [0x08, 0x03, 0x22, 0x03, 0x0A, 0x01, 0x07],
            [0x08, 0x03, 0x2A, 0x00],
            [0x08, 0x03, 0x1A, 0x00, 0x48, 0x01],
            [0x08, 0x03, 0x1A, 0x06, 0x12, 0x01, 0x07, 0x12, 0x01, 0x08],
            // Truncated.
            [0x08, 0x03, 0x1A, 0x03, 0x12, 0x01],
        ]
        for bytes in forms { #expect(Self.read(bytes) == nil, "\(bytes)") }
        // Request id 3, an empty response; then one holding payload [7].
        #expect(Self.read([0x08, 0x03, 0x1A, 0x00]) == Envelope(requestID: 3, kind: .response(.ok([]))))
        #expect(Self.read([0x08, 0x03, 0x1A, 0x03, 0x12, 0x01, 0x07]) == Envelope(requestID: 3, kind: .response(.ok([7]))))
    }

    /// Every frame `forEachFrame` lends for `stream` cut into `chunks`, and what it threw.
    static func frames(of stream: [UInt8], in chunks: [Int], maximumLength: Int = Frame.defaultMaximumLength) -> (
        bodies: [[UInt8]], error: RainError?
    ) {
        var d = FrameDecoder(maximumLength: maximumLength)
        var bodies: [[UInt8]] = []
        var at = 0
        for size in chunks {
            let chunk = Array(stream[at..<min(at + size, stream.count)])
            at += chunk.count
            let result = chunk.withUnsafeBytes { raw in
                Result { () throws(RainError) in try d.forEachFrame(in: raw) { bodies.append(Array($0)) } }
            }
            if case .failure(let error) = result { return (bodies, error) }
        }
        return (bodies, nil)
    }

    @Test func framesLentFromTheReadBufferAreTheFramesTheDecoderReturns() {
        var g = Seeded(state: 0x7FB5_D329_728E_A185)
        for _ in 0..<500 {
            let bodies = (0..<Int(g.next() % 5)).map { _ in EnvelopeCodecTests.bytes(&g) }
            let stream = bodies.flatMap { Frame.encode($0) }
            // Cut anywhere: whole frames, frames split across reads, several frames in one read.
            var chunks: [Int] = []
            var left = stream.count
            while left > 0 {
                let size = min(left, 1 + Int(g.next() % 400))
                chunks.append(size)
                left -= size
            }
            let got = Self.frames(of: stream, in: chunks)
            #expect(got.error == nil)
            #expect(got.bodies == bodies, "\(chunks)")
        }
    }

    @Test func aHeaderOverTheMaximumIsRefusedWhetherTheFrameIsLentInPlaceOrBuffered() {
        let small = Frame.encode([1, 2, 3])
        let large = Frame.encode(Array(repeating: 9, count: 100))
        // In place: the first frame is lent, then the header over the maximum throws.
        let inPlace = Self.frames(of: small + large, in: [small.count + large.count], maximumLength: 50)
        #expect(inPlace.bodies == [[1, 2, 3]])
        #expect(inPlace.error?.details.reason == "frame_too_large")
        // Buffered: the header arrives after a partial frame.
        let buffered = Self.frames(of: small + large, in: [2, small.count + 2], maximumLength: 50)
        #expect(buffered.bodies == [[1, 2, 3]])
        #expect(buffered.error?.details.reason == "frame_too_large")
        // A header alone, in place, is refused before its body arrives.
        let header = Self.frames(of: large, in: [Frame.headerLength], maximumLength: 50)
        #expect(header.bodies.isEmpty)
        #expect(header.error?.details.reason == "frame_too_large")
    }
}
