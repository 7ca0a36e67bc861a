import Glibc
internal import CTSS2
import RainCore
import RainCrypto

/// TPM 2.0 constants from the TPM 2.0 Library, Part 2 (Structures). tpm2-tss declares them as
/// macros with casts, which Swift does not import.
enum TPM2Constant {
    static let algSHA256: TPM2_ALG_ID = 0x000B
    static let algAES: TPM2_ALG_ID = 0x0006
    static let algKeyedHash: TPM2_ALG_ID = 0x0008
    static let algNull: TPM2_ALG_ID = 0x0010
    static let algECDSA: TPM2_ALG_ID = 0x0018
    static let algECC: TPM2_ALG_ID = 0x0023
    static let algCFB: TPM2_ALG_ID = 0x0043
    static let eccNISTP256: TPM2_ECC_CURVE = 0x0003
    static let stHashcheck: TPM2_ST = 0x8024
    static let rhNull: TPM2_RH = 0x4000_0007

    static let fixedTPM: TPMA_OBJECT = 0x0000_0002
    static let fixedParent: TPMA_OBJECT = 0x0000_0010
    static let sensitiveDataOrigin: TPMA_OBJECT = 0x0000_0020
    static let userWithAuth: TPMA_OBJECT = 0x0000_0040
    static let noDA: TPMA_OBJECT = 0x0000_0400
    static let restricted: TPMA_OBJECT = 0x0001_0000
    static let decrypt: TPMA_OBJECT = 0x0002_0000
    static let sign: TPMA_OBJECT = 0x0004_0000

    static let sessionHMAC: TPM2_SE = 0x00
    static let sessionContinue: TPMA_SESSION = 0x01
    static let sessionDecrypt: TPMA_SESSION = 0x20
    static let sessionEncrypt: TPMA_SESSION = 0x40
}

/// A TPM object outside the TPM: its public area and its private area, which only the TPM that
/// created it (under the same primary key) can decrypt and load.
struct TPM2ObjectBlob {
    var publicPart: TPM2B_PUBLIC
    var privatePart: TPM2B_PRIVATE

    init(publicPart: TPM2B_PUBLIC, privatePart: TPM2B_PRIVATE) {
        self.publicPart = publicPart
        self.privatePart = privatePart
    }

    /// Reads the marshalled form (`TPM2B_PUBLIC` then `TPM2B_PRIVATE`, as `marshalled` writes them).
    /// - Throws: RAIN_102 `tpm_blob_malformed` naming `path` when the bytes are not exactly that.
    init(marshalled bytes: [UInt8], path: String) throws(RainError) {
        var publicPart = TPM2B_PUBLIC()
        var privatePart = TPM2B_PRIVATE()
        var offset = 0
        let rc = bytes.withUnsafeBufferPointer { buffer -> TSS2_RC in
            let rc = Tss2_MU_TPM2B_PUBLIC_Unmarshal(buffer.baseAddress, buffer.count, &offset, &publicPart)
            guard rc == TSS2_RC_SUCCESS else { return rc }
            return Tss2_MU_TPM2B_PRIVATE_Unmarshal(buffer.baseAddress, buffer.count, &offset, &privatePart)
        }
        guard rc == TSS2_RC_SUCCESS, offset == bytes.count else {
            throw TPM2BlobFile.malformed(path, "its TPM object does not decode (\(TPM2Failure.decode(rc)))")
        }
        self.init(publicPart: publicPart, privatePart: privatePart)
    }

