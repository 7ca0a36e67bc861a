import Foundation
import RainCore

// The server's quick lane (issue 18): a request in the exact shape the client library sends for a
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

    /// True when the method's bytes are `name`'s UTF-8.
    public func isMethod(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { Self.equals(method, $0) }
    }

    private static let profileKey: StaticString = "profile"

    private static func equals(_ a: UnsafeBufferPointer<UInt8>, _ b: StaticString) -> Bool {
        equals(a, UnsafeBufferPointer(start: b.utf8Start, count: b.utf8CodeUnitCount))
    }

    /// Whether `a` and `b` hold the same bytes (a `memcmp`; a generic `elementsEqual` cost about
    /// 200 instructions for a short name). Also the client's comparison of kept answers.
    public static func equals(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        guard let pa = a.baseAddress, let pb = b.baseAddress else { return true }
        return memcmp(pa, pb, a.count) == 0
    }
}

/// Writes the frame of a successful answer: what `Envelope(requestID:kind: .response(.ok(payload)))`
/// encodes to, framed.
public enum QuickAnswer {
    /// Writes the frame at the start of `buffer`; returns its length, or nil when it does not fit.
    public static func write(
        requestID: UInt64, payload: UnsafeBufferPointer<UInt8>, into buffer: UnsafeMutableBufferPointer<UInt8>
    ) -> Int? {
        let response = EnvelopeSize.bytes(2, payload.count)
        let body = EnvelopeSize.varintField(1, requestID) + EnvelopeSize.message(3, response)
        let size = Frame.headerLength + body
        guard size <= buffer.count, let base = buffer.baseAddress else { return nil }
        let isExact = ProtoWriter.write(at: base, exactly: size) { w in
            w.frameHeader(length: body)
            w.varintField(1, requestID)
            w.tag(3, .lengthDelimited)
            w.varint(UInt64(response))
            w.bytesField(2, payload)
        }
        return isExact ? size : nil
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
