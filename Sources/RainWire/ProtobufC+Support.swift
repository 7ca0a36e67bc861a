internal import CProtobufC
import Foundation
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

/// Packs a C message with its typed size and pack functions.
func packMessage<T>(
    _ message: inout T, size: (UnsafePointer<T>) -> Int, pack: (UnsafePointer<T>, UnsafeMutablePointer<UInt8>) -> Int
) -> [UInt8] {
    withUnsafePointer(to: &message) { p -> [UInt8] in
        let n = size(p)
        guard n > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: n) { buf, count in
            guard let base = buf.baseAddress else {
                count = 0
                return
            }
            count = pack(p, base)
        }
    }
}

/// Unpacks bytes with a typed unpack function, reads the C message with `read` and frees it.
func unpackMessage<T, R>(
    _ bytes: [UInt8], name: String,
    unpack: (UnsafeMutablePointer<ProtobufCAllocator>?, Int, UnsafePointer<UInt8>?) -> UnsafeMutablePointer<T>?,
    free: (UnsafeMutablePointer<T>?, UnsafeMutablePointer<ProtobufCAllocator>?) -> Void,
    read: (UnsafeMutablePointer<T>) throws(RainError) -> R
) throws(RainError) -> R {
    let message: UnsafeMutablePointer<T>? = bytes.withUnsafeBufferPointer { buf in
        // protobuf-c never dereferences data when len is 0, but give it a valid pointer anyway.
        if let base = buf.baseAddress { return unpack(nil, buf.count, base) }
        var zero: UInt8 = 0
        return withUnsafePointer(to: &zero) { unpack(nil, 0, $0) }
    }
    guard let message else {
        throw RainError(
            .invalidArgument, "undecodable \(name): the bytes are not a valid protobuf \(name)",
            details: .init(reason: "undecodable_payload"))
    }
    defer { free(message, nil) }
    return try read(message)
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
