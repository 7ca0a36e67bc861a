import RainCore

// @unchecked Sendable: the storage is written only during `init`, never mutated afterwards, and
// freed only in `deinit`, when no other reference can exist; concurrent reads are safe.
/// Secret key bytes held in memory that is zeroed (`OPENSSL_cleanse`) when the key is released.
///
/// The bytes never change after creation. A key prints as `<redacted>` with its ``keyID``.
public final class SymmetricKey: @unchecked Sendable {
    private let storage: UnsafeMutableRawBufferPointer

    /// Creates a key holding a copy of `bytes`.
    ///
    /// The caller's array is not zeroed; prefer ``random(byteCount:)``, ``KeyFile`` or
    /// ``HKDFSHA256`` so that the key bytes never live in an ordinary array.
    /// - Parameter bytes: the key material; may be of any length.
    public init(bytes: [UInt8]) {
        storage = Self.allocate(byteCount: bytes.count)
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress, source.count > 0 {
                storage.copyMemory(from: UnsafeRawBufferPointer(start: base, count: source.count))
            }
        }
    }

    /// Creates a key of `byteCount` bytes that `initializer` writes in place, so the bytes never
    /// pass through an unzeroed buffer (a key unsealed by a TPM, for example). On a throw the memory
    /// is zeroed and freed. The pointer must not escape `initializer`.
    package init(
        byteCount: Int, initializingWith initializer: (UnsafeMutableRawBufferPointer) throws(RainError) -> Void
    ) throws(RainError) {
        let buffer = Self.allocate(byteCount: byteCount)
        do {
            try initializer(buffer)
        } catch {
            SecureMemory.cleanse(buffer)
            buffer.deallocate()
            throw error
        }
        storage = buffer
    }

    deinit {
        SecureMemory.cleanse(storage)
        storage.deallocate()
    }

    private static func allocate(byteCount: Int) -> UnsafeMutableRawBufferPointer {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(byteCount, 0), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        return buffer
    }

    /// A new key of `byteCount` bytes from the operating system's CSPRNG (`RAND_bytes`).
    /// - Parameter byteCount: the key length in bytes; 32 for AES-256-GCM and HMAC-SHA256.
    /// - Throws: RAIN_102 when `byteCount` is not positive; RAIN_502 when the generator fails.
    public static func random(byteCount: Int = 32) throws(RainError) -> SymmetricKey {
        guard byteCount > 0 else {
            throw RainError.invalid("key length must be positive", field: "byteCount")
        }
        return try SymmetricKey(byteCount: byteCount) { (buffer) throws(RainError) in
            try SecureRandom.fill(buffer)
        }
    }

    /// The key length in bytes.
    public var byteCount: Int { storage.count }

    /// Calls `body` with the key bytes. The pointer must not escape the closure.
    /// - Parameter body: reads the bytes.
    /// - Returns: what `body` returns.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(storage))
    }

    /// Identifies the key without revealing it: the first 8 bytes of SHA-256 of the key bytes, as
    /// 16 lowercase hex digits. Safe to log and to store next to data the key protects.
    public var keyID: String {
        let digest = SHA256.hash(UnsafeRawBufferPointer(storage))
        return Hex.encode(Array(digest.prefix(8)))
    }
}

extension SymmetricKey: CustomStringConvertible, CustomDebugStringConvertible {
    /// `SymmetricKey(<redacted>, 32 bytes, keyID …)`: never the key bytes.
    public var description: String { "SymmetricKey(<redacted>, \(byteCount) bytes, keyID \(keyID))" }

    /// Same as ``description``.
    public var debugDescription: String { description }
}
