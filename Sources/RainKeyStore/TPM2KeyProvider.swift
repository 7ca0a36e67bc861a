import RainCore
import RainCrypto
import RainSystem

/// The `tpm2` provider: secrets sealed by a TPM 2.0 and a device key that never leaves it, through
/// tpm2-tss's ESYS API.
///
/// - secrets (`KeySlot`): data objects sealed under the owner hierarchy's storage primary key, one
///   blob file per slot: `<state>/tpm2/storage.sealed`, `<state>/tpm2/authority-master.sealed`;
/// - device key: an ECDSA P-256 key generated inside the TPM, `<state>/tpm2/device-key.blob`.
///
/// The primary key is recreated from its template for each operation and never persisted in the
/// TPM. A blob opens only on the TPM that made it, and only while its owner hierarchy is not
/// cleared: a copied state directory is useless on another machine, and a lost or cleared TPM loses
/// the keys (RAIN_501 `tpm_key_lost`); back up the embedded authority's master key with `storage
/// backup`.
///
/// Each operation opens its own connection (see `TPM2Context`) and may take tens of milliseconds on
/// a hardware TPM: call the methods off the concurrency pool.
public struct TPM2KeyProvider: KeyProvider {
    /// The state directory; the blob files live in its `tpm2` subdirectory.
    public let stateDirectory: String
    /// The tpm2-tss TCTI configuration (`device:/dev/tpmrm0`, `tabrmd:`, `swtpm:path=/run/swtpm/sock`).
    public let tcti: String

    /// A provider over `stateDirectory` using the TPM that `tcti` reaches. Nothing is opened here.
    public init(stateDirectory: String, tcti: String = "device:/dev/tpmrm0") {
        self.stateDirectory = stateDirectory
        self.tcti = tcti
    }

    public var kind: KeyProviderKind { .tpm2 }
    public var location: String { "TPM 2.0 at \(tcti)" }

    /// The directory of the blob files (`<state>/tpm2`, 0700).
    public var directory: String { "\(stateDirectory)/tpm2" }

    /// The blob file of a slot's sealed secret.
    public func path(of slot: KeySlot) -> String { "\(directory)/\(slot.rawValue).sealed" }

    /// The device key's blob file.
    public var deviceKeyPath: String { "\(directory)/device-key.blob" }

    /// Asks the TPM for 8 random bytes.
    /// - Throws: RAIN_501 `tpm_unavailable` (or the TPM's error) when it does not answer.
    public func checkAvailable() throws(RainError) {
        try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) in try tpm.ping() }
    }

    /// Creates the owner hierarchy's storage primary key (what every seal and the device key
    /// need) and flushes it: a TPM whose owner hierarchy has a password fails here
    /// (`tpm_owner_auth`), where `checkAvailable` passes.
    public func checkUsable() throws(RainError) {
        try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) in try tpm.checkPrimary() }
    }

    /// Unseals the slot's secret; nil when there is no blob file.
    /// - Throws: RAIN_102 `tpm_blob_malformed` for a damaged file; RAIN_501 `tpm_key_lost` when
    ///   this TPM refuses the blob, `tpm_unavailable` when it cannot be reached.
    public func loadSecret(_ slot: KeySlot) throws(RainError) -> SymmetricKey? {
        let file = path(of: slot)
        guard let body = try TPM2BlobFile.read(file, kind: .sealedSecret) else { return nil }
        let blob = try TPM2ObjectBlob(marshalled: body, path: file)
        return try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) -> SymmetricKey in
            try tpm.unseal(blob, path: file)
        }
    }

    /// Seals `key` (1 to 128 bytes) and replaces the slot's blob file.
    public func storeSecret(_ key: SymmetricKey, slot: KeySlot) throws(RainError) {
        let blob = try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) -> TPM2ObjectBlob in try tpm.seal(key) }
        try makeDirectory()
        try TPM2BlobFile.write(try blob.marshalled(), kind: .sealedSecret, to: path(of: slot))
    }

    public func deleteSecret(_ slot: KeySlot) throws(RainError) {
        try remove(path(of: slot))
    }

    /// The device key, checked to load on this TPM; nil when there is no blob file.
    /// - Throws: RAIN_102 `tpm_blob_malformed` for a damaged file; RAIN_501 `tpm_key_lost` when
    ///   this TPM refuses the key, `tpm_unavailable` when it cannot be reached.
    public func loadDeviceKey() throws(RainError) -> (any DeviceSigner)? {
        let file = deviceKeyPath
        guard let body = try TPM2BlobFile.read(file, kind: .signingKey) else { return nil }
        let blob = try TPM2ObjectBlob(marshalled: body, path: file)
        let signer = try TPM2DeviceSigner(tcti: tcti, blob: blob, marshalled: body, path: file)
        try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) in try tpm.checkLoads(blob, path: file) }
        return signer
    }

    /// Creates a new ECDSA P-256 key inside the TPM and replaces the device key's blob file.
    public func createDeviceKey() throws(RainError) -> any DeviceSigner {
        let blob = try TPM2Context.run(tcti: tcti) { (tpm) throws(RainError) -> TPM2ObjectBlob in
            try tpm.createSigningKey()
        }
        let body = try blob.marshalled()
        let signer = try TPM2DeviceSigner(tcti: tcti, blob: blob, marshalled: body, path: deviceKeyPath)
        try makeDirectory()
        try TPM2BlobFile.write(body, kind: .signingKey, to: deviceKeyPath)
        return signer
    }

    public func deleteDeviceKey() throws(RainError) {
        try remove(deviceKeyPath)
    }

    private func makeDirectory() throws(RainError) {
        try OwnedPath.makeOrCheckDirectory(directory, mode: 0o700, name: "TPM key directory", field: "state-dir")
    }

    /// Removes a blob file and syncs its directory; no error when either is missing. The TPM holds
    /// nothing to remove: without its blob an object can never be loaded again.
    private func remove(_ file: String) throws(RainError) {
        if try Syscall.removeFile(file) { try AtomicFile.syncDirectory(directory) }
    }
}
