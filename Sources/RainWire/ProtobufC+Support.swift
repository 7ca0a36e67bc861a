internal import CProtobufC
import FoundationEssentials
import Glibc
import RainCore

/// Owns every C allocation made while building a message to pack; frees them all on deinit.
/// Lives only for the duration of one `encode()`.
final class CArena {
    private var frees: [() -> Void] = []

    deinit {
        for f in frees { f() }
    }

    /// A C string copy. protobuf-c cuts strings at NUL, so an embedded NUL is refused.
    func string(_ s: String, field: String) throws(RainError) -> UnsafeMutablePointer<CChar> {
        let utf8 = Array(s.utf8)
        if utf8.contains(0) {
            throw RainError.invalid("\(field) contains a NUL character", field: field)
        }
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count + 1)
        utf8.withUnsafeBufferPointer { src in
            for i in 0..<src.count { p[i] = CChar(bitPattern: src[i]) }
        }
        p[utf8.count] = 0
        frees.append { p.deallocate() }
        return p
    }

    /// A binary field pointing at a copy of `bytes`.
    func bytes(_ bytes: [UInt8]) -> ProtobufCBinaryData {
        var data = ProtobufCBinaryData()
        data.len = bytes.count
        guard !bytes.isEmpty else {
            data.data = nil
            return data
        }
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: bytes.count)
        p.initialize(from: bytes, count: bytes.count)
        frees.append { p.deallocate() }
        data.data = p
        return data
    }

    /// A heap copy of a C struct (for submessage pointers).
    func box<T>(_ value: T) -> UnsafeMutablePointer<T> {
        let p = UnsafeMutablePointer<T>.allocate(capacity: 1)
        p.initialize(to: value)
        frees.append {
            p.deinitialize(count: 1)
            p.deallocate()
        }
        return p
    }

    /// A C array of pointers (for repeated fields).
    func array<T>(_ values: [T]) -> UnsafeMutablePointer<T>? {
        guard !values.isEmpty else { return nil }
        let p = UnsafeMutablePointer<T>.allocate(capacity: values.count)
        p.initialize(from: values, count: values.count)
        frees.append {
            p.deinitialize(count: values.count)
            p.deallocate()
        }
        return p
    }
}

/// A fresh C message, set up (descriptor and defaults) by its generated `__init` function.
@inline(__always)
func cMessage<T>(_ initialize: (UnsafeMutablePointer<T>) -> Void) -> T {
    // On the stack: a message is made for every encode and decode, and a heap block each time
    // showed in the daemon's per-call instruction count.
    withUnsafeTemporaryAllocation(of: T.self, capacity: 1) { buffer in
        guard let p = buffer.baseAddress else {  // never for a capacity of 1; the heap then
            let heap = UnsafeMutablePointer<T>.allocate(capacity: 1)
            defer { heap.deallocate() }
            initialize(heap)
            return heap.move()
        }
        initialize(p)
        return p.move()
    }
}

/// The `ProtobufCMessage` base every generated message struct starts with.
@inline(__always)
private func cBase<T>(_ p: UnsafePointer<T>) -> UnsafePointer<ProtobufCMessage> {
    UnsafeRawPointer(p).assumingMemoryBound(to: ProtobufCMessage.self)
}

/// Packs a C message made by ``cMessage(_:)`` (its base carries the descriptor).
@inline(__always)
func packMessage<T>(_ message: inout T) -> [UInt8] {
    withUnsafePointer(to: &message) { p -> [UInt8] in
        let base = cBase(p)
        let n = protobuf_c_message_get_packed_size(base)
        guard n > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: n) { buf, count in
            guard let out = buf.baseAddress else {
                count = 0
                return
            }
            count = protobuf_c_message_pack(base, out)
        }
    }
}

/// Unpacks bytes as the C message `initialize` sets up (its generated `__init`), reads it with
/// `read` and frees it.
@inline(__always)
func unpackMessage<T, R>(
    _ bytes: [UInt8], name: String, _ initialize: (UnsafeMutablePointer<T>) -> Void,
    read: (UnsafeMutablePointer<T>) throws(RainError) -> R
) throws(RainError) -> R {
    var empty = cMessage(initialize)
    // No bytes are the message's defaults, which `initialize` set (what protobuf-c would return,
    // without its allocation and walk: most requests of the per-call path are empty).
    if bytes.isEmpty { return try read(&empty) }
    let descriptor = withUnsafePointer(to: &empty) { cBase($0).pointee.descriptor }
    let message: UnsafeMutablePointer<ProtobufCMessage>? = bytes.withUnsafeBufferPointer { buf in
        // protobuf-c never dereferences data when len is 0, but give it a valid pointer anyway.
        if let base = buf.baseAddress { return protobuf_c_message_unpack(descriptor, nil, buf.count, base) }
        var zero: UInt8 = 0
        return withUnsafePointer(to: &zero) { protobuf_c_message_unpack(descriptor, nil, 0, $0) }
    }
    guard let descriptor, let message else {
        throw RainError(
            .invalidArgument, "undecodable \(name): the bytes are not a valid protobuf \(name)",
            details: .init(reason: "undecodable_payload"))
    }
    defer { protobuf_c_message_free_unpacked(message, nil) }
    // protobuf-c hands strings back as C strings, which end at the first NUL: "a@b.co\0@x.example"
    // would silently read as "a@b.co". Refuse any string field that carries a NUL, from the wire bytes.
    try bytes.withUnsafeBufferPointer { (buf) throws(RainError) in
        try refuseNULInStrings(buf, descriptor: descriptor, name: name, depth: 0)
    }
    return try read(UnsafeMutableRawPointer(message).assumingMemoryBound(to: T.self))
}

