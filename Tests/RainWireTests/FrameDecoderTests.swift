import Foundation
import RainCore
import RainWire
import Testing

@Suite struct FrameDecoderTests {
    static let bodies: [[UInt8]] = [[], [1], Array(0..<200), Array(repeating: 7, count: 70_000)]

    var stream: [UInt8] { Self.bodies.flatMap { Frame.encode($0) } }

    @Test func allAtOnce() throws {
        var d = FrameDecoder()
        try d.append(stream)
        var got: [[UInt8]] = []
        while let f = try d.nextFrame() { got.append(f) }
        #expect(got == Self.bodies)
        #expect(d.bufferedByteCount == 0)
    }

    @Test func framesLentInPlaceAreTheFramesCopiedOut() throws {
        var d = FrameDecoder()
        var got: [[UInt8]] = []
        for chunk in stride(from: 0, to: stream.count, by: 333) {
            try d.append(stream[chunk..<min(chunk + 333, stream.count)])
            while let f = try d.withNextFrame({ Array($0) }) { got.append(f) }
        }
        #expect(got == Self.bodies)
        #expect(d.bufferedByteCount == 0)
    }

    @Test("complete frames are lent in place, up to the first incomplete one, and a refusal stops them")
    func completeFramesInPlace() throws {
        var got: [[UInt8]] = []
        let all = stream
        let cut = all.count - 5  // the last frame incomplete
        let taken = try all[0..<cut].withUnsafeBytes { raw in
            try FrameDecoder.completeFrames(in: raw, maximumLength: Frame.defaultMaximumLength) { body in
                got.append(Array(body))
                return true
            }
        }
        #expect(got == Array(Self.bodies.dropLast()))
        #expect(taken == Self.bodies.dropLast().reduce(0) { $0 + Frame.headerLength + $1.count })
        // `each` returning false stops after that frame.
        var seen = 0
        let first = try all.withUnsafeBytes { raw in
            try FrameDecoder.completeFrames(in: raw, maximumLength: Frame.defaultMaximumLength) { _ in
                seen += 1
                return false
            }
        }
        #expect(seen == 1 && first == Frame.headerLength)
        // A header over the maximum is refused, after the frames before it were lent.
        seen = 0
        let error = #expect(throws: RainError.self) {
            _ = try (Frame.encode([1, 2]) + [0, 0, 4, 1]).withUnsafeBytes { raw in
                try FrameDecoder.completeFrames(in: raw, maximumLength: 1024) { _ in
                    seen += 1
                    return true
                }
            }
        }
        #expect(seen == 1)
        #expect(error?.details.reason == "frame_too_large")
    }

    @Test func byteByByte() throws {
        var d = FrameDecoder()
        var got: [[UInt8]] = []
        for b in stream {
            try d.append([b])
            while let f = try d.nextFrame() { got.append(f) }
        }
        #expect(got == Self.bodies)
    }

    @Test func frameByFrame() throws {
        var d = FrameDecoder()
        var got: [[UInt8]] = []
        for body in Self.bodies {
            try d.append(Frame.encode(body))
            #expect(try d.nextFrame() == body)
            #expect(try d.nextFrame() == nil)
            got.append(body)
        }
        #expect(got.count == Self.bodies.count)
    }

    @Test func oversizedLengthRefusedFromTheHeaderAlone() throws {
        var d = FrameDecoder(maximumLength: 1024)
        // Only the header arrives: the decoder must refuse before any body is buffered.
        let error = #expect(throws: RainError.self) { try d.append([0, 0, 4, 1]) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "frame_too_large")
    }

    @Test func maximumLengthItselfIsAccepted() throws {
        var d = FrameDecoder(maximumLength: 1024)
        let body = [UInt8](repeating: 1, count: 1024)
        try d.append(Frame.encode(body))
        #expect(try d.nextFrame() == body)
    }

    @Test func partialHeaderWaits() throws {
        var d = FrameDecoder()
        try d.append([0, 0])
        #expect(try d.nextFrame() == nil)
        #expect(d.bufferedByteCount == 2)
    }

    @Test func hugeDeclaredLengthIsRefused() throws {
        var d = FrameDecoder()
        #expect(throws: RainError.self) { try d.append([0xFF, 0xFF, 0xFF, 0xFF]) }
    }
}

