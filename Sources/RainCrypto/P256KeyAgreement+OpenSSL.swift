internal import COpenSSL
import RainCore

extension P256PrivateKey {
    /// The ECDH shared secret with a peer's public key: the x coordinate of `d·Q` (SEC 1 §3.3.1),
    /// as CTAP2's PIN/UV auth protocols and most key agreements use it before a KDF.
    ///
    /// The result is raw ECDH output, not a key: derive keys from it (``HKDFSHA256``).
    /// - Parameter peer: the other party's public key (on P-256, checked when it was made).
    /// - Returns: the 32-byte shared secret, in zeroing memory.
    /// - Throws: RAIN_502 when OpenSSL fails.
    public func sharedSecret(with peer: P256PublicKey) throws(RainError) -> SymmetricKey {
        let context = try EVPKeyContext(key: key)
        guard EVP_PKEY_derive_init(context.pointer) == 1 else { throw RainError.openSSL("EVP_PKEY_derive_init(ECDH)") }
        guard EVP_PKEY_derive_set_peer(context.pointer, peer.key.pointer) == 1 else {
            throw RainError.openSSL("EVP_PKEY_derive_set_peer(ECDH)")
        }
        let byteCount = P256PublicKey.coordinateByteCount
        return try SymmetricKey(byteCount: byteCount) { (buffer) throws(RainError) in
            var length = buffer.count
            guard let base = buffer.baseAddress,
                EVP_PKEY_derive(context.pointer, base.assumingMemoryBound(to: UInt8.self), &length) == 1,
                length == byteCount
            else { throw RainError.openSSL("EVP_PKEY_derive(ECDH)") }
        }
    }
}
