import Foundation
import RainCore
import RainWire
import Testing

/// The quick lane's reader and writer (QuickFrames.swift) against the ordinary codec: a request
/// is read quickly only in the shape the client library sends for a cheap read, and then read as
/// the ordinary path reads it; a quick answer is the ordinary answer's frame, byte for byte.
@Suite struct QuickFramesTests {
    static func body(_ id: UInt64, _ request: WireRequest) throws -> [UInt8] {
        try Envelope(requestID: id, kind: .request(request)).canonicalBytes(isFramed: false)
    }

    static func quick(_ body: [UInt8]) -> (id: UInt64, method: String, profile: String?)? {
        body.withUnsafeBufferPointer { buf in
            QuickRequest(buf).map { q in
                (q.requestID, String(decoding: q.method, as: UTF8.self), q.profile.map { String(decoding: $0, as: UTF8.self) })
            }
        }
    }

    /// Whether `method` could be a method name: UTF-8 without NUL, as the ordinary path requires.
    static func isMethodName(_ method: String) -> Bool {
        !method.utf8.contains(0) && !method.contains("\u{FFFD}")
    }

    @Test("a cheap read as the client library sends it is read quickly, with or without its profile entry")
    func recognised() throws {
        for id: UInt64 in [1, 127, 128, 300, 1 << 40, UInt64(Int64.max)] {
            let withProfile = try Self.body(
                id,
                WireRequest(
                    method: Method.sessionGetState, payload: [],
                    metadata: [MetadataEntry(key: profileMetadataKey, value: "work-profile")]))
            let q = try #require(Self.quick(withProfile), "id \(id)")
            #expect(q.id == id)
            #expect(q.method == Method.sessionGetState)
            #expect(q.profile == "work-profile")
            let bare = try #require(Self.quick(try Self.body(id, WireRequest(method: Method.daemonGetInfo, payload: []))))
            #expect(bare.id == id && bare.method == Method.daemonGetInfo && bare.profile == nil)
        }
        let body = try Self.body(7, WireRequest(method: Method.sessionGetState, payload: []))
        #expect(body.withUnsafeBufferPointer { QuickRequest($0)?.isMethod(Method.sessionGetState) } == true)
        #expect(body.withUnsafeBufferPointer { QuickRequest($0)?.isMethod(Method.daemonGetInfo) } == false)
    }

    @Test("anything else takes the ordinary path: a payload, a deadline, other metadata, id 0, other kinds")
    func declined() throws {
        let profile = MetadataEntry(key: profileMetadataKey, value: "default")
        let others: [(String, [UInt8])] = [
            ("payload", try Self.body(1, WireRequest(method: Method.sessionGetState, payload: [8, 1], metadata: [profile]))),
            (
                "deadline",
                try Self.body(
                    1, WireRequest(method: Method.sessionGetState, payload: [], timeoutMilliseconds: 5, metadata: [profile]))
            ),
            (
                "two entries",
                try Self.body(1, WireRequest(method: Method.sessionGetState, payload: [], metadata: [profile, profile]))
            ),
            (
                "another key",
                try Self.body(
                    1, WireRequest(method: Method.sessionGetState, payload: [], metadata: [MetadataEntry(key: "x", value: "y")]))
            ),
            (
                "empty profile",
                try Self.body(
                    1,
                    WireRequest(
                        method: Method.sessionGetState, payload: [], metadata: [MetadataEntry(key: profileMetadataKey, value: "")]
                    ))
            ),
            (
                "profile with a space",
                try Self.body(
                    1,
                    WireRequest(
                        method: Method.sessionGetState, payload: [],
                        metadata: [MetadataEntry(key: profileMetadataKey, value: "a b")]))
            ),
            ("id 0", try Self.body(0, WireRequest(method: Method.sessionGetState, payload: []))),
            ("response", try Envelope(requestID: 1, kind: .response(.ok([]))).canonicalBytes(isFramed: false)),
            ("cancel", try Envelope(requestID: 1, kind: .cancel).canonicalBytes(isFramed: false)),
            ("empty", []),
        ]
        for (what, body) in others {
            #expect(Self.quick(body) == nil, "\(what)")
        }
        // Every prefix of a recognised request, and a byte more after it.
        let whole = try Self.body(9, WireRequest(method: Method.sessionGetState, payload: [], metadata: [profile]))
        for n in 0..<whole.count {
            #expect(Self.quick(Array(whole[0..<n])) == nil, "prefix of \(n) bytes")
        }
        #expect(Self.quick(whole + [0]) == nil)
    }

