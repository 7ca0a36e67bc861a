import RainCore
import RainCrypto

/// A device key held by a TPM: ECDSA P-256, generated inside the TPM and never exported. Each
/// signature loads the key from its blob (a connection, the primary key, a load, a sign, flushes):
/// tens of milliseconds on a hardware TPM, so sign once per connection, not per call.
public struct TPM2DeviceSigner: DeviceSigner {
    /// The key's public half, read from the TPM's public area of the key.
    public let publicKey: DevicePublicKey
    /// The TCTI of the TPM that holds the key.
    let tcti: String
    /// The key's blob (marshalled public and private parts) and the file it came from.
    let blob: [UInt8]
    let path: String

    init(tcti: String, blob object: TPM2ObjectBlob, marshalled: [UInt8], path: String) throws(RainError) {
        let point = try object.signingPoint(path: path)
        do throws(RainError) {
            publicKey = .p256(try P256PublicKey(x963Representation: point))
        } catch {
            throw TPM2BlobFile.malformed(path, "its public key is not a point on P-256")
        }
        self.tcti = tcti
        self.blob = marshalled
        self.path = path
    }

    /// Hashes `message` with SHA-256 here and has the TPM sign the digest.
    /// - Returns: the DER signature (`SEQUENCE { r INTEGER, s INTEGER }`).
    /// - Throws: RAIN_501 (`tpm_unavailable`, `tpm_key_lost`, `tpm_error`) when the TPM cannot
    ///   sign now.
    public func sign(_ message: [UInt8]) throws(RainError) -> [UInt8] {
        let digest = SHA256.hash(message)
        let object = try TPM2ObjectBlob(marshalled: blob, path: path)
        let (r, s) = try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) -> (r: [UInt8], s: [UInt8]) in
            try tpm.sign(digest: digest, with: object, path: path)
        }
        guard !r.isEmpty, !s.isEmpty, r.count <= 32, s.count <= 32 else {
            throw RainError(
                .provider, "the TPM at \(tcti) returned an ECDSA signature that is not P-256 sized",
                details: RainError.Details(reason: "tpm_error"))
        }
        return Self.derSignature(r: r, s: s)
    }

    /// The DER form of an ECDSA signature: `SEQUENCE { INTEGER r, INTEGER s }`, each integer
    /// minimal and positive.
    package static func derSignature(r: [UInt8], s: [UInt8]) -> [UInt8] {
        func integer(_ bytes: [UInt8]) -> [UInt8] {
            var value = Array(bytes.drop(while: { $0 == 0 }))
            if value.isEmpty || value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(r) + integer(s)
        return [0x30, UInt8(body.count)] + body
    }
}
