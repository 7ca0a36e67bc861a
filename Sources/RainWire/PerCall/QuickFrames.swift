import FoundationEssentials
import Glibc
import RainCore

// The server's quick lane: a request in the exact shape the client library sends for a
// cheap read (an id, a method, no payload, no deadline, at most the `profile` metadata entry) is
// recognised in the frame's bytes, and its answer written from bytes the handler keeps encoded,
// without building an `Envelope`, a `WireRequest` or their strings. Anything else, and every request
// the handler does not answer at once, takes the ordinary path (`Envelope.decode`), which stays the
// reference: `QuickFramesTests` checks that both read the same request and write the same answer.

/// A request recognised in a frame body, lent in place: valid only while the body is.
public struct QuickRequest {
    /// The request id (never 0: a request with id 0 takes the ordinary path, which refuses it).
    public let requestID: UInt64
    /// The method name's UTF-8 bytes.
    public let method: UnsafeBufferPointer<UInt8>
    /// The value of the one `profile` metadata entry; nil when the request has no metadata.
    public let profile: UnsafeBufferPointer<UInt8>?

    /// Recognises the canonical bytes of a request with an id, a method, no payload, no deadline,
    /// and either no metadata or one `profile` entry; nil for anything else (including a request
    /// the ordinary path would refuse), which then takes the ordinary path.
    public init?(_ body: UnsafeBufferPointer<UInt8>) {
        var r = QuickScanner(body)
        // request_id (field 1, varint, not 0), then the request (field 2), then nothing.
        guard r.byte() == 0x08, let id = r.varint(), id != 0, r.byte() == 0x12, let request = r.delimited(), r.isAtEnd
        else { return nil }
        var q = QuickScanner(request)
        // method (field 1): compared byte for byte with a handler's method names, so nothing else
        // need be checked here.
        guard q.byte() == 0x0A, let method = q.delimited() else { return nil }
        var profile: UnsafeBufferPointer<UInt8>?
        if !q.isAtEnd {
            // metadata (field 4): one entry {key "profile", value}, the value printable ASCII.
            guard q.byte() == 0x22, let entry = q.delimited(), q.isAtEnd else { return nil }
            var e = QuickScanner(entry)
            guard e.byte() == 0x0A, let key = e.delimited(), Self.equals(key, Self.profileKey), e.byte() == 0x12,
                let value = e.delimited(), e.isAtEnd, !value.isEmpty, value.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else { return nil }
            profile = value
        }
        self.requestID = id
        self.method = method
        self.profile = profile
    }

    fileprivate init(requestID: UInt64, method: UnsafeBufferPointer<UInt8>, profile: UnsafeBufferPointer<UInt8>?) {
        self.requestID = requestID
        self.method = method
        self.profile = profile
    }

    /// Recognises `body` as `init(_:)` does, faster when it is the request `shape` last saw
    /// with another id: a client repeats the same request, and everything after the id (the
    /// method, the metadata) is then compared with one `memcmp` instead of read field by field
    /// on this per-call path (docs/performance.md). A body that differs there is read in full, and
    /// `shape` becomes its own. The result is the same either way (`QuickFramesTests`, FuzzFrame).
    public init?(_ body: UnsafeBufferPointer<UInt8>, shape: inout QuickShape?) {
        var r = QuickScanner(body)
        guard r.byte() == 0x08, let id = r.varint(), id != 0, let base = body.baseAddress else { return nil }
        let tail = UnsafeBufferPointer(start: base + r.at, count: body.count - r.at)
        if let known = shape, let q = known.request(id: id, tail: tail) {
            self = q
            return
        }
        guard let q = QuickRequest(body), let learned = QuickShape(q, tail: tail) else { return nil }
        shape = learned
        self = q
    }

    /// True when the method's bytes are `name`'s UTF-8.
    public func isMethod(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { Self.equals(method, $0) }
    }

    private static let profileKey: StaticString = "profile"

    private static func equals(_ a: UnsafeBufferPointer<UInt8>, _ b: StaticString) -> Bool {
        equals(a, UnsafeBufferPointer(start: b.utf8Start, count: b.utf8CodeUnitCount))
    }

    /// Whether `a` and `b` hold the same bytes (a `memcmp`: a generic `elementsEqual` is far slower,
    /// even for a short name). Also the client's comparison of kept answers.
    public static func equals(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        guard let pa = a.baseAddress, let pb = b.baseAddress else { return true }
        return memcmp(pa, pb, a.count) == 0
    }
}

