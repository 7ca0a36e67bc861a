import RainCore

/// Runs `body` with `byteCount` bytes of zero-filled scratch memory for secrets (key material,
/// HMAC outputs), which is zeroed (`OPENSSL_cleanse`) and freed when `body` returns or throws.
/// The pointer must not escape the closure.
func withSecretScratch<R>(
    byteCount: Int, _ body: (UnsafeMutableRawBufferPointer) throws(RainError) -> R
) throws(RainError) -> R {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(byteCount, 1), alignment: 16)
    buffer.initializeMemory(as: UInt8.self, repeating: 0)
    defer {
        SecureMemory.cleanse(buffer)
        buffer.deallocate()
    }
    return try body(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<byteCount]))
}

extension SymmetricKey {
    /// `withUnsafeBytes` for a body that throws `RainError` (the `rethrows` original widens it to
    /// `any Error`). The pointer must not escape the closure.
    func withSecretBytes<R>(_ body: (UnsafeRawBufferPointer) throws(RainError) -> R) throws(RainError) -> R {
        try withUnsafeBytes { bytes in Result { () throws(RainError) in try body(bytes) } }.get()
    }

    /// A new key holding a copy of `bytes`, which never pass through an ordinary array.
    static func copying(_ bytes: UnsafeRawBufferPointer) throws(RainError) -> SymmetricKey {
        try SymmetricKey(byteCount: bytes.count) { (output) throws(RainError) in
            if bytes.count > 0 { output.copyMemory(from: bytes) }
        }
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body that throws `RainError` (the `rethrows` original widens it to
    /// `any Error`). The pointer must not escape the closure.
    func withTypedUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws(RainError) -> R) throws(RainError) -> R {
        try withUnsafeBytes { bytes in Result { () throws(RainError) in try body(bytes) } }.get()
    }
}
