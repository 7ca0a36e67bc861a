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
        try Self.check(length: declaredLength(at: readIndex), maximum: maximumLength)
    }

    private static func check(length n: Int, maximum: Int) throws(RainError) {
        if n > maximum {
            throw RainError(
                .invalidArgument, "frame of \(n) bytes exceeds the maximum of \(maximum) bytes",
                details: .init(reason: "frame_too_large"))
        }
    }

    /// Lends the complete frames at the start of `bytes` to `each` in turn, in place, until one is
    /// incomplete or `each` returns false; returns how many bytes they took. For input that arrives
    /// while no partial frame is held (the usual case: a whole request per read), so that it is not
    /// copied into a decoder first; what is left goes to `append`.
    /// - Throws: RAIN_102 (reason `frame_too_large`) at a header declaring more than `maximumLength`.
    public static func completeFrames(
        in bytes: UnsafeRawBufferPointer, maximumLength: Int, _ each: (UnsafeBufferPointer<UInt8>) -> Bool
    ) throws(RainError) -> Int {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return 0 }
        var at = 0
        while bytes.count - at >= Frame.headerLength {
            let n = Int(base[at]) << 24 | Int(base[at + 1]) << 16 | Int(base[at + 2]) << 8 | Int(base[at + 3])
            try check(length: n, maximum: maximumLength)
            guard bytes.count - at - Frame.headerLength >= n else { break }
            let body = UnsafeBufferPointer(start: base + at + Frame.headerLength, count: n)
            at += Frame.headerLength + n
            guard each(body) else { break }
        }
        return at
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
        try Self.check(length: n, maximum: maximumLength)
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