/// What follows the id in a request the quick lane recognised (a connection's last one), and where
/// its method and profile lie in those bytes.
public struct QuickShape: Sendable, Equatable {
    private let tail: [UInt8]
    private let method: Range<Int>
    private let profile: Range<Int>?

    /// The shape of `request`, recognised in a body whose bytes after the id are `tail`; nil
    /// when the request's fields do not lie in `tail`.
    init?(_ request: QuickRequest, tail: UnsafeBufferPointer<UInt8>) {
        guard let method = Self.range(of: request.method, in: tail) else { return nil }
        self.method = method
        if let p = request.profile {
            guard let profile = Self.range(of: p, in: tail) else { return nil }
            self.profile = profile
        } else {
            self.profile = nil
        }
        self.tail = Array(tail)
    }

    /// The request with `id` whose bytes after the id are `tail`, when they are this shape's.
    func request(id: UInt64, tail: UnsafeBufferPointer<UInt8>) -> QuickRequest? {
        guard let base = tail.baseAddress,
            self.tail.withUnsafeBufferPointer({ QuickRequest.equals($0, tail) })
        else { return nil }
        return QuickRequest(
            requestID: id, method: UnsafeBufferPointer(start: base + method.lowerBound, count: method.count),
            profile: profile.map { UnsafeBufferPointer(start: base + $0.lowerBound, count: $0.count) })
    }

    private static func range(of part: UnsafeBufferPointer<UInt8>, in whole: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        guard let p = part.baseAddress, let w = whole.baseAddress, p >= w, p + part.count <= w + whole.count
        else { return nil }
        let start = p - w
        return start..<(start + part.count)
    }
}

/// Writes the frame of a successful answer: what `Envelope(requestID:kind: .response(.ok(payload)))`
/// encodes to, framed.
public enum QuickAnswer {
    /// Writes the frame at the start of `buffer`; returns its length, or nil when the buffer has
    /// less room than the frame with the longest varints. Through `PlainWriter`, not
    /// `ProtoWriter`, whose checked writes of single bytes cost too much on this per-call path.
    public static func write(
        requestID: UInt64, payload: UnsafeBufferPointer<UInt8>, into buffer: UnsafeMutableBufferPointer<UInt8>
    ) -> Int? {
        let response = EnvelopeSize.bytes(2, payload.count)
        let body = EnvelopeSize.varintField(1, requestID) + EnvelopeSize.message(3, response)
        let size = Frame.headerLength + body
        // Room for the longest varints too, so that no write below can pass the buffer's end.
        guard Frame.headerLength + 33 + payload.count <= buffer.count, body <= Int(UInt32.max),
            let base = buffer.baseAddress
        else { return nil }
        var w = PlainWriter(base: base)
        w.frameHeader(length: body)
        w.varintField(1, requestID)
        w.tag(3, .lengthDelimited)
        w.varint(UInt64(response))
        w.bytesField(2, payload)
        return w.at == size ? size : nil
    }
}

/// Writes bytes at a pointer with no checks: for frames whose size was computed first and checked
/// against the room (`QuickAnswer`, `ClientFrames.RequestTail`). A size computed wrong shows as a
/// length that differs from it, which the callers check (and the tests compare every byte).
struct PlainWriter: FrameByteWriter {
    let base: UnsafeMutablePointer<UInt8>
    private(set) var at = 0

    init(base: UnsafeMutablePointer<UInt8>) { self.base = base }

    mutating func byte(_ b: UInt8) {
        base[at] = b
        at += 1
    }

    mutating func copy(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress else { return }
        (base + at).update(from: source, count: bytes.count)
        at += bytes.count
    }
}

/// Reads the few shapes `QuickRequest` accepts; nil on anything else.
private struct QuickScanner {
    let buf: UnsafeBufferPointer<UInt8>
    var at = 0

    init(_ buf: UnsafeBufferPointer<UInt8>) { self.buf = buf }

    var isAtEnd: Bool { at >= buf.count }

    mutating func byte() -> UInt8? {
        guard at < buf.count else { return nil }
        defer { at += 1 }
        return buf[at]
    }

    /// A varint of at most 9 bytes (63 bits: longer ones are the ordinary path's business).
    mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while at < buf.count, shift < 63 {
            let b = buf[at]
            at += 1
            value |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    /// A length-delimited field's content.
    mutating func delimited() -> UnsafeBufferPointer<UInt8>? {
        guard let n = varint(), n <= UInt64(buf.count - at), let base = buf.baseAddress else { return nil }
        let start = at
        at += Int(n)
        return UnsafeBufferPointer(start: base + start, count: Int(n))
    }
}
