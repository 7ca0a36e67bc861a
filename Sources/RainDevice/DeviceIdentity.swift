import Foundation
import RainCore
import RainCrypto
import RainKeyStore
import RainSystem

/// The device's identity: a stable id (`<state>/device-id`) and a signing key held by the key
/// provider (`KeyProvider`: a TPM, the keyring, or `<state>/device.key`). The authority binds
/// sessions to the public key, so a copied session file is useless on another machine.
public struct DeviceIdentity: Sendable {
    public let id: String
    /// Signs with the device key; its public key (and algorithm) is the device's identity.
    public let signer: any DeviceSigner

    /// An identity from its parts.
    public init(id: String, signer: any DeviceSigner) {
        self.id = id
        self.signer = signer
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
            let id = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if id.hasPrefix("dev_"), id.count > 8, id.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) { return id }
            throw RainError.invalid("\(path) is not a device id; remove it to make a new one", field: "device-id")
        }
        let id = try SecureRandom.identifier(prefix: "dev")
        try AtomicFile.write(Array((id + "\n").utf8), to: path, mode: 0o600)
        return id
    }
}
