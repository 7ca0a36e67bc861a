import FoundationEssentials
import Glibc
import RainCore

// The client library's per-call frames: a request written and an OK response read
// without an `Envelope` value. Building, copying and destroying that enum (its request holds a
// string, two arrays and an array of metadata) cost more than the bytes themselves. The bytes are
// exactly those of `Envelope.encodeFrame()` (protobuf-c's), and anything the direct reader does not
// take (an error status, a stream message, request id 0, any non-canonical form) is left to
// `Envelope.decode`: `ClientFramesTests` compares both.

/// A call's metadata encoded once (each entry a protobuf `MetadataEntry` field of the request), so
/// that a provider whose metadata never changes does not encode and check it on every call.
package struct EncodedMetadata: Sendable {
    /// The entries, in order.
    package let entries: [MetadataEntry]
    /// The entries' fields as protobuf-c writes them; nil when a string holds a NUL (the request
    /// is then written by `Envelope.encodeFrame()`, which refuses it with RAIN_102).
    let fields: [UInt8]?

    /// Encodes `entries`.
    package init(_ entries: [MetadataEntry]) {
        self.entries = entries
        fields = Self.fields(entries)
    }

    private static func fields(_ entries: [MetadataEntry]) -> [UInt8]? {
        var size = 0
        for m in entries {
            guard !ClientFrames.hasNUL(m.key), !ClientFrames.hasNUL(m.value) else { return nil }
            size += EnvelopeSize.message(4, EnvelopeSize.entry(m))
        }
        return ProtoWriter.bytes(exactly: size) { w in
            for m in entries {
                w.tag(4, .lengthDelimited)
                w.varint(UInt64(EnvelopeSize.entry(m)))
                w.stringField(1, m.key)
                w.stringField(2, m.value)
            }
        }
    }
}

