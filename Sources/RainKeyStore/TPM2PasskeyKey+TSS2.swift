import Glibc
internal import CTSS2
import RainCore
import RainCrypto

/// A passkey's ECDSA P-256 key made inside the TPM under the storage primary key: only its blob
/// (the marshalled public part and the TPM-encrypted private part) lives outside the TPM.
///
/// A key made with an authorization value (the platform authenticator's PIN) is subject to the
/// TPM's dictionary-attack lockout: each wrong value counts toward `TPM_PT_MAX_AUTH_FAIL`. A key
/// made without one opts out of it (`noDA`), as the daemon's other keys do: there is nothing to
/// guess, and a TPM in lockout must not lock it out too.
package struct TPM2PasskeyKey: Sendable {
    /// `TPM2B_PUBLIC` then `TPM2B_PRIVATE`, marshalled.
    package let blob: [UInt8]
    /// The key's public half, read from its public area.
    package let publicKey: P256PublicKey
    /// Whether the key has an authorization value (is not `noDA`).
    package let hasAuthorization: Bool

    /// Reads a key's blob.
    /// - Throws: RAIN_102 `tpm_blob_malformed` naming `path` when the bytes are not an ECDSA P-256
    ///   signing key made inside a TPM.
    package init(blob: [UInt8], path: String) throws(RainError) {
        let object = try TPM2ObjectBlob(marshalled: blob, path: path)
        try self.init(object: object, marshalled: blob, path: path)
    }

    init(object: TPM2ObjectBlob, marshalled: [UInt8], path: String) throws(RainError) {
        let point = try object.signingPoint(path: path)
        do throws(RainError) {
            publicKey = try P256PublicKey(x963Representation: point)
        } catch {
            throw TPM2BlobFile.malformed(path, "its public key is not a point on P-256")
        }
        blob = marshalled
        hasAuthorization = object.publicPart.publicArea.objectAttributes & TPM2Constant.noDA == 0
    }
}

/// The TPM's dictionary-attack state (TPM 2.0 Part 1, §19.8): `TPM_PT_LOCKOUT_COUNTER`,
/// `TPM_PT_MAX_AUTH_FAIL`, `TPM_PT_LOCKOUT_INTERVAL`, `TPM_PT_LOCKOUT_RECOVERY` and
/// `TPMA_PERMANENT.inLockout`, read with `TPM2_GetCapability`.
package struct TPM2DictionaryAttackStatus: Sendable, Equatable {
    /// Wrong authorizations the TPM counts now (`failedTries`); one is forgotten every
    /// `recoveryInterval` seconds.
    package var failedTries: UInt32
    /// At this count the TPM enters lockout: every key without `noDA` is refused, whoever uses it.
    package var maximumTries: UInt32
    /// Seconds after which the TPM forgets one wrong authorization; 0 disables the protection.
    package var recoveryInterval: UInt32
    /// Seconds before the lockout authorization may be tried again after it failed.
    package var lockoutRecovery: UInt32
    /// Whether the TPM is in lockout now.
    package var isInLockout: Bool

    package init(
        failedTries: UInt32, maximumTries: UInt32, recoveryInterval: UInt32, lockoutRecovery: UInt32, isInLockout: Bool
    ) {
        self.failedTries = failedTries
        self.maximumTries = maximumTries
        self.recoveryInterval = recoveryInterval
        self.lockoutRecovery = lockoutRecovery
        self.isInLockout = isInLockout
    }

    /// Whether wrong authorizations count at all (a recovery interval of 0 turns the protection off).
    package var isProtecting: Bool { recoveryInterval != 0 }

    /// The wrong authorizations a caller may still risk while leaving the TPM one short of lockout:
    /// `maximumTries - 1 - failedTries`, never below 0. The try kept back is the one the caller
    /// never makes, so the lockout itself (which would refuse every user of the TPM, a disk
    /// unlock among them) is never this caller's doing.
    package var triesLeft: UInt32 {
        guard !isInLockout, maximumTries > failedTries + 1 else { return 0 }
        return maximumTries - 1 - failedTries
    }
}