    /// `TPM2B_PUBLIC` then `TPM2B_PRIVATE`, marshalled (the TPM's own wire form).
    func marshalled() throws(RainError) -> [UInt8] {
        var publicPart = publicPart
        var privatePart = privatePart
        var output = [UInt8](repeating: 0, count: MemoryLayout<TPM2B_PUBLIC>.size + MemoryLayout<TPM2B_PRIVATE>.size)
        var offset = 0
        let rc = output.withUnsafeMutableBufferPointer { buffer -> TSS2_RC in
            let rc = Tss2_MU_TPM2B_PUBLIC_Marshal(&publicPart, buffer.baseAddress, buffer.count, &offset)
            guard rc == TSS2_RC_SUCCESS else { return rc }
            return Tss2_MU_TPM2B_PRIVATE_Marshal(&privatePart, buffer.baseAddress, buffer.count, &offset)
        }
        guard rc == TSS2_RC_SUCCESS else {
            throw RainError(.internalError, "a TPM object does not marshal: \(TPM2Failure.decode(rc))")
        }
        return Array(output.prefix(offset))
    }

    /// The uncompressed P-256 point (65 bytes, `04‖x‖y`) of an ECDSA-SHA256 signing key.
    /// - Throws: RAIN_102 `tpm_blob_malformed` naming `path` when the object is not such a key.
    func signingPoint(path: String) throws(RainError) -> [UInt8] {
        var area = publicPart.publicArea
        let ecc = area.parameters.eccDetail
        guard area.type == TPM2Constant.algECC, ecc.curveID == TPM2Constant.eccNISTP256,
            ecc.scheme.scheme == TPM2Constant.algECDSA, ecc.scheme.details.ecdsa.hashAlg == TPM2Constant.algSHA256,
            area.objectAttributes & TPM2Constant.sign != 0, area.objectAttributes & TPM2Constant.fixedTPM != 0
        else {
            throw TPM2BlobFile.malformed(path, "it does not hold an ECDSA P-256 signing key made inside the TPM")
        }
        let x = Self.bytes(of: &area.unique.ecc.x.buffer, size: area.unique.ecc.x.size)
        let y = Self.bytes(of: &area.unique.ecc.y.buffer, size: area.unique.ecc.y.size)
        guard x.count <= 32, y.count <= 32 else {
            throw TPM2BlobFile.malformed(path, "its public key is not a P-256 point")
        }
        // The TPM may drop leading zero bytes of a coordinate.
        return [0x04] + [UInt8](repeating: 0, count: 32 - x.count) + x + [UInt8](repeating: 0, count: 32 - y.count) + y
    }

    /// The first `size` bytes of a TPM2B's buffer (empty when `size` is larger than the buffer).
    static func bytes<Buffer>(of buffer: inout Buffer, size: UInt16) -> [UInt8] {
        withUnsafeBytes(of: &buffer) { raw in
            Int(size) <= raw.count ? Array(raw.prefix(Int(size))) : []
        }
    }

    // MARK: - Templates

    /// The storage primary key: the TCG provisioning guidance's ECC P-256 SRK template (restricted
    /// decryption, AES-128-CFB, no DA, empty unique), so CreatePrimary gives the same key every time
    /// on this TPM until its owner hierarchy is cleared; nothing is persisted in the TPM.
    static func storagePrimaryTemplate() -> TPM2B_PUBLIC {
        template(
            type: TPM2Constant.algECC,
            attributes: TPM2Constant.restricted | TPM2Constant.decrypt | TPM2Constant.fixedTPM | TPM2Constant.fixedParent
                | TPM2Constant.sensitiveDataOrigin | TPM2Constant.userWithAuth | TPM2Constant.noDA
        ) { parameters in
            parameters.eccDetail.symmetric.algorithm = TPM2Constant.algAES
            parameters.eccDetail.symmetric.keyBits.aes = 128
            parameters.eccDetail.symmetric.mode.aes = TPM2Constant.algCFB
            parameters.eccDetail.scheme.scheme = TPM2Constant.algNull
            parameters.eccDetail.curveID = TPM2Constant.eccNISTP256
            parameters.eccDetail.kdf.scheme = TPM2Constant.algNull
        }
    }

