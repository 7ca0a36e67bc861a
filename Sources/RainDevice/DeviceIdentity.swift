import Foundation
import RainCore
import RainCrypto
import RainSystem

/// The device's identity: a stable id (`<state>/device-id`) and an Ed25519 signing key
/// (`<state>/device.key`, 0600, beside the storage key). The authority binds sessions to the
/// public key and every refresh is signed with the private key, so a copied session file is
/// useless on another machine.
public struct DeviceIdentity: Sendable {
    public let id: String
    public let signingKey: Ed25519PrivateKey

    /// Loads or creates both.
    /// - Throws: RAIN_102 for a malformed id file or a key file with a loose mode.
    public static func loadOrCreate(stateDirectory: String) throws(RainError) -> DeviceIdentity {
        let seed = try KeyFile.loadOrCreate(at: "\(stateDirectory)/device.key", byteCount: 32)
        let key = try Ed25519PrivateKey(rawRepresentation: seed.withUnsafeBytes { Array($0) })
        return DeviceIdentity(id: try loadOrCreateID(stateDirectory: stateDirectory), signingKey: key)
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
