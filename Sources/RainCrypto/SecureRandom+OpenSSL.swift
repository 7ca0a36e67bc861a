internal import COpenSSL
import RainCore

extension SecureRandom {
    /// `count` bytes from OpenSSL's CSPRNG (`RAND_bytes`), seeded by the operating system.
    /// - Parameter count: how many bytes; zero gives an empty array.
    /// - Throws: RAIN_102 when `count` is negative; RAIN_502 when the generator fails.
    public static func bytes(count: Int) throws(RainError) -> [UInt8] {
        guard count >= 0 else {
            throw RainError.invalid("random byte count must not be negative", field: "count")
        }
        var output = [UInt8](repeating: 0, count: count)
        let result = output.withUnsafeMutableBytes { buffer in
            Result { () throws(RainError) in try fill(buffer) }
        }
        try result.get()
        return output
    }

    /// Fills `buffer` from `RAND_bytes`, in chunks that fit its `int` length.
    /// - Throws: RAIN_502 when the generator fails.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(RainError) {
        guard let base = buffer.baseAddress else { return }
        var offset = 0
        while offset < buffer.count {
            let chunk = min(buffer.count - offset, 1 << 30)
            let pointer = (base + offset).assumingMemoryBound(to: UInt8.self)
            guard RAND_bytes(pointer, Int32(chunk)) == 1 else {
                throw RainError.openSSL("RAND_bytes")
            }
            offset += chunk
        }
    }
}