/// The frames of a client's calls.
package enum ClientFrames {
    /// Whether `s` holds a NUL (protobuf-c strings end at one: the encoders refuse it).
    static func hasNUL(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { utf8 in utf8.baseAddress.map { memchr($0, 0, utf8.count) != nil } ?? false }
    }

    /// The frame of a request: the bytes of `Envelope(requestID: id, kind: .request(…)).encodeFrame()`.
    /// - Throws: RAIN_102 for a method or metadata string with an embedded NUL.
    package static func request(
        id: UInt64, method: String, payload: [UInt8], timeoutMilliseconds: UInt32, metadata: EncodedMetadata
    ) throws(RainError) -> [UInt8] {
        if let fields = metadata.fields, !ClientFrames.hasNUL(method) {
            let (kind, total) = sizes(
                id: id, method: method, payloadCount: payload.count, timeoutMilliseconds: timeoutMilliseconds, fields: fields)
            let frame = ProtoWriter.bytes(exactly: Frame.headerLength + total) { w in
                w.request(
                    id: id, method: method, payload: payload, timeoutMilliseconds: timeoutMilliseconds, fields: fields,
                    kind: kind, total: total)
            }
            if let frame { return frame }
        }
        // A NUL to refuse (or a size computed wrong, which ClientFramesTests catch): the envelope's
        // own encoder, which throws for the NUL.
        let request = WireRequest(
            method: method, payload: payload, timeoutMilliseconds: timeoutMilliseconds, metadata: metadata.entries)
        return try Envelope(requestID: id, kind: .request(request)).encodeFrame()
    }

    /// A request's frame measured, its strings checked: what `writeRequest` needs.
    package struct RequestLayout: Sendable {
        let kind: Int
        let total: Int
        let fields: [UInt8]
        /// The frame's length.
        package var length: Int { Frame.headerLength + total }
    }

    /// Measures a request's frame; nil when the method or the metadata holds a NUL (then
    /// `request(…)` throws the refusal).
    package static func requestLayout(
        id: UInt64, method: String, payloadCount: Int, timeoutMilliseconds: UInt32, metadata: EncodedMetadata
    ) -> RequestLayout? {
        guard let fields = metadata.fields, !ClientFrames.hasNUL(method) else { return nil }
        let (kind, total) = sizes(
            id: id, method: method, payloadCount: payloadCount, timeoutMilliseconds: timeoutMilliseconds, fields: fields)
        return RequestLayout(kind: kind, total: total, fields: fields)
    }

    /// Writes the frame of a request (the bytes of `request(…)`) at the start of `buffer`, for a
    /// connection that sends its requests from one buffer instead of an array each; `layout`
    /// measured this very request (`requestLayout`), so that a call measures and checks it once.
    /// Returns its length; nil when it does not fit there (or `layout` is of another request).
    package static func writeRequest(
        _ layout: RequestLayout, id: UInt64, method: String, payload: [UInt8], timeoutMilliseconds: UInt32,
        into buffer: UnsafeMutableBufferPointer<UInt8>
    ) -> Int? {
        let size = layout.length
        guard size <= buffer.count, let base = buffer.baseAddress else { return nil }
        let isExact = ProtoWriter.write(at: base, exactly: size) { w in
            w.request(
                id: id, method: method, payload: payload, timeoutMilliseconds: timeoutMilliseconds, fields: layout.fields,
                kind: layout.kind, total: layout.total)
        }
        return isExact ? size : nil
    }

    /// A request's bytes after its id, kept to send the same request again under another id:
    /// a client repeats the same call (the same method, payload, deadline and metadata), and
    /// writing its fields again on every call is wasted work. The frame it writes is
    /// the bytes of `request(…)` (`ClientFramesTests`).
    package struct RequestTail: Sendable {
        private let method: String
        private let payload: [UInt8]
        private let timeoutMilliseconds: UInt32
        private let fields: [UInt8]
        /// The envelope after its id field: the request field, tag and all.
        private let bytes: [UInt8]

        /// The tail of this request; nil when the method or the metadata holds a NUL (then
        /// `request(…)` throws the refusal).
        package init?(method: String, payload: [UInt8], timeoutMilliseconds: UInt32, metadata: EncodedMetadata) {
            guard let fields = metadata.fields, !ClientFrames.hasNUL(method) else { return nil }
            let kind =
                EnvelopeSize.string(1, method) + EnvelopeSize.bytes(2, payload.count)
                + EnvelopeSize.varintField(3, UInt64(timeoutMilliseconds)) + fields.count
            guard
                let bytes = ProtoWriter.bytes(
                    exactly: EnvelopeSize.message(2, kind),
                    { w in
                        w.tag(2, .lengthDelimited)
                        w.varint(UInt64(kind))
                        w.stringField(1, method)
                        w.bytesField(2, payload)
                        w.varintField(3, UInt64(timeoutMilliseconds))
                        w.raw(fields)
                    })
            else { return nil }
            self.method = method
            self.payload = payload
            self.timeoutMilliseconds = timeoutMilliseconds
            self.fields = fields
            self.bytes = bytes
        }

        /// Whether it is the tail of this request. Cheap for the usual repeat: the strings and
        /// arrays are then the same storage, which `==` sees before it compares any element.
        package func matches(
            method: String, payload: [UInt8], timeoutMilliseconds: UInt32, metadata: EncodedMetadata
        ) -> Bool {
            timeoutMilliseconds == self.timeoutMilliseconds && method == self.method && payload == self.payload
                && metadata.fields == fields
        }

        /// The longest frame it writes (an id of ten bytes).
        package var maximumFrameLength: Int { Frame.headerLength + 11 + bytes.count }

        /// Writes the frame of the request with `id` at the start of `buffer`; returns its length,
        /// nil when the buffer is shorter than `maximumFrameLength`. Not inlined:
        /// `scripts/bench-instructions` counts its calls as the requests an inline call wrote.
        @inline(never)
        package func write(id: UInt64, into buffer: UnsafeMutableBufferPointer<UInt8>) -> Int? {
            // Through `PlainWriter`, not `ProtoWriter`: its checked writes of single bytes cost too
            // much on this per-call path. The frame header, the id field, the tail.
            let total = EnvelopeSize.varintField(1, id) + bytes.count
            let size = Frame.headerLength + total
            // Room for the longest id, so that no write below can pass the buffer's end.
            guard maximumFrameLength <= buffer.count, total <= Int(UInt32.max), let base = buffer.baseAddress else {
                return nil
            }
            var w = PlainWriter(base: base)
            w.frameHeader(length: total)
            w.varintField(1, id)
            bytes.withUnsafeBufferPointer { w.copy($0) }
            return w.at == size ? size : nil
        }
    }

    /// The lengths of a request's `Request` message and of its envelope.
    private static func sizes(
        id: UInt64, method: String, payloadCount: Int, timeoutMilliseconds: UInt32, fields: [UInt8]
    ) -> (kind: Int, total: Int) {
        let kind =
            EnvelopeSize.string(1, method) + EnvelopeSize.bytes(2, payloadCount)
            + EnvelopeSize.varintField(3, UInt64(timeoutMilliseconds)) + fields.count
        return (kind, EnvelopeSize.varintField(1, id) + EnvelopeSize.message(2, kind))
    }

    /// The frame of a cancel for `id`: the bytes of `Envelope(requestID: id, kind: .cancel).encodeFrame()`.
    package static func cancel(id: UInt64) -> [UInt8] {
        let total = EnvelopeSize.varintField(1, id) + EnvelopeSize.message(5, 0)
        let frame = ProtoWriter.bytes(exactly: Frame.headerLength + total) { w in
            w.frameHeader(length: total)
            w.varintField(1, id)
            w.tag(5, .lengthDelimited)
            w.varint(0)
        }
        // Never nil (the size above is exact); the fallback only keeps a wrong size from a crash.
        return frame ?? Frame.encode([])
    }

    /// Reads a frame body that is a successful response to a call in its canonical form (request
    /// id, then a response without a status, holding at most the payload); nil for anything else,
    /// which `Envelope.decode` reads (an error, a stream message, request id 0, any other form).
    package static func okResponse(_ body: UnsafeBufferPointer<UInt8>) -> (requestID: UInt64, payload: [UInt8])? {
        okResponseInPlace(body).map { ($0.requestID, Array($0.payload)) }
    }

    /// `okResponse`, its payload left where it lies in `body` (no array to make and free when the
    /// reader copies it into storage it keeps).
    package static func okResponseInPlace(
        _ body: UnsafeBufferPointer<UInt8>
    ) -> (requestID: UInt64, payload: UnsafeBufferPointer<UInt8>)? {
        var r = ProtoReader(body)
        guard let (idNumber, idType) = r.field(after: 0), idNumber == 1, idType == ProtoReader.varintType,
            let id = r.varint(), id != 0,
            let (kindNumber, kindType) = r.field(after: 1), kindNumber == 3, kindType == ProtoReader.delimitedType,
            var response = r.nested(), r.isAtEnd
        else { return nil }
        guard !response.isAtEnd else { return (id, UnsafeBufferPointer(rebasing: body[body.count...])) }
        guard let (number, type) = response.field(after: 0), number == 2, type == ProtoReader.delimitedType,
            let payload = response.bytesInPlace(), response.isAtEnd
        else { return nil }
        return (id, payload)
    }
}