/// Walks protobuf wire bytes (already accepted by protobuf-c) and refuses a string field, at any
/// depth, whose bytes contain NUL.
private func refuseNULInStrings(
    _ bytes: UnsafeBufferPointer<UInt8>, descriptor: UnsafePointer<ProtobufCMessageDescriptor>, name: String, depth: Int
) throws(RainError) {
    guard depth < 32 else { return }
    var i = 0
    func varint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while i < bytes.count && shift < 64 {
            let b = bytes[i]
            i += 1
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
        }
        return nil
    }
    while i < bytes.count {
        guard let key = varint() else { return }
        switch key & 7 {
        case 0: guard varint() != nil else { return }
        case 1: i += 8
        case 5: i += 4
        case 2:
            guard let length = varint(), length <= UInt64(bytes.count - i) else { return }
            let start = i
            i += Int(length)
            guard let field = protobuf_c_message_descriptor_get_field(descriptor, UInt32(truncatingIfNeeded: key >> 3)) else {
                continue
            }
            let slice = UnsafeBufferPointer(rebasing: bytes[start..<i])
            if field.pointee.type == PROTOBUF_C_TYPE_STRING, slice.contains(0) {
                let fieldName = field.pointee.name.map { String(cString: $0) } ?? "string"
                throw RainError(
                    .invalidArgument, "\(name).\(fieldName) contains a NUL character",
                    details: .init(reason: "nul_in_string", field: fieldName))
            }
            if field.pointee.type == PROTOBUF_C_TYPE_MESSAGE, let sub = field.pointee.descriptor {
                try refuseNULInStrings(
                    slice, descriptor: sub.assumingMemoryBound(to: ProtobufCMessageDescriptor.self), name: name, depth: depth + 1)
            }
        default:
            return
        }
    }
}

/// Reads a protobuf-c string field (nil pointer reads as empty). Invalid UTF-8 is refused.
func readString(_ p: UnsafeMutablePointer<CChar>?, field: String) throws(RainError) -> String {
    guard let p else { return "" }
    guard let s = String(validatingCString: p) else {
        throw RainError(
            .invalidArgument, "\(field) is not valid UTF-8", details: .init(reason: "invalid_utf8", field: field))
    }
    return s
}

/// Copies a protobuf-c bytes field.
func readBytes(_ b: ProtobufCBinaryData) -> [UInt8] {
    guard b.len > 0, let data = b.data else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: b.len))
}

/// Reads a protobuf-c repeated field: `count` elements at `list` (nil reads as empty). An element
/// `read` maps to nil (an absent submessage) is skipped.
@inline(__always)
func readList<E, R>(
    _ list: UnsafeMutablePointer<E>?, count: Int, _ read: (E) throws(RainError) -> R?
) throws(RainError) -> [R] {
    guard let list else { return [] }
    var values: [R] = []
    for i in 0..<count {
        if let value = try read(list[i]) { values.append(value) }
    }
    return values
}

/// Reads a protobuf-c repeated string field.
func readStrings(
    _ list: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, count: Int, field: String
) throws(RainError) -> [String] {
    try readList(list, count: count) { (p) throws(RainError) in try readString(p, field: field) }
}

extension CArena {
    /// A repeated field: one element per value, made by `make`; the count and the C array.
    @inline(__always)
    func list<V, E>(
        _ values: [V], _ make: (V) throws(RainError) -> E?
    ) throws(RainError) -> (count: Int, array: UnsafeMutablePointer<E?>?) {
        var elements: [E?] = []
        for value in values { elements.append(try make(value)) }
        return (elements.count, array(elements))
    }

    /// A repeated string field: the count and the C array of C strings.
    func strings(
        _ values: [String], field: String
    ) throws(RainError) -> (count: Int, array: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) {
        try list(values) { (s) throws(RainError) in try string(s, field: field) }
    }
}

/// Reads a protobuf-c submessage field (nil reads as nil) with `read`, a generated `init(c:)`.
@inline(__always)
func readMessage<C, R>(
    _ p: UnsafeMutablePointer<C>?, _ read: (UnsafeMutablePointer<C>) throws(RainError) -> R
) throws(RainError) -> R? {
    guard let p else { return nil }
    return try read(p)
}

/// Reads a protobuf-c repeated submessage field with `read`, a generated `init(c:)`; an absent
/// element is skipped.
@inline(__always)
func readMessages<C, R>(
    _ list: UnsafeMutablePointer<UnsafeMutablePointer<C>?>?, count: Int, _ read: (UnsafeMutablePointer<C>) throws(RainError) -> R
) throws(RainError) -> [R] {
    try readList(list, count: count) { (p) throws(RainError) in try readMessage(p, read) }
}

/// A field the proto marks required (its comment starts with "Required"): absent, or of a kind this
/// build does not know, the message does not decode.
/// - Throws: RAIN_102 naming `field`.
@inline(__always)
func required<T>(_ value: T?, field: String) throws(RainError) -> T {
    guard let value else { throw RainError.invalid("the message has no \(field)", field: field) }
    return value
}
