import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainSystem

/// The `file` provider: each key a 0600 file in the state directory, as before providers existed.
///
/// - storage key: `<state>/storage.key`;
/// - embedded authority's master key: `<state>/authority/authority.key`;
/// - device key: `<state>/device.key` (an Ed25519 seed).
///
/// It protects against other users (modes, ownership checks) and against a backup that leaves the
/// state directory out. It does not protect against the same user's programs or a stolen disk: the
/// keys sit beside what they encrypt.
public struct FileKeyProvider: KeyProvider {
    /// The state directory the key files live in.
    public let stateDirectory: String

    /// A provider over `stateDirectory` (which must exist).
    public init(stateDirectory: String) { self.stateDirectory = stateDirectory }

    public var kind: KeyProviderKind { .file }
    public var location: String { "files in \(stateDirectory)" }

    /// The file a slot's secret is kept in.
    public func path(of slot: KeySlot) -> String {
        switch slot {
        case .storage: "\(stateDirectory)/storage.key"
        case .authorityMaster: "\(stateDirectory)/authority/authority.key"
        }
    }

    /// The device key's file.
    public var deviceKeyPath: String { "\(stateDirectory)/device.key" }

    /// Always available: the state directory was checked when the daemon opened it.
    public func checkAvailable() throws(RainError) {}

    public func loadSecret(_ slot: KeySlot) throws(RainError) -> SymmetricKey? {
        try KeyFile.load(at: path(of: slot))
    }

    public func storeSecret(_ key: SymmetricKey, slot: KeySlot) throws(RainError) {
        let file = path(of: slot)
        if slot == .authorityMaster {
            try OwnedPath.makeOrCheckDirectory(
                OwnedPath.parent(of: file), mode: 0o700, name: "authority state directory", field: "state-dir")
        }
        try KeyFile.write(key, to: file)
    }

    public func deleteSecret(_ slot: KeySlot) throws(RainError) {
        try Self.remove(path(of: slot))
    }

    public func loadDeviceKey() throws(RainError) -> (any DeviceSigner)? {
        guard let seed = try KeyFile.load(at: deviceKeyPath) else { return nil }
        return SoftwareDeviceSigner(try Ed25519PrivateKey(rawRepresentation: seed.withUnsafeBytes { Array($0) }))
    }

    public func createDeviceKey() throws(RainError) -> any DeviceSigner {
        let seed = try SymmetricKey.random()
        let signer = SoftwareDeviceSigner(try Ed25519PrivateKey(rawRepresentation: seed.withUnsafeBytes { Array($0) }))
        try KeyFile.write(seed, to: deviceKeyPath)
        return signer
    }

    public func deleteDeviceKey() throws(RainError) {
        try Self.remove(deviceKeyPath)
    }

    /// Removes a key file and syncs its directory; no error when it is missing.
    static func remove(_ path: String) throws(RainError) {
        try Syscall.removeFile(path)
        try AtomicFile.syncDirectory(OwnedPath.parent(of: path))
    }
}