extension TPM2KeyProvider {
    /// `details.reason` of a key's wrong authorization value (RAIN_202): the TPM counted it.
    package static let authorizationFailedReason = TPM2Failure.authorizationFailedReason

    /// Creates an ECDSA P-256 passkey key inside the TPM.
    /// - Parameter authorization: the key's authorization value (1 to 32 bytes), which every
    ///   signature will need; it crosses to the TPM encrypted (a salted session). Nil makes a key
    ///   without one, outside the dictionary-attack protection.
    /// - Returns: the key; store its blob.
    /// - Throws: RAIN_501 when the TPM cannot be used (`tpm_unavailable`, `tpm_owner_auth`,
    ///   `tpm_error`); RAIN_102 for an authorization value of another size.
    package func createPasskeyKey(authorization: SymmetricKey?) throws(RainError) -> TPM2PasskeyKey {
        let template = TPM2ObjectBlob.passkeyKeyTemplate(hasAuthorization: authorization != nil)
        let object = try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) -> TPM2ObjectBlob in
            try tpm.withPrimary { (parent) throws(RainError) -> TPM2ObjectBlob in
                try tpm.withEncryptedSession(salt: parent, attributes: TPM2Constant.sessionDecrypt) {
                    (session) throws(RainError) -> TPM2ObjectBlob in
                    try TPM2ObjectBlob.withSensitiveAuthorization(authorization) { (sensitive) throws(RainError) in
                        try tpm.create(parent: parent, session: session, sensitive: sensitive, template: template)
                    }
                }
            }
        }
        return try TPM2PasskeyKey(object: object, marshalled: try object.marshalled(), path: "a new passkey key")
    }

    /// Has the TPM sign `digest` (SHA-256, 32 bytes) with a passkey key.
    /// - Parameters:
    ///   - digest: the SHA-256 digest to sign.
    ///   - key: the key's blob.
    ///   - authorization: the key's authorization value; nil for a key without one. It reaches the
    ///     TPM only as an HMAC of a salted session, never in clear.
    ///   - path: where the blob came from, for messages.
    /// - Returns: the DER signature (`SEQUENCE { r INTEGER, s INTEGER }`).
    /// - Throws: RAIN_202 `tpm_authorization_failed` for a wrong authorization value (the TPM
    ///   counted it); RAIN_501 `tpm_lockout` while the TPM is in lockout, `tpm_key_lost` for a
    ///   blob of another TPM, `tpm_unavailable`, `tpm_error`.
    package func signWithPasskeyKey(
        digest: [UInt8], key: TPM2PasskeyKey, authorization: SymmetricKey?, path: String
    ) throws(RainError) -> [UInt8] {
        let object = try TPM2ObjectBlob(marshalled: key.blob, path: path)
        let (r, s) = try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) -> (r: [UInt8], s: [UInt8]) in
            try tpm.withPrimary { (parent) throws(RainError) -> (r: [UInt8], s: [UInt8]) in
                try tpm.withLoaded(object, parent: parent, path: path) {
                    (loaded) throws(RainError) -> (r: [UInt8], s: [UInt8]) in
                    guard let authorization else { return try tpm.sign(digest: digest, key: loaded) }
                    try tpm.setAuthorization(authorization, of: loaded)
                    defer { tpm.clearAuthorization(of: loaded) }
                    return try tpm.withEncryptedSession(salt: parent, attributes: 0) {
                        (session) throws(RainError) -> (r: [UInt8], s: [UInt8]) in
                        try tpm.sign(digest: digest, key: loaded, session: session)
                    }
                }
            }
        }
        guard !r.isEmpty, !s.isEmpty, r.count <= 32, s.count <= 32 else {
            throw RainError(
                .provider, "the TPM at \(tcti) returned an ECDSA signature that is not P-256 sized",
                details: RainError.Details(reason: "tpm_error"))
        }
        return TPM2DeviceSigner.derSignature(r: r, s: s)
    }

    /// Reads the TPM's dictionary-attack state.
    /// - Throws: RAIN_501 `tpm_unavailable` or `tpm_error`.
    package func dictionaryAttackStatus() throws(RainError) -> TPM2DictionaryAttackStatus {
        try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) -> TPM2DictionaryAttackStatus in
            try tpm.dictionaryAttackStatus()
        }
    }

    /// Sets the TPM's dictionary-attack parameters (`TPM2_DictionaryAttackParameters` with the
    /// lockout hierarchy's empty authorization). Tests set their own software TPM's, so that a
    /// lockout lasts seconds rather than the reference default of 1,000.
    /// - Throws: RAIN_501 when the TPM refuses (its lockout hierarchy has a password) or cannot be reached.
    package func setDictionaryAttackParameters(
        maximumTries: UInt32, recoveryInterval: UInt32, lockoutRecovery: UInt32
    ) throws(RainError) {
        try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) in
            try tpm.setDictionaryAttackParameters(
                maximumTries: maximumTries, recoveryInterval: recoveryInterval, lockoutRecovery: lockoutRecovery)
        }
    }
}

