import RainCore

/// A device signing key held by a provider. The private half may live outside the process (a TPM):
/// only `sign` reaches it.
public protocol DeviceSigner: Sendable {
    /// The public key, whose algorithm is part of the device's identity.
    var publicKey: DevicePublicKey { get }
    /// Signs `message`: 64 raw bytes for Ed25519, DER for ECDSA P-256 (SHA-256 of the message).
    /// Blocking (a TPM signs in tens of milliseconds): call it off the concurrency pool.
    /// - Throws: RAIN_501 when the provider cannot sign now (TPM unreachable, keyring locked), with
    ///   `details.reason`; never a reason to end a session.
    func sign(_ message: [UInt8]) throws(RainError) -> [UInt8]
}

/// A device key held in this process's memory (the `file` and `secret-service` providers).
public struct SoftwareDeviceSigner: DeviceSigner {
    /// The private key.
    let key: Ed25519PrivateKey

    /// A signer for `key`.
    public init(_ key: Ed25519PrivateKey) { self.key = key }

    /// The Ed25519 public key.
    public var publicKey: DevicePublicKey { .ed25519(key.publicKey) }

    /// Signs with Ed25519.
    public func sign(_ message: [UInt8]) throws(RainError) -> [UInt8] { try key.signature(for: message) }
}
