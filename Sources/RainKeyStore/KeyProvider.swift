import RainCore
import RainCrypto

/// Where a device's keys live (`storage.provider` in the config).
public enum KeyProviderKind: String, Sendable, CaseIterable, Codable {
    /// Sealed by a TPM 2.0 (tpm2-tss); the device key is created inside the TPM and never leaves it.
    case tpm2
    /// In the user's keyring through the freedesktop Secret Service (libsecret).
    case secretService = "secret-service"
    /// 0600 files in the state directory: protects against other users and backups only.
    case file

    /// Strongest first: the order `auto` tries them in.
    public static let strongestFirst: [KeyProviderKind] = [.tpm2, .secretService, .file]
}

/// The config's `storage.provider`: a provider, or `auto` (the strongest available the first time,
/// recorded so that only `storage migrate` changes it later).
public enum KeyProviderChoice: Sendable, Equatable {
    /// Pick the strongest available provider once and record it.
    case auto
    /// This provider.
    case provider(KeyProviderKind)

    /// Parses `auto`, `tpm2`, `secret-service` or `file`.
    /// - Throws: RAIN_102 (field `storage.provider`) naming the accepted values.
    public init(parsing text: String) throws(RainError) {
        if text == "auto" {
            self = .auto
        } else if let kind = KeyProviderKind(rawValue: text) {
            self = .provider(kind)
        } else {
            throw RainError.invalid(
                "storage.provider must be auto, tpm2, secret-service or file (got \(text))", field: "storage.provider")
        }
    }
}

/// The secrets a provider keeps (32 random bytes each).
public enum KeySlot: String, Sendable, CaseIterable, Codable {
    /// Encrypts the session files (`sessions/*.session`).
    case storage
    /// The embedded authority's master key: its token and code hashes and the wallet-encryption key
    /// derive from it. Losing it loses every wallet of an embedded authority.
    case authorityMaster = "authority-master"

    /// What the secret protects, for `storage status`.
    public var protects: String {
        switch self {
        case .storage: "the session files (sessions/*.session)"
        case .authorityMaster: "the embedded authority's wallets, token and code hashes (authority.sqlite3)"
        }
    }
}

/// Keeps a device's secrets and its device key. Every method blocks (a TPM, D-Bus): call them from
/// a dispatch queue, never from the concurrency pool or the event loop.
///
/// Errors: RAIN_501 with `details.reason` for a backend that cannot be used now (`tpm_unavailable`,
/// `keyring_locked`, `no_secret_service`, …) and a message saying what to do; RAIN_102 for stored
/// material that is not what it should be (a damaged blob, a loose file mode); RAIN_502 for I/O.
public protocol KeyProvider: Sendable {
    /// Which provider this is.
    var kind: KeyProviderKind { get }
    /// Where the keys are, for people: `TPM 2.0 at device:/dev/tpmrm0`, `Secret Service (default
    /// collection)`, `files in /home/u/.local/state/rainwallet`.
    var location: String { get }

    /// Checks the backend can be used now (reached, unlocked).
    /// - Throws: RAIN_501 with the reason when it cannot.
    func checkAvailable() throws(RainError)

    /// What `auto` tries before choosing this provider: that it can do what the keys will need,
    /// not only answer (a TPM whose owner hierarchy has a password answers, but seals nothing).
    /// `checkAvailable()` unless the provider needs more.
    /// - Throws: RAIN_501 with the reason when it cannot.
    func checkUsable() throws(RainError)

    /// The secret in `slot`, or nil when there is none.
    func loadSecret(_ slot: KeySlot) throws(RainError) -> SymmetricKey?
    /// Stores `key` in `slot`, replacing what was there; durable when it returns.
    func storeSecret(_ key: SymmetricKey, slot: KeySlot) throws(RainError)
    /// Removes the secret in `slot` (no error when there is none).
    func deleteSecret(_ slot: KeySlot) throws(RainError)

    /// The device key, or nil when none was created.
    func loadDeviceKey() throws(RainError) -> (any DeviceSigner)?
    /// Creates a new device key, replacing any previous one; durable when it returns.
    func createDeviceKey() throws(RainError) -> any DeviceSigner
    /// Removes the device key (no error when there is none).
    func deleteDeviceKey() throws(RainError)
}

extension KeyProvider {
    public func checkUsable() throws(RainError) { try checkAvailable() }

    /// The secret in `slot`, created (32 random bytes) and stored when missing.
    public func loadOrCreateSecret(_ slot: KeySlot) throws(RainError) -> SymmetricKey {
        if let key = try loadSecret(slot) { return key }
        let key = try SymmetricKey.random()
        try storeSecret(key, slot: slot)
        return key
    }

    /// The device key, created when missing.
    public func loadOrCreateDeviceKey() throws(RainError) -> any DeviceSigner {
        if let signer = try loadDeviceKey() { return signer }
        return try createDeviceKey()
    }
}