    /// A sealed data object (keyedhash, no scheme): its data comes from the caller, and it can
    /// only be unsealed on this TPM. No DA: its authorization is empty, and a TPM in lockout must
    /// not lock the key out too.
    static func sealedDataTemplate() -> TPM2B_PUBLIC {
        template(
            type: TPM2Constant.algKeyedHash,
            attributes: TPM2Constant.fixedTPM | TPM2Constant.fixedParent | TPM2Constant.userWithAuth | TPM2Constant.noDA
        ) { parameters in
            parameters.keyedHashDetail.scheme.scheme = TPM2Constant.algNull
        }
    }

    /// The device key: ECDSA P-256 with SHA-256, generated inside the TPM (sensitiveDataOrigin),
    /// never duplicable (fixedTPM, fixedParent); no DA for the same reason as sealed data.
    static func signingKeyTemplate() -> TPM2B_PUBLIC {
        template(
            type: TPM2Constant.algECC,
            attributes: TPM2Constant.sign | TPM2Constant.fixedTPM | TPM2Constant.fixedParent
                | TPM2Constant.sensitiveDataOrigin | TPM2Constant.userWithAuth | TPM2Constant.noDA
        ) { parameters in
            parameters.eccDetail.symmetric.algorithm = TPM2Constant.algNull
            parameters.eccDetail.scheme.scheme = TPM2Constant.algECDSA
            parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2Constant.algSHA256
            parameters.eccDetail.curveID = TPM2Constant.eccNISTP256
            parameters.eccDetail.kdf.scheme = TPM2Constant.algNull
        }
    }

    /// A public template of `type` with `attributes`, named with SHA-256 as every object here
    /// is; `parameters` sets the type's details.
    static func template(
        type: TPM2_ALG_ID, attributes: TPMA_OBJECT, _ parameters: (inout TPMU_PUBLIC_PARMS) -> Void
    ) -> TPM2B_PUBLIC {
        var template = TPM2B_PUBLIC()
        template.publicArea.type = type
        template.publicArea.nameAlg = TPM2Constant.algSHA256
        template.publicArea.objectAttributes = attributes
        parameters(&template.publicArea.parameters)
        return template
    }

    /// Runs `body` with a `TPM2B_SENSITIVE_CREATE` holding `key` as its data, in memory that is
    /// zeroed and freed when `body` returns; the key bytes never pass through an ordinary array.
    /// - Throws: RAIN_102 when the key is empty or longer than a sealed object holds (128 bytes).
    static func withSensitive<R>(
        _ key: SymmetricKey, _ body: (UnsafePointer<TPM2B_SENSITIVE_CREATE>) throws(RainError) -> R
    ) throws(RainError) -> R {
        let sensitive = UnsafeMutablePointer<TPM2B_SENSITIVE_CREATE>.allocate(capacity: 1)
        sensitive.initialize(to: TPM2B_SENSITIVE_CREATE())
        defer {
            explicit_bzero(sensitive, MemoryLayout<TPM2B_SENSITIVE_CREATE>.size)
            sensitive.deallocate()
        }
        guard let sizeOffset = MemoryLayout<TPM2B_SENSITIVE_CREATE>.offset(of: \.sensitive.data.size),
            let dataOffset = MemoryLayout<TPM2B_SENSITIVE_CREATE>.offset(of: \.sensitive.data.buffer)
        else { throw RainError(.internalError, "TPM2B_SENSITIVE_CREATE has no addressable data field") }
        let capacity = MemoryLayout<TPM2B_SENSITIVE_CREATE>.size - dataOffset
        let maximum = min(capacity, 128)  // MAX_SYM_DATA: what every TPM 2.0 seals
        guard key.byteCount > 0, key.byteCount <= maximum else {
            throw RainError.invalid(
                "a TPM seals keys of 1 to \(maximum) bytes, not \(key.byteCount)", field: "key", reason: "tpm_key_size")
        }
        let raw = UnsafeMutableRawPointer(sensitive)
        raw.storeBytes(of: UInt16(key.byteCount), toByteOffset: sizeOffset, as: UInt16.self)
        key.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { (raw + dataOffset).copyMemory(from: base, byteCount: bytes.count) }
        }
        return try body(sensitive)
    }
}
