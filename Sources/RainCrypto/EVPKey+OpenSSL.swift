internal import COpenSSL
import RainCore

// @unchecked Sendable: the key is never modified after creation, and OpenSSL allows one EVP_PKEY
// to be used by several threads at once for signing and verifying (each operation gets its own
// EVP_MD_CTX).
/// Owns an `EVP_PKEY`.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes ownership of `pointer`, which `deinit` frees.
    init(takingOwnership pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { EVP_PKEY_free(pointer) }
}

/// Owns an `EVP_MD_CTX` for one signing or verification.
final class DigestContext {
    let pointer: OpaquePointer

    init() throws(RainError) {
        guard let pointer = EVP_MD_CTX_new() else { throw RainError.openSSL("EVP_MD_CTX_new") }
        self.pointer = pointer
    }

    deinit { EVP_MD_CTX_free(pointer) }
}