@Suite struct EnvelopeTests {
    @Test func requestRoundTrip() throws {
        let env = Envelope(
            requestID: 42,
            kind: .request(
                WireRequest(
                    method: Method.authSendLoginCode, payload: [1, 2, 3], timeoutMilliseconds: 5000,
                    metadata: [MetadataEntry(key: "profile", value: "myapp")])))
        let decoded = try Envelope.decode(env.encode())
        #expect(decoded == env)
        if case .request(let r) = decoded.kind { #expect(r.profile == "myapp") } else { Issue.record("not a request") }
    }

    @Test func responseWithDetailsRoundTrip() throws {
        let err = RainError(
            .invalidLoginCode, "wrong code", details: .init(attemptsRemaining: 0, reason: "locked", retryAfterMilliseconds: 1500))
        let env = Envelope(requestID: 7, kind: .response(.failure(err)))
        let decoded = try Envelope.decode(env.encode())
        #expect(decoded == env)
        guard case .response(let r) = decoded.kind else {
            Issue.record("not a response")
            return
        }
        // attemptsRemaining 0 must survive: presence is carried by the wrapper message.
        #expect(r.status.error?.details.attemptsRemaining == 0)
        #expect(r.status.error?.code == .invalidLoginCode)
    }

    @Test(arguments: [Envelope.Kind.cancel, .stream(payload: [9, 9]), .response(.ok([5]))])
    func otherKindsRoundTrip(kind: Envelope.Kind) throws {
        let env = Envelope(requestID: UInt64.max, kind: kind)
        #expect(try Envelope.decode(env.encode()) == env)
    }

    @Test func frameEncodingMatchesFramePlusBody() throws {
        let env = Envelope(requestID: 1, kind: .request(WireRequest(method: Method.daemonGetInfo, payload: [])))
        #expect(try env.encodeFrame() == Frame.encode(try env.encode()))
    }

    @Test(arguments: [[0xFF, 0xFF, 0xFF], [0x0A, 0x05, 0x01], [0x12, 0x7F]] as [[UInt8]])
    func garbageIsRefused(bytes: [UInt8]) {
        let error = #expect(throws: RainError.self) { try Envelope.decode(bytes) }
        #expect(error?.code == .invalidArgument)
    }

    @Test func emptyEnvelopeIsRefused() {
        let error = #expect(throws: RainError.self) { try Envelope.decode([0x08, 0x01]) }
        #expect(error?.details.reason == "undecodable_envelope")
    }

    @Test func embeddedNULIsRefusedWhenEncoding() {
        let env = Envelope(requestID: 1, kind: .request(WireRequest(method: "/a\0b", payload: [])))
        #expect(throws: RainError.self) { try env.encode() }
    }

    @Test func invalidUTF8IsRefusedWhenDecoding() {
        // Envelope{request_id=1, request{method = 0xC3 0x28}}
        let bytes: [UInt8] = [0x08, 0x01, 0x12, 0x04, 0x0A, 0x02, 0xC3, 0x28]
        let error = #expect(throws: RainError.self) { try Envelope.decode(bytes) }
        #expect(error?.details.reason == "invalid_utf8")
    }
}

@Suite struct MessageTests {
    @Test func sessionSnapshotRoundTrip() throws {
        let s = SessionSnapshot(
            authState: .authenticated, sessionState: .active(expiresAt: Date(unixMilliseconds: 1_800_000_000_123)),
            accountID: "acct_1", walletID: "wal_1", contact: .phone("+15551234567"), hasActiveSession: true)
        #expect(try SessionSnapshot.decode(s.encode()) == s)
    }

    @Test func eventRoundTrip() throws {
        let e = WatchEvent(sequence: 3, kind: .sessionExpired, state: .unauthenticated, expiryReason: .revokedElsewhere)
        #expect(try WatchEvent.decode(e.encode()) == e)
    }

    @Test func outboxRoundTrip() throws {
        let r = ListOutboxResponse(entries: [
            OutboxEntry(contact: .email("a@b.co"), code: "123456", sentAt: Date(unixMilliseconds: 5), appID: "default")
        ])
        #expect(try ListOutboxResponse.decode(r.encode()) == r)
    }

    @Test func requestsRoundTrip() throws {
        let send = SendLoginCodeRequest(contact: .email("user@example.com"))
        #expect(try SendLoginCodeRequest.decode(send.encode()) == send)
        let confirm = ConfirmLoginCodeRequest(code: "123456")
        #expect(try ConfirmLoginCodeRequest.decode(confirm.encode()) == confirm)
        let info = GetInfoResponse(daemonVersion: "0.1.0", protocolVersion: 1, capabilities: ["a", "b"], maxFrameBytes: 1 << 20)
        #expect(try GetInfoResponse.decode(info.encode()) == info)
    }

    @Test func contactWithoutKindDecodesAsNil() throws {
        // SendLoginCodeRequest{contact{value="x"}}: kind unspecified.
        let decoded = try SendLoginCodeRequest.decode([0x0A, 0x03, 0x12, 0x01, 0x78])
        #expect(decoded.contact == nil)
    }
}

@Suite struct EmbeddedNULTests {
    @Test func aNULInsideAStringFieldIsRefusedNotTruncated() {
        // SendLoginCodeRequest{contact{kind=EMAIL, value="a@b.co\0@x.io"}}
        let value = Array("a@b.co\0@x.io".utf8)
        let contact: [UInt8] = [0x08, 0x01, 0x12, UInt8(value.count)] + value
        let bytes: [UInt8] = [0x0A, UInt8(contact.count)] + contact
        let error = #expect(throws: RainError.self) { try SendLoginCodeRequest.decode(bytes) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "nul_in_string")
    }

    @Test func aNULInTheMethodIsRefused() {
        let method = Array("/rain.wallet.v1.Daemon/GetInfo\0junk".utf8)
        let request: [UInt8] = [0x0A, UInt8(method.count)] + method
        let bytes: [UInt8] = [0x08, 0x01, 0x12, UInt8(request.count)] + request
        let error = #expect(throws: RainError.self) { try Envelope.decode(bytes) }
        #expect(error?.details.reason == "nul_in_string")
    }

    @Test func bytesFieldsMayHoldNUL() throws {
        let echo = SlowEchoRequest(delayMilliseconds: 0, data: [0, 1, 0])
        #expect(try SlowEchoRequest.decode(echo.encode()) == echo)
    }
}