extension TPM2Context {
    /// TPM 2.0 Part 2, §6.13: `TPM_PT_VAR` and the properties after it.
    private enum Property {
        static let permanent: UInt32 = 0x200
        static let lockoutCounter: UInt32 = 0x200 + 14
        static let maxAuthFail: UInt32 = 0x200 + 15
        static let lockoutInterval: UInt32 = 0x200 + 16
        static let lockoutRecovery: UInt32 = 0x200 + 17
        static let inLockout: UInt32 = 0x0000_0200
    }

    /// Gives a loaded object its authorization value for the commands that follow (ESYS computes
    /// the sessions' HMACs with it). The value lives in zeroed memory while it is handed over.
    func setAuthorization(_ value: SymmetricKey, of object: ESYS_TR) throws(RainError) {
        let auth = UnsafeMutablePointer<TPM2B_AUTH>.allocate(capacity: 1)
        auth.initialize(to: TPM2B_AUTH())
        defer {
            explicit_bzero(auth, MemoryLayout<TPM2B_AUTH>.size)
            auth.deallocate()
        }
        try TPM2ObjectBlob.writeAuthorization(value, into: UnsafeMutableRawPointer(auth), capacity: 32)
        try check(Esys_TR_SetAuth(handle, object, auth), "TR_SetAuth")
    }

    /// Overwrites the copy of an authorization value ESYS keeps for `object` with an empty one:
    /// ESYS frees its objects without zeroing them.
    func clearAuthorization(of object: ESYS_TR) {
        var empty = TPM2B_AUTH()
        _ = Esys_TR_SetAuth(handle, object, &empty)
    }

    /// Reads `TPM_PT_PERMANENT` through `TPM_PT_LOCKOUT_RECOVERY`.
    func dictionaryAttackStatus() throws(RainError) -> TPM2DictionaryAttackStatus {
        var more: TPMI_YES_NO = 0
        var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
        let rc = Esys_GetCapability(
            handle, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP(TPM2_CAP_TPM_PROPERTIES), Property.permanent, 18,
            &more, &data)
        defer { Esys_Free(data) }
        try check(rc, "GetCapability")
        guard let list = data?.pointee.data.tpmProperties else {
            throw RainError(.provider, "the TPM at \(tcti) returned no properties from TPM2_GetCapability")
        }
        var values: [UInt32: UInt32] = [:]
        withUnsafeBytes(of: list.tpmProperty) { raw in
            for property in raw.bindMemory(to: TPMS_TAGGED_PROPERTY.self).prefix(Int(list.count)) {
                values[property.property] = property.value
            }
        }
        guard let failed = values[Property.lockoutCounter], let maximum = values[Property.maxAuthFail],
            let interval = values[Property.lockoutInterval], let permanent = values[Property.permanent]
        else {
            throw RainError(
                .provider, "the TPM at \(tcti) did not report its dictionary-attack properties",
                details: RainError.Details(reason: "tpm_error"))
        }
        return TPM2DictionaryAttackStatus(
            failedTries: failed, maximumTries: maximum, recoveryInterval: interval,
            lockoutRecovery: values[Property.lockoutRecovery] ?? 0, isInLockout: permanent & Property.inLockout != 0)
    }

