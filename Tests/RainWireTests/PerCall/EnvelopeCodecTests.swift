import Foundation
import RainCore
import RainWire
import Testing

/// The envelope's direct codec (EnvelopeCodec.swift) against protobuf-c, the reference: the same
/// bytes written, the same envelope read, and protobuf-c deciding whatever is not canonical.
@Suite struct EnvelopeCodecTests {
    /// A seeded xorshift generator: every run checks the same envelopes.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }

        /// Flips, drops or inserts a byte or two: most results are no longer canonical.
        mutating func mutate(_ bytes: inout [UInt8]) {
            for _ in 0...(next() % 2) where !bytes.isEmpty {
                let at = Int(next() % UInt64(bytes.count))
                switch next() % 3 {
                case 0: bytes[at] ^= UInt8(truncatingIfNeeded: 1 << (next() % 8))
                case 1: bytes.remove(at: at)
                default: bytes.insert(UInt8(truncatingIfNeeded: next()), at: at)
                }
            }
        }
    }

    /// Both read the same value, or both refused with the same code and reason.
    static func expectSameOutcome<T: Equatable>(
        _ a: Result<T, RainError>, _ b: Result<T, RainError>, _ what: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        switch (a, b) {
        case (.success(let x), .success(let y)): #expect(x == y, "\(what)", sourceLocation: sourceLocation)
        case (.failure(let x), .failure(let y)):
            #expect(x.code == y.code && x.details.reason == y.details.reason, "\(what)", sourceLocation: sourceLocation)
        default: Issue.record("they disagree on \(what)", sourceLocation: sourceLocation)
        }
    }

    static func string(_ g: inout Seeded) -> String {
        let pool = [
            "", "a", "profile", "default", "/rain.wallet.v1.Session/GetState", "é✓€", "🚀 x", String(repeating: "z", count: 200),
        ]
        return pool[Int(g.next() % UInt64(pool.count))]
    }

    static func bytes(_ g: inout Seeded) -> [UInt8] {
        let n = [0, 1, 5, 127, 128, 300][Int(g.next() % 6)]
        return (0..<n).map { _ in UInt8(truncatingIfNeeded: g.next()) }
    }

    static func number(_ g: inout Seeded) -> UInt64 {
        [0, 1, 127, 128, 16_383, 16_384, UInt64(UInt32.max), UInt64.max][Int(g.next() % 8)]
    }

    static func envelope(_ g: inout Seeded) -> Envelope {
        let id = number(&g)
        switch g.next() % 4 {
        case 0:
            let metadata = (0..<Int(g.next() % 3)).map { _ in MetadataEntry(key: string(&g), value: string(&g)) }
            return Envelope(
                requestID: id,
                kind: .request(
                    WireRequest(
                        method: string(&g), payload: bytes(&g),
                        timeoutMilliseconds: UInt32(truncatingIfNeeded: number(&g)), metadata: metadata)))
        case 1:
            var details = RainError.Details()
            if g.next() % 2 == 0 { details.attemptsRemaining = UInt32(truncatingIfNeeded: number(&g)) }
            if g.next() % 2 == 0 { details.retryAfterMilliseconds = number(&g) }
            if g.next() % 2 == 0 { details.reason = string(&g) }
            if g.next() % 2 == 0 { details.field = string(&g) }
            if g.next() % 2 == 0 { details.limit = string(&g) }
            if g.next() % 2 == 0 { details.isAuthorityUnreachable = true }
            if g.next() % 2 == 0 { details.retryAfter = Date(unixMilliseconds: Int64(g.next() % 4_000_000_000_000)) }
            let code = [0, 102, 301, 501][Int(g.next() % 4)]
            let status = WireStatus(code: UInt32(code), message: string(&g), details: details)
            return Envelope(requestID: id, kind: .response(WireResponse(status: status, payload: bytes(&g))))
        case 2:
            return Envelope(requestID: id, kind: .stream(payload: bytes(&g)))
        default:
            return Envelope(requestID: id, kind: .cancel)
        }
    }

    @Test func writesTheBytesProtobufCPacksAndReadsThemBack() throws {
        var g = Seeded(state: 0x9E37_79B9_7F4A_7C15)
        for _ in 0..<3000 {
            let e = Self.envelope(&g)
            let bytes = try e.encode()
            #expect(bytes == (try e.encodeReference()), "\(e)")
            // Written directly, not protobuf-c's bytes taken after a size computed wrong.
            #expect(try e.directBytes(isFramed: false) == bytes)
            #expect(try e.directBytes(isFramed: true) == Frame.encode(bytes))
            let reference = try Envelope.decodeReference(bytes)
            // The canonical reader takes every byte string the writer produces.
            #expect(Envelope.decodeCanonical(bytes) == reference, "\(e)")
            #expect(try Envelope.decode(bytes) == reference)
            #expect(try e.encodeFrame() == Frame.encode(bytes))
        }
    }

    @Test func whatTheCanonicalReaderTakesProtobufCReadsTheSame() throws {
        var g = Seeded(state: 0x2545_F491_4F6C_DD1D)
        var taken = 0
        var left = 0
        for _ in 0..<20_000 {
            var bytes = try Self.envelope(&g).encode()
            g.mutate(&bytes)
            let reference = Result { () throws(RainError) in try Envelope.decodeReference(bytes) }
            if let canonical = Envelope.decodeCanonical(bytes) {
                taken += 1
                #expect(try reference.get() == canonical, "\(bytes)")
            } else {
                left += 1
            }
            // The bytes lent in place (the server's and the client's read path) read the same.
            let lent = bytes.withUnsafeBufferPointer { buf in Result { () throws(RainError) in try Envelope.decode(buf) } }
            Self.expectSameOutcome(lent, reference, "decode of lent bytes and protobuf-c on \(bytes)")
            // Whichever reads it, `decode` answers as protobuf-c does.
            let decoded = Result { () throws(RainError) in try Envelope.decode(bytes) }
            Self.expectSameOutcome(decoded, reference, "decode and protobuf-c on \(bytes)")
        }
        // Both paths were exercised.
        #expect(taken > 1000 && left > 1000, "taken \(taken), left \(left)")
    }

    @Test func nonCanonicalFormsGoToProtobufC() throws {
        // request_id after the request; the request field twice; an unknown field 9; a cancel with
        // content; a varint over 64 bits.
        let request: [UInt8] = [0x12, 0x03, 0x0A, 0x01, 0x61]
        let forms: [[UInt8]] = [
            request + [0x08, 0x07],
            request + request,
            [0x08, 0x07] + request + [0x48, 0x01],
            [0x08, 0x07, 0x2A, 0x02, 0x08, 0x01],
            [0x08] + Array(repeating: 0xFF, count: 10) + [0x01] + request,
        ]
        for bytes in forms {
            #expect(Envelope.decodeCanonical(bytes) == nil, "\(bytes)")
            let reference = Result { () throws(RainError) in try Envelope.decodeReference(bytes) }
            let decoded = Result { () throws(RainError) in try Envelope.decode(bytes) }
            Self.expectSameOutcome(decoded, reference, "decode and protobuf-c on \(bytes)")
        }
        // request_id then a request with method "a": canonical.
        #expect(Envelope.decodeCanonical([0x08, 0x07] + request)?.requestID == 7)
    }

    @Test func aStatusWithCode0IsSuccessWhateverElseItCarries() throws {
        // Response { status { message "x" details { reason "r" } } payload [7] }: code 0 is success.
        let bytes: [UInt8] = [
            0x08, 0x03, 0x1A, 0x0D, 0x0A, 0x08, 0x12, 0x01, 0x78, 0x1A, 0x03, 0x12, 0x01, 0x72, 0x12, 0x01, 0x07,
        ]
        let expected = Envelope(requestID: 3, kind: .response(.ok([7])))
        #expect(try Envelope.decodeReference(bytes) == expected)
        #expect(Envelope.decodeCanonical(bytes) == expected)
    }

    @Test func stringsWithNULAreRefusedBothWays() throws {
        let e = Envelope(requestID: 1, kind: .request(WireRequest(method: "a\u{0}b", payload: [])))
        #expect(throws: RainError.self) { try e.encode() }
        #expect(throws: RainError.self) { try e.encodeFrame() }
        // On the wire: method "a\0b" is not canonical, and protobuf-c's reader refuses it.
        let bytes: [UInt8] = [0x08, 0x01, 0x12, 0x05, 0x0A, 0x03, 0x61, 0x00, 0x62]
        #expect(Envelope.decodeCanonical(bytes) == nil)
        let error = try #require(throws: RainError.self) { try Envelope.decode(bytes) }
        #expect(error.code == .invalidArgument)
        // Invalid UTF-8 likewise.
        let invalid: [UInt8] = [0x08, 0x01, 0x12, 0x04, 0x0A, 0x02, 0xC3, 0x28]
        #expect(Envelope.decodeCanonical(invalid) == nil)
        #expect(throws: RainError.self) { try Envelope.decode(invalid) }
    }
}
