import FoundationEssentials
import Glibc
import RainCore

// The envelope (proto/envelope.proto) is read and written on every call, by the daemon and by the
// client library. Through protobuf-c each call would build a C message tree in an arena, pack or
// unpack it, then convert it to Swift and free it, each way (docs/performance.md). These are the
// same bytes written and read directly.
//
// Writing produces exactly the bytes protobuf-c packs (proto3 rules: zero scalars, empty strings
// and empty bytes left out; fields in number order; a set message field written even when empty).
// Reading takes the canonical form those writers produce: known fields with their wire types, each
// at most once and in number order (a repeated field in one run), strings in UTF-8 without NUL.
// Anything else (unknown or repeated fields, other orders, merged messages) is read by protobuf-c,
// which stays the reference; `EnvelopeCodecTests` and the FuzzFrame target check both agree.

extension Envelope {
    /// Reads the canonical form of an envelope; nil where protobuf-c must decide (see above).
    package static func decodeCanonical(_ bytes: [UInt8]) -> Envelope? {
        bytes.withUnsafeBufferPointer { buf -> Envelope? in
            var r = ProtoReader(buf)
            return r.envelope()
        }
    }

    /// The envelope's bytes, after a frame header when `isFramed`.
    /// - Throws: RAIN_102 for a string with an embedded NUL (protobuf-c strings end at NUL).
    package func canonicalBytes(isFramed: Bool) throws(RainError) -> [UInt8] {
        if let bytes = try directBytes(isFramed: isFramed) { return bytes }
        // Only a size computed wrong gets here (EnvelopeCodecTests fail then): protobuf-c's bytes.
        let reference = try encodeReference()
        return isFramed ? Frame.encode(reference) : reference
    }

    /// Writes the envelope's frame at the start of `buffer` (the server's answers, without an
    /// array of their own); returns its length, or nil when it does not fit there.
    /// - Throws: RAIN_102 for a string with an embedded NUL.
    package func writeFrame(into buffer: UnsafeMutableBufferPointer<UInt8>) throws(RainError) -> Int? {
        let body = try EnvelopeSize(self)
        let size = Frame.headerLength + body.total
        guard size <= buffer.count, let base = buffer.baseAddress else { return nil }
        let isExact = ProtoWriter.write(at: base, exactly: size) { w in write(body, framed: true, to: &w) }
        return isExact ? size : nil
    }

    /// The bytes written directly; nil when they did not fill the size computed for them.
    package func directBytes(isFramed: Bool) throws(RainError) -> [UInt8]? {
        let body = try EnvelopeSize(self)
        let header = isFramed ? Frame.headerLength : 0
        return ProtoWriter.bytes(exactly: header + body.total) { w in write(body, framed: isFramed, to: &w) }
    }

    private func write(_ body: EnvelopeSize, framed: Bool, to w: inout ProtoWriter) {
        if framed { w.frameHeader(length: body.total) }
        w.varintField(1, requestID)
        switch kind {
        case .request(let r):
            w.tag(2, .lengthDelimited)
            w.varint(UInt64(body.kind))
            w.stringField(1, r.method)
            w.bytesField(2, r.payload)
            w.varintField(3, UInt64(r.timeoutMilliseconds))
            for m in r.metadata {
                w.tag(4, .lengthDelimited)
                w.varint(UInt64(EnvelopeSize.entry(m)))
                w.stringField(1, m.key)
                w.stringField(2, m.value)
            }
        case .response(let r):
            w.tag(3, .lengthDelimited)
            w.varint(UInt64(body.kind))
            if !r.status.isOK {
                w.tag(1, .lengthDelimited)
                w.varint(UInt64(body.status))
                w.varintField(1, UInt64(r.status.code))
                w.stringField(2, r.status.message)
                let d = r.status.details
                if !d.isEmpty {
                    w.tag(3, .lengthDelimited)
                    w.varint(UInt64(body.details))
                    if let a = d.attemptsRemaining { w.wrapperField(1, UInt64(a)) }
                    w.stringField(2, d.reason ?? "")
                    if let ms = d.retryAfterMilliseconds { w.wrapperField(3, ms) }
                    w.stringField(4, d.field ?? "")
                    w.varintField(5, d.isAuthorityUnreachable ? 1 : 0)
                    w.stringField(6, d.limit ?? "")
                    if let at = d.retryAfter, at.unixMilliseconds >= 0 { w.wrapperField(7, UInt64(at.unixMilliseconds)) }
                }
            }
            w.bytesField(2, r.payload)
        case .stream(let payload):
            w.tag(4, .lengthDelimited)
            w.varint(UInt64(body.kind))
            w.bytesField(1, payload)
        case .cancel:
            w.tag(5, .lengthDelimited)
            w.varint(0)
        }
    }
}