/// The client's frames are written by the envelope's writer (`ProtoWriter`), plus these.
extension ProtoWriter {
    /// A request's frame, its sizes computed by `ClientFrames.sizes`.
    mutating func request(
        id: UInt64, method: String, payload: [UInt8], timeoutMilliseconds: UInt32, fields: [UInt8], kind: Int, total: Int
    ) {
        frameHeader(length: total)
        varintField(1, id)
        tag(2, .lengthDelimited)
        varint(UInt64(kind))
        stringField(1, method)
        bytesField(2, payload)
        varintField(3, UInt64(timeoutMilliseconds))
        raw(fields)
    }

    /// Bytes already encoded (the metadata's fields).
    mutating func raw(_ bytes: [UInt8]) { bytes.withUnsafeBufferPointer { copy($0) } }
}

extension FrameDecoder {
    /// Lends every frame body that `bytes` (just received) completes to `read`, in order. When no
    /// partial frame is buffered, the complete frames are lent straight from `bytes`
    /// (`completeFrames`) and only a trailing partial frame is copied into the decoder: on the
    /// per-call path a read holds whole frames, and copying each into the decoder's buffer first
    /// cost a copy and a resize per call.
    /// - Throws: RAIN_102 (reason `frame_too_large`) when a header declares more than the
    ///   maximum (as `append`), or what `read` throws; the stream cannot be trusted afterwards.
    package mutating func forEachFrame(
        in bytes: UnsafeRawBufferPointer, _ read: (UnsafeBufferPointer<UInt8>) throws(RainError) -> Void
    ) throws(RainError) {
        var rest = bytes
        if bufferedByteCount == 0 {
            var failure: RainError?
            let taken = try Self.completeFrames(in: bytes, maximumLength: maximumLength) { body in
                do throws(RainError) {
                    try read(body)
                    return true
                } catch {
                    failure = error
                    return false
                }
            }
            if let failure { throw failure }
            rest = UnsafeRawBufferPointer(rebasing: bytes[taken...])
            if rest.isEmpty { return }
        }
        try append(rest)
        while let done = try withNextFrame({ body in Result { () throws(RainError) in try read(body) } }) {
            try done.get()
        }
    }
}
