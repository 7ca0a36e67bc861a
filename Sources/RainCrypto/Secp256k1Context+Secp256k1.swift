internal import CSecp256k1
import RainCore

// @unchecked Sendable: the context is randomized once, in `init`, and never modified afterwards;
// libsecp256k1 lets any number of threads use one context at once in the calls that take it as
// `const` (signing, public keys, tweaks, recovery), which are the only calls made with it.
/// The process's one libsecp256k1 context (`secp256k1_context_create(SECP256K1_CONTEXT_NONE)`),
/// randomized once with 32 bytes from ``SecureRandom`` as libsecp256k1 advises, which blinds its
/// signing and public-key computations against side channels.
final class Secp256k1Context: @unchecked Sendable {
    let pointer: OpaquePointer

    /// The context, made on first use; its failure, if it failed, is kept and thrown by every use.
    private static let made = Result { () throws(RainError) in try Secp256k1Context() }

    /// The process's context.
    /// - Throws: RAIN_502 when it could not be made or randomized.
    static var shared: Secp256k1Context {
        get throws(RainError) { try made.get() }
    }

    private init() throws(RainError) {
        guard let pointer = secp256k1_context_create(UInt32(SECP256K1_CONTEXT_NONE)) else {
            throw RainError(.internalError, "secp256k1_context_create failed")
        }
        self.pointer = pointer
        let seed = try SymmetricKey.random(byteCount: 32)
        let randomized = seed.withUnsafeBytes { bytes in
            secp256k1_context_randomize(pointer, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self))
        }
        guard randomized == 1 else { throw RainError(.internalError, "secp256k1_context_randomize failed") }
    }

    deinit { secp256k1_context_destroy(pointer) }
}
