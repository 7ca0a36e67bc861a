import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainKeyStore
import RainSystem
import Synchronization
import RainAuthorityAPI

/// The device's identity: a stable id (`<state>/device-id`) and a signing key held by the key
/// provider (`KeyProvider`: a TPM, the keyring, or `<state>/device.key`). The authority binds
/// sessions to the public key, so a copied session file is useless on another machine.
///
/// During a key migration the device holds two keys: the new one (current) and the old one, which
/// the authority still accepts until the device confirms the new one (`DeviceKeyHolder.signers`).
public final class DeviceIdentity: DeviceKeyHolder {
    public let id: String
    private let keys: Mutex<[any DeviceSigner]>

    /// An identity from its parts.
    public init(id: String, signer: any DeviceSigner) {
        self.id = id
        self.keys = Mutex([signer])
    }

    /// The device id (`DeviceKeyHolder`).
    public var deviceID: String { id }

    /// The current device key: new sessions are bound to it.
    public var signer: any DeviceSigner { keys.withLock { $0[0] } }

    /// The current key first, then the previous one while a key migration is under way.
    public var signers: [any DeviceSigner] { keys.withLock { $0 } }

    /// Makes `current` the device key; `previous`, when given, stays usable for proofs until
    /// ``dropPrevious()`` (the authority accepts both until the device confirms the new key).
    public func replace(current: any DeviceSigner, keeping previous: (any DeviceSigner)?) {
        keys.withLock { $0 = [current] + (previous.map { [$0] } ?? []) }
    }

    /// Forgets the previous key once the authority confirmed the current one.
    public func dropPrevious() {
        keys.withLock { $0 = [$0[0]] }
    }

    /// Loads or creates the id and the device key of the `file` provider (`<state>/device.key`).
    /// - Throws: RAIN_102 for a malformed id file or a key file with a loose mode.
    public static func loadOrCreate(stateDirectory: String) throws(RainError) -> DeviceIdentity {
        try loadOrCreate(stateDirectory: stateDirectory, provider: FileKeyProvider(stateDirectory: stateDirectory))
    }

    /// Loads or creates the id, and the device key in `provider`. Blocking (a TPM): call it from a
    /// dispatch queue.
    /// - Throws: RAIN_102 for a malformed id file; the provider's errors.
    public static func loadOrCreate(stateDirectory: String, provider: any KeyProvider) throws(RainError)
        -> DeviceIdentity
    {
        DeviceIdentity(id: try loadOrCreateID(stateDirectory: stateDirectory), signer: try provider.loadOrCreateDeviceKey())
    }

    /// Reads `<state>/device-id`, or creates it with a new random id.
    /// - Throws: RAIN_102 when the file does not hold a device id; RAIN_502 on I/O errors.
    package static func loadOrCreateID(stateDirectory: String) throws(RainError) -> String {
        let path = "\(stateDirectory)/device-id"
        if let bytes = try AtomicFile.read(path, limit: 256, options: [.noFollow]) {
            let id = String(decoding: bytes, as: UTF8.self).trimmingWhitespaceAndNewlines()
            if id.hasPrefix("dev_"), id.count > 8, id.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) { return id }
            throw RainError.invalid("\(path) is not a device id; remove it to make a new one", field: "device-id")
        }
        let id = try SecureRandom.identifier(prefix: "dev")
        try AtomicFile.write(Array((id + "\n").utf8), to: path, mode: 0o600)
        return id
    }
}