/// The encoded sizes of an envelope's nested messages, computed once before writing.
struct EnvelopeSize {
    var kind = 0
    var status = 0
    var details = 0
    var total = 0

    init(_ e: Envelope) throws(RainError) {
        switch e.kind {
        case .request(let r):
            try Self.refuseNUL(r.method, field: "method")
            kind = Self.string(1, r.method) + Self.bytes(2, r.payload.count) + Self.varintField(1, UInt64(r.timeoutMilliseconds))
            for m in r.metadata {
                try Self.refuseNUL(m.key, field: "metadata key")
                try Self.refuseNUL(m.value, field: "metadata value")
                kind += Self.message(4, Self.entry(m))
            }
        case .response(let r):
            if !r.status.isOK {
                try Self.refuseNUL(r.status.message, field: "status message")
                let d = r.status.details
                if !d.isEmpty {
                    try Self.refuseNUL(d.reason ?? "", field: "reason")
                    try Self.refuseNUL(d.field ?? "", field: "field")
                    try Self.refuseNUL(d.limit ?? "", field: "limit")
                    details =
                        (d.attemptsRemaining.map { Self.message(1, Self.varintField(1, UInt64($0))) } ?? 0)
                        + Self.string(2, d.reason ?? "")
                        + (d.retryAfterMilliseconds.map { Self.message(3, Self.varintField(1, $0)) } ?? 0)
                        + Self.string(4, d.field ?? "") + Self.varintField(5, d.isAuthorityUnreachable ? 1 : 0)
                        + Self.string(6, d.limit ?? "")
                        + (d.retryAfter.flatMap { at in
                            at.unixMilliseconds >= 0 ? Self.message(7, Self.varintField(1, UInt64(at.unixMilliseconds))) : nil
                        } ?? 0)
                }
                status =
                    Self.varintField(1, UInt64(r.status.code)) + Self.string(2, r.status.message)
                    + (d.isEmpty ? 0 : Self.message(3, details))
                kind = Self.message(1, status)
            }
            kind += Self.bytes(2, r.payload.count)
        case .stream(let payload):
            kind = Self.bytes(1, payload.count)
        case .cancel:
            kind = 0
        }
        total = Self.varintField(1, e.requestID) + Self.message(2, kind)
    }

    static func entry(_ m: MetadataEntry) -> Int { string(1, m.key) + string(2, m.value) }

    static func varintLength(_ v: UInt64) -> Int { v == 0 ? 1 : (64 - v.leadingZeroBitCount + 6) / 7 }
    /// A scalar field: left out when zero.
    static func varintField(_ number: Int, _ v: UInt64) -> Int { v == 0 ? 0 : 1 + varintLength(v) }
    /// A set message field: written even when empty (every field number here is below 16: one tag byte).
    static func message(_ number: Int, _ length: Int) -> Int { 1 + varintLength(UInt64(length)) + length }
    static func bytes(_ number: Int, _ count: Int) -> Int { count == 0 ? 0 : message(number, count) }
    static func string(_ number: Int, _ s: String) -> Int { bytes(number, s.utf8.count) }

    static func refuseNUL(_ s: String, field: String) throws(RainError) {
        if ClientFrames.hasNUL(s) { throw RainError.invalid("\(field) contains a NUL character", field: field) }
    }
}

/// Protobuf wire types used by the envelope.
enum WireType: UInt8 {
    case varint = 0
    case lengthDelimited = 2
}

/// What puts the bytes of a frame: `ProtoWriter` (each write checked against its capacity) and
/// `PlainWriter` (unchecked, for frames measured and checked against the room first). The header,
/// varints, tags and the fields both write are written here, once.
protocol FrameByteWriter {
    mutating func byte(_ b: UInt8)
    mutating func copy(_ source: UnsafeBufferPointer<UInt8>)
}

extension FrameByteWriter {
    /// A frame header: the 4-byte big-endian length.
    mutating func frameHeader(length: Int) {
        let n = UInt32(truncatingIfNeeded: length)
        byte(UInt8(truncatingIfNeeded: n >> 24))
        byte(UInt8(truncatingIfNeeded: n >> 16))
        byte(UInt8(truncatingIfNeeded: n >> 8))
        byte(UInt8(truncatingIfNeeded: n))
    }

    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            byte(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        byte(UInt8(truncatingIfNeeded: v))
    }