    func setDictionaryAttackParameters(
        maximumTries: UInt32, recoveryInterval: UInt32, lockoutRecovery: UInt32
    ) throws(RainError) {
        let rc = Esys_DictionaryAttackParameters(
            handle, ESYS_TR_RH_LOCKOUT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, maximumTries, recoveryInterval,
            lockoutRecovery)
        try check(rc, "DictionaryAttackParameters")
    }
}

extension TPM2ObjectBlob {
    /// A passkey key: ECDSA P-256 with SHA-256, generated inside the TPM and never duplicable,
    /// like the device key; `noDA` only when it has no authorization value (see `TPM2PasskeyKey`).
    static func passkeyKeyTemplate(hasAuthorization: Bool) -> TPM2B_PUBLIC {
        var attributes =
            TPM2Constant.sign | TPM2Constant.fixedTPM | TPM2Constant.fixedParent | TPM2Constant.sensitiveDataOrigin
            | TPM2Constant.userWithAuth
        if !hasAuthorization { attributes |= TPM2Constant.noDA }
        return template(type: TPM2Constant.algECC, attributes: attributes) { parameters in
            parameters.eccDetail.symmetric.algorithm = TPM2Constant.algNull
            parameters.eccDetail.scheme.scheme = TPM2Constant.algECDSA
            parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2Constant.algSHA256
            parameters.eccDetail.curveID = TPM2Constant.eccNISTP256
            parameters.eccDetail.kdf.scheme = TPM2Constant.algNull
        }
    }

    /// Runs `body` with a `TPM2B_SENSITIVE_CREATE` whose `userAuth` is `authorization` (empty when
    /// nil), in memory zeroed and freed when `body` returns.
    static func withSensitiveAuthorization<R>(
        _ authorization: SymmetricKey?, _ body: (UnsafePointer<TPM2B_SENSITIVE_CREATE>) throws(RainError) -> R
    ) throws(RainError) -> R {
        let sensitive = UnsafeMutablePointer<TPM2B_SENSITIVE_CREATE>.allocate(capacity: 1)
        sensitive.initialize(to: TPM2B_SENSITIVE_CREATE())
        defer {
            explicit_bzero(sensitive, MemoryLayout<TPM2B_SENSITIVE_CREATE>.size)
            sensitive.deallocate()
        }
        if let authorization {
            guard let offset = MemoryLayout<TPM2B_SENSITIVE_CREATE>.offset(of: \.sensitive.userAuth) else {
                throw RainError(.internalError, "TPM2B_SENSITIVE_CREATE has no addressable userAuth field")
            }
            try writeAuthorization(authorization, into: UnsafeMutableRawPointer(sensitive) + offset, capacity: 32)
        }
        return try body(sensitive)
    }

    /// Writes `value` as a `TPM2B_AUTH` (size, then bytes) at `target`. An authorization value is at
    /// most the name algorithm's digest size: 32 bytes for SHA-256.
    /// - Throws: RAIN_102 `tpm_key_size` for an empty or longer value.
    static func writeAuthorization(
        _ value: SymmetricKey, into target: UnsafeMutableRawPointer, capacity: Int
    ) throws(RainError) {
        guard let bufferOffset = MemoryLayout<TPM2B_AUTH>.offset(of: \.buffer) else {
            throw RainError(.internalError, "TPM2B_AUTH has no addressable buffer")
        }
        guard value.byteCount > 0, value.byteCount <= capacity,
            value.byteCount <= MemoryLayout<TPM2B_AUTH>.size - bufferOffset
        else {
            throw RainError.invalid(
                "a TPM authorization value has 1 to \(capacity) bytes, not \(value.byteCount)", field: "authorization",
                reason: "tpm_key_size")
        }
        target.storeBytes(of: UInt16(value.byteCount), as: UInt16.self)
        value.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { (target + bufferOffset).copyMemory(from: base, byteCount: bytes.count) }
        }
    }
}
