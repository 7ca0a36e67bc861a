import RainAuthorityAPI
import RainCore
import RainCrypto

/// A device's keys for tests: an id and in-memory signers (Ed25519, or any `DeviceSigner`), current
/// key first, as a `DeviceIdentity` holds them.
public struct TestDeviceKeys: DeviceKeyHolder {
    /// The device id.
    public let deviceID: String
    /// The current key first, then the previous one.
    public let signers: [any DeviceSigner]

    /// A device holding `signers`.
    public init(deviceID: String, signers: [any DeviceSigner]) {
        self.deviceID = deviceID
        self.signers = signers
    }

    /// A device holding Ed25519 `keys`.
    public init(deviceID: String, keys: [Ed25519PrivateKey]) {
        self.init(deviceID: deviceID, signers: keys.map { SoftwareDeviceSigner($0) })
    }

    /// What the device proves in-process.
    public var proof: DeviceProof { DeviceProof(holder: self) }
}

/// An ECDSA P-256 device key in memory: what a TPM's device key looks like from outside (tests).
public struct TestP256DeviceSigner: DeviceSigner {
    /// The private key.
    public let key: P256PrivateKey

    /// A signer for `key`.
    public init(_ key: P256PrivateKey) { self.key = key }

    /// The P-256 public key.
    public var publicKey: DevicePublicKey { .p256(key.publicKey) }

    /// Signs with ECDSA-SHA256 (DER).
    public func sign(_ message: [UInt8]) throws(RainError) -> [UInt8] { try key.signature(for: message) }
}

/// A device key that cannot sign now, as a locked keyring or an unreachable TPM (tests).
public struct FailingDeviceSigner: DeviceSigner {
    /// The key it stands for.
    public let publicKey: DevicePublicKey

    /// A signer of `publicKey` that always fails.
    public init(publicKey: DevicePublicKey) { self.publicKey = publicKey }

    /// Fails with RAIN_501 `keyring_locked`.
    public func sign(_ message: [UInt8]) throws(RainError) -> [UInt8] {
        throw RainError(.provider, "the keyring is locked (test)", details: .init(reason: "keyring_locked"))
    }
}