    mutating func tag(_ number: Int, _ type: WireType) { byte(UInt8(truncatingIfNeeded: number << 3) | type.rawValue) }

    /// A varint field; nothing for 0 (proto3 leaves it out).
    mutating func varintField(_ number: Int, _ value: UInt64) {
        guard value != 0 else { return }
        tag(number, .varint)
        varint(value)
    }

    /// A bytes field; nothing when empty (proto3 leaves it out).
    mutating func bytesField(_ number: Int, _ value: UnsafeBufferPointer<UInt8>) {
        guard !value.isEmpty else { return }
        tag(number, .lengthDelimited)
        varint(UInt64(value.count))
        copy(value)
    }
}

/// Writes protobuf fields into a byte array of a size computed in advance. Every write is checked
/// against that size: a size computed wrong yields nil (and the caller protobuf-c's bytes), never a
/// write past the end.
struct ProtoWriter: FrameByteWriter {
    private let base: UnsafeMutablePointer<UInt8>
    private let capacity: Int
    private var count = 0
    private var isOverflowed = false

    private init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
        self.base = base
        self.capacity = capacity
    }

    /// The bytes `write` produces, which must be exactly `size`; nil otherwise.
    static func bytes(exactly size: Int, _ write: (inout ProtoWriter) -> Void) -> [UInt8]? {
        var isExact = false
        let out = [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            initialized = 0
            guard let base = buffer.baseAddress else {
                isExact = size == 0
                return
            }
            var w = ProtoWriter(base: base, capacity: size)
            write(&w)
            initialized = w.count
            isExact = !w.isOverflowed && w.count == size
        }
        return isExact ? out : nil
    }

    /// Writes at `base` what `write` produces, which must be exactly `size` bytes (the room there).
    static func write(at base: UnsafeMutablePointer<UInt8>, exactly size: Int, _ write: (inout ProtoWriter) -> Void) -> Bool {
        var w = ProtoWriter(base: base, capacity: size)
        write(&w)
        return !w.isOverflowed && w.count == size
    }

    mutating func byte(_ b: UInt8) {
        guard count < capacity else {
            isOverflowed = true
            return
        }
        base[count] = b
        count += 1
    }

    mutating func copy(_ source: UnsafeBufferPointer<UInt8>) {
        guard source.count <= capacity - count else {
            isOverflowed = true
            return
        }
        if let from = source.baseAddress { (base + count).update(from: from, count: source.count) }
        count += source.count
    }

    mutating func bytesField(_ number: Int, _ value: [UInt8]) {
        value.withUnsafeBufferPointer { bytesField(number, $0) }
    }

    mutating func stringField(_ number: Int, _ value: String) {
        var value = value
        guard !value.utf8.isEmpty else { return }
        tag(number, .lengthDelimited)
        varint(UInt64(value.utf8.count))
        value.withUTF8 { copy($0) }
    }

    /// A UInt32Value or UInt64Value message field.
    mutating func wrapperField(_ number: Int, _ value: UInt64) {
        tag(number, .lengthDelimited)
        varint(UInt64(EnvelopeSize.varintField(1, value)))
        varintField(1, value)
    }
}

/// Reads the canonical form of the envelope's messages; every method returns nil on anything else.
struct ProtoReader {
    private let buf: UnsafeBufferPointer<UInt8>
    private var at: Int
    private let end: Int

    init(_ buf: UnsafeBufferPointer<UInt8>) {
        self.buf = buf
        at = 0
        end = buf.count
    }

    private init(_ buf: UnsafeBufferPointer<UInt8>, from: Int, to: Int) {
        self.buf = buf
        at = from
        end = to
    }

    var isAtEnd: Bool { at >= end }

    mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while at < end {
            let b = buf[at]
            at += 1
            if shift == 63 && b > 1 { return nil }  // over 64 bits: protobuf-c's business
            value |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return value }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }

    /// The next field's number and wire type, numbers strictly above `after` (or equal to it
    /// when `repeats`), wire types the field must have.
    mutating func field(after previous: Int, repeats: Int = 0) -> (number: Int, type: UInt8)? {
        guard let key = varint(), key <= UInt64(Int32.max) else { return nil }
        let number = Int(key >> 3)
        guard number > previous || (number == previous && number == repeats) else { return nil }
        return (number, UInt8(truncatingIfNeeded: key & 7))
    }

    /// Wire types as `field` returns them, for the readers' cases.
    static let varintType = WireType.varint.rawValue
    static let delimitedType = WireType.lengthDelimited.rawValue

    /// Reads a message's fields in turn, numbers rising (a `repeats` field may run): `read` takes
    /// one field (its number and wire type) and returns false for anything it does not accept.
    /// - Returns: false when a field is refused or malformed.
    mutating func eachField(repeats: Int = 0, _ read: (inout ProtoReader, Int, UInt8) -> Bool) -> Bool {
        var last = 0
        while !isAtEnd {
            guard let (number, type) = field(after: last, repeats: repeats), read(&self, number, type) else { return false }
            last = number
        }
        return true
    }

    /// A length-delimited field's content, read by `read` as a message of its own.
    mutating func message<T>(_ read: (inout ProtoReader) -> T?) -> T? {
        guard var sub = nested() else { return nil }
        return read(&sub)
    }

    /// A length-delimited field's content as a reader of its own.
    mutating func nested() -> ProtoReader? {
        guard let n = varint(), n <= UInt64(end - at) else { return nil }
        let sub = ProtoReader(buf, from: at, to: at + Int(n))
        at += Int(n)
        return sub
    }

    mutating func bytes() -> [UInt8]? {
        bytesInPlace().map { Array($0) }
    }

    /// A bytes field's content where it lies (valid as long as the reader's buffer).
    mutating func bytesInPlace() -> UnsafeBufferPointer<UInt8>? {
        guard let n = varint(), n <= UInt64(end - at) else { return nil }
        let start = at
        at += Int(n)
        return UnsafeBufferPointer(rebasing: buf[start..<at])
    }

    mutating func string() -> String? {
        guard let n = varint(), n <= UInt64(end - at) else { return nil }
        let slice = UnsafeBufferPointer(rebasing: buf[at..<(at + Int(n))])
        at += Int(n)
        // ASCII without NUL (every method, profile and id): valid as it is, and decoded at once.
        var isASCII = true
        for b in slice {
            if b == 0 { return nil }
            if b >= 0x80 { isASCII = false }
        }
        guard isASCII else { return String(validating: slice, as: UTF8.self) }
        // A method name or the usual metadata is taken from the table: no validation, no copy.
        if let known = Self.knownString(slice) { return known }
        return String(decoding: slice, as: UTF8.self)
    }

    /// The device's method names and the usual metadata, read from every request.
    private static let knownStrings: [String] = [
        Method.sessionGetState, Method.accountGet, Method.walletGet, Method.daemonGetInfo, Method.sessionWatch,
        Method.sessionAwaitRestore,
        Method.sessionRefresh, Method.profileConfigure, profileMetadataKey, "default",
    ]

    private static func knownString(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard let base = bytes.baseAddress else { return nil }
        for known in knownStrings where known.utf8.count == bytes.count {
            var known = known
            if known.withUTF8({ utf8 in utf8.baseAddress.map { memcmp($0, base, bytes.count) == 0 } ?? false }) {
                return known
            }
        }
        return nil
    }

    mutating func uint32() -> UInt32? {
        guard let v = varint(), v <= UInt64(UInt32.max) else { return nil }
        return UInt32(v)
    }

    mutating func envelope() -> Envelope? {
        // Canonical: request_id (left out when 0), then exactly one kind, then nothing.
        guard var (number, type) = field(after: 0) else { return nil }
        var requestID: UInt64 = 0
        if number == 1 {
            guard type == WireType.varint.rawValue, let v = varint(), let next = field(after: 1) else { return nil }
            requestID = v
            (number, type) = next
        }
        guard type == WireType.lengthDelimited.rawValue, var sub = nested() else { return nil }
        let kind: Envelope.Kind
        switch number {
        case 2:
            guard let r = sub.request() else { return nil }
            kind = .request(r)
        case 3:
            guard let r = sub.response() else { return nil }
            kind = .response(r)
        case 4:
            guard let p = sub.stream() else { return nil }
            kind = .stream(payload: p)
        case 5:
            guard sub.isAtEnd else { return nil }
            kind = .cancel
        default:
            return nil
        }
        guard isAtEnd else { return nil }
        return Envelope(requestID: requestID, kind: kind)
    }

    private mutating func request() -> WireRequest? {
        var r = WireRequest(method: "", payload: [])
        // The first entry apart: the usual single `profile` entry then costs no array of its own.
        var first: MetadataEntry?
        var more: [MetadataEntry] = []
        let isRead = eachField(repeats: 4) { p, number, type in
            switch (number, type) {
            case (1, Self.delimitedType): p.string().map { r.method = $0 } != nil
            case (2, Self.delimitedType): p.bytes().map { r.payload = $0 } != nil
            case (3, Self.varintType): p.uint32().map { r.timeoutMilliseconds = $0 } != nil
            case (4, Self.delimitedType):
                p.message { $0.metadataEntry() }.map { m in if first == nil { first = m } else { more.append(m) } } != nil
            default: false
            }
        }
        guard isRead else { return nil }
        if let first {
            if !more.isEmpty {
                r.metadata = [first] + more
            } else if first == Self.defaultProfileEntry {
                r.metadata = Self.defaultProfileMetadata
            } else {
                r.metadata = [first]
            }
        }
        return r
    }

    private static let defaultProfileEntry = MetadataEntry(key: profileMetadataKey, value: "default")
    /// Shared by every request of the default profile (an array is copied on write only).
    private static let defaultProfileMetadata = [defaultProfileEntry]

    private mutating func metadataEntry() -> MetadataEntry? {
        var m = MetadataEntry(key: "", value: "")
        let isRead = eachField { p, number, type in
            switch (number, type) {
            case (1, Self.delimitedType): p.string().map { m.key = $0 } != nil
            case (2, Self.delimitedType): p.string().map { m.value = $0 } != nil
            default: false
            }
        }
        return isRead ? m : nil
    }

    private mutating func response() -> WireResponse? {
        var status = WireStatus.ok
        var payload: [UInt8] = []
        let isRead = eachField { p, number, type in
            switch (number, type) {
            // Code 0 is success whatever else the status carries (as the protobuf-c reader).
            case (1, Self.delimitedType): p.message { $0.status() }.map { status = $0.isOK ? .ok : $0 } != nil
            case (2, Self.delimitedType): p.bytes().map { payload = $0 } != nil
            default: false
            }
        }
        return isRead ? WireResponse(status: status, payload: payload) : nil
    }

    private mutating func status() -> WireStatus? {
        var s = WireStatus(code: 0, message: "")
        let isRead = eachField { p, number, type in
            switch (number, type) {
            case (1, Self.varintType): p.uint32().map { s.code = $0 } != nil
            case (2, Self.delimitedType): p.string().map { s.message = $0 } != nil
            case (3, Self.delimitedType): p.message { $0.details() }.map { s.details = $0 } != nil
            default: false
            }
        }
        return isRead ? s : nil
    }

    private mutating func details() -> RainError.Details? {
        var d = RainError.Details()
        let isRead = eachField { p, number, type in
            switch (number, type) {
            case (1, Self.delimitedType):
                p.message { $0.wrapped() }.flatMap { UInt32(exactly: $0) }.map { d.attemptsRemaining = $0 } != nil
            case (3, Self.delimitedType): p.message { $0.wrapped() }.map { d.retryAfterMilliseconds = $0 } != nil
            case (7, Self.delimitedType):
                p.message { $0.wrapped() }.map { v in
                    if v <= UInt64(Int64.max) { d.retryAfter = Date(unixMilliseconds: Int64(v)) }
                } != nil
            case (5, Self.varintType): p.varint().map { d.isAuthorityUnreachable = $0 != 0 } != nil
            case (2, Self.delimitedType): p.string().map { d.reason = $0.isEmpty ? nil : $0 } != nil
            case (4, Self.delimitedType): p.string().map { d.field = $0.isEmpty ? nil : $0 } != nil
            case (6, Self.delimitedType): p.string().map { d.limit = $0.isEmpty ? nil : $0 } != nil
            default: false
            }
        }
        return isRead ? d : nil
    }

    /// A UInt32Value / UInt64Value message's value.
    private mutating func wrapped() -> UInt64? {
        var value: UInt64 = 0
        let isRead = eachField { p, number, type in
            (number, type) == (1, Self.varintType) && p.varint().map { value = $0 } != nil
        }
        return isRead ? value : nil
    }

    private mutating func stream() -> [UInt8]? {
        var payload: [UInt8] = []
        let isRead = eachField { p, number, type in
            (number, type) == (1, Self.delimitedType) && p.bytes().map { payload = $0 } != nil
        }
        return isRead ? payload : nil
    }
}