    @Test("whatever the quick lane reads, the ordinary path reads the same (mutated requests)")
    func agreesWithTheOrdinaryPath() throws {
        var rng = EnvelopeCodecTests.Seeded(state: 0x9E37_79B9_7F4A_7C15)
        let profile = MetadataEntry(key: profileMetadataKey, value: "default")
        let seed = try Self.body(300, WireRequest(method: Method.sessionGetState, payload: [], metadata: [profile]))
        var recognised = 0
        for _ in 0..<5_000 {
            var bytes = seed
            rng.mutate(&bytes)
            guard let q = Self.quick(bytes) else { continue }
            recognised += 1
            // A method that is no method name (not UTF-8, a NUL) is read quickly but answered by no
            // handler, which compares it with its names: the ordinary path refuses it.
            guard let decoded = try? Envelope.decode(bytes) else {
                #expect(!Self.isMethodName(q.method), "the ordinary path refused \(bytes)")
                continue
            }
            guard case .request(let r) = decoded.kind else {
                Issue.record("read quickly as a request, decoded as \(decoded.kind)")
                continue
            }
            #expect(decoded.requestID == q.id)
            #expect(r.method == q.method)
            #expect(r.profile == q.profile)
            #expect(r.payload.isEmpty && r.timeoutMilliseconds == 0 && r.metadata.count <= 1)
        }
        // Some mutations keep the shape (another id, method or profile byte): the check ran.
        #expect(recognised > 10)
    }

    /// What `QuickRequest(_:shape:)` reads from `body` with `shape`, as `quick` gives it.
    static func quick(_ body: [UInt8], shape: inout QuickShape?) -> (id: UInt64, method: String, profile: String?)? {
        body.withUnsafeBufferPointer { buf in
            QuickRequest(buf, shape: &shape).map { q in
                (q.requestID, String(decoding: q.method, as: UTF8.self), q.profile.map { String(decoding: $0, as: UTF8.self) })
            }
        }
    }

    @Test("a connection's last request shape reads the next one as reading it afresh does")
    func shapeReadsAlike() throws {
        let work = MetadataEntry(key: profileMetadataKey, value: "work")
        let home = MetadataEntry(key: profileMetadataKey, value: "home-profile")
        var shape: QuickShape?
        let first = try Self.body(5, WireRequest(method: Method.sessionGetState, payload: [], metadata: [work]))
        #expect(Self.quick(first, shape: &shape)?.profile == "work")
        let learned = try #require(shape)
        // The same request with other ids (other varint lengths): read through the shape, which stays.
        for id: UInt64 in [1, 127, 128, 300, 1 << 40, UInt64(Int64.max)] {
            let body = try Self.body(id, WireRequest(method: Method.sessionGetState, payload: [], metadata: [work]))
            let q = try #require(Self.quick(body, shape: &shape), "id \(id)")
            #expect(q.id == id && q.method == Method.sessionGetState && q.profile == "work")
            #expect(shape == learned)
        }
        // Another profile, then no profile, then another method: read afresh, and the shape follows.
        let other = try Self.body(6, WireRequest(method: Method.sessionGetState, payload: [], metadata: [home]))
        #expect(Self.quick(other, shape: &shape)?.profile == "home-profile")
        #expect(shape != learned)
        let bare = try Self.body(7, WireRequest(method: Method.daemonGetInfo, payload: []))
        let b = try #require(Self.quick(bare, shape: &shape))
        #expect(b.method == Method.daemonGetInfo && b.profile == nil && b.id == 7)
        // Something the quick lane declines leaves the shape as it was.
        let kept = shape
        let declined = try Self.body(8, WireRequest(method: Method.daemonGetInfo, payload: [1]))
        #expect(Self.quick(declined, shape: &shape) == nil)
        #expect(shape == kept)
        // Mutated requests, each read through the previous one's shape: as read afresh.
        var rng = EnvelopeCodecTests.Seeded(state: 0x0123_4567_89AB_CDEF)
        var viaShape = 0
        for i in 0..<5_000 {
            var bytes = first
            if i % 3 != 0 { rng.mutate(&bytes) }
            let before = shape
            let q = Self.quick(bytes, shape: &shape)
            let fresh = Self.quick(bytes)
            #expect(q?.id == fresh?.id && q?.method == fresh?.method && q?.profile == fresh?.profile, "\(bytes)")
            if q != nil, shape == before { viaShape += 1 }
        }
        #expect(viaShape > 1_000)
    }

    @Test("a quick answer is the ordinary answer's frame, byte for byte")
    func answerBytes() throws {
        let scratch = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 1 << 17)
        defer { scratch.deallocate() }
        for id: UInt64 in [1, 127, 128, 1 << 35, UInt64.max] {
            for size in [0, 1, 127, 128, 300, 20_000, 70_000] {
                let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
                let expected = try Envelope(requestID: id, kind: .response(.ok(payload))).canonicalBytes(isFramed: true)
                let n = try #require(
                    payload.withUnsafeBufferPointer { QuickAnswer.write(requestID: id, payload: $0, into: scratch) })
                #expect(Array(scratch[0..<n]) == expected, "id \(id), \(size) bytes")
            }
        }
        // No room: nil, nothing written past the buffer.
        let small = UnsafeMutableBufferPointer(rebasing: scratch[0..<10])
        #expect(
            [UInt8](repeating: 1, count: 20).withUnsafeBufferPointer { QuickAnswer.write(requestID: 1, payload: $0, into: small) }
                == nil)
    }
}
