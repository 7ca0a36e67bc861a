import RainCore

/// Framing: a 4-byte big-endian length N, then N bytes of one protobuf `Envelope`.
public enum Frame {
    /// The default maximum frame length N (1 MiB).
    public static let defaultMaximumLength = 1 << 20
    /// Length of the frame header.
    public static let headerLength = 4

    /// Prefixes `body` with its length.
    public static func encode(_ body: [UInt8]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(body.count + headerLength)
        appendHeader(length: body.count, to: &out)
        out.append(contentsOf: body)
        return out
    }

    /// Appends a big-endian length header.
    public static func appendHeader(length: Int, to out: inout [UInt8]) {
        let n = UInt32(truncatingIfNeeded: length)
        out.append(UInt8(truncatingIfNeeded: n >> 24))
        out.append(UInt8(truncatingIfNeeded: n >> 16))
        out.append(UInt8(truncatingIfNeeded: n >> 8))
        out.append(UInt8(truncatingIfNeeded: n))
    }
}

/// Splits a byte stream into frame bodies. The declared length is checked against the maximum
/// before any of the body is buffered, so a hostile length costs nothing.
public struct FrameDecoder: Sendable {
    /// The largest body accepted.
    public let maximumLength: Int
    private var buffer: [UInt8] = []
    private var readIndex = 0

    /// Creates a decoder that refuses frames longer than `maximumLength`.
    public init(maximumLength: Int = Frame.defaultMaximumLength) {
        self.maximumLength = maximumLength
    }

    /// Bytes received but not yet returned as frames.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    /// Adds received bytes.
    ///
    /// - Throws: RAIN_102 (reason `frame_too_large`) as soon as a header declares more than the
    ///   maximum; the stream cannot be trusted afterwards.
    public mutating func append(_ bytes: some Collection<UInt8>) throws(RainError) {
        buffer.append(contentsOf: bytes)
        try checkPendingHeader()
    }

    /// Adds received bytes from raw memory.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) throws(RainError) {
        buffer.append(contentsOf: bytes)
        try checkPendingHeader()
    }

    private func checkPendingHeader() throws(RainError) {
        guard bufferedByteCount >= Frame.headerLength else { return }
        let n = declaredLength(at: readIndex)
        if n > maximumLength {
            throw RainError(
                .invalidArgument, "frame of \(n) bytes exceeds the maximum of \(maximumLength) bytes",
                details: .init(reason: "frame_too_large"))
        }
    }

    private func declaredLength(at i: Int) -> Int {
        Int(buffer[i]) << 24 | Int(buffer[i + 1]) << 16 | Int(buffer[i + 2]) << 8 | Int(buffer[i + 3])
    }

    /// The next complete frame body, or nil when more bytes are needed.
    /// - Throws: RAIN_102 when the next header declares more than the maximum.
    public mutating func nextFrame() throws(RainError) -> [UInt8]? {
        try withNextFrame { Array($0) }
    }

    /// Lends the next complete frame body to `read` in place (no copy: the per-call path); nil
    /// when more bytes are needed.
    /// - Throws: RAIN_102 when the next header declares more than the maximum.
    public mutating func withNextFrame<R>(_ read: (UnsafeBufferPointer<UInt8>) -> R) throws(RainError) -> R? {
        guard bufferedByteCount >= Frame.headerLength else {
            compact()
            return nil
        }
        let n = declaredLength(at: readIndex)
        if n > maximumLength {
            throw RainError(
                .invalidArgument, "frame of \(n) bytes exceeds the maximum of \(maximumLength) bytes",
                details: .init(reason: "frame_too_large"))
        }
        guard bufferedByteCount >= Frame.headerLength + n else {
            compact()
            return nil
        }
        let start = readIndex + Frame.headerLength
        let result = buffer.withUnsafeBufferPointer { read(UnsafeBufferPointer(rebasing: $0[start..<start + n])) }
        readIndex = start + n
        if readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 64 * 1024)
            readIndex = 0
        }
        return result
    }

    private mutating func compact() {
        if readIndex > 0 {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
    }
}
