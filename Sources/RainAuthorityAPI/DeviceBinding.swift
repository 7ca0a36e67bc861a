import RainCore
import RainCrypto
import RainWire

/// How a device proves its key to a remote authority: once per connection, a signature
/// over the connection's challenge and TLS channel binding. Every call that carries a session's
/// token is then checked against the keys proven on its connection (`DeviceProof`).
public enum DeviceBinding {
    /// The challenge's length in bytes.
    public static let challengeByteCount = 32

    /// How many keys one connection may prove: the current key and, during a key move, the previous one.
    public static let maximumKeysPerConnection = 2

    /// The `details.reason` of RAIN_501 for a call with a token from a caller that proved no key.
    public static let proofRequiredReason = "device_proof_required"

    /// The `details.reason` of RAIN_501 for a proof whose signature does not verify, or that the
    /// device could not make (its TPM or keyring failed).
    public static let proofFailedReason = "device_proof_failed"

    /// The bytes a device signs to prove its key on a connection: the UTF-8 of
    /// `rain.device-proof.v1`, a zero byte, then the device id, the challenge and the channel
    /// binding (empty on plain TCP), each preceded by its length as 4 bytes, big endian. The
    /// lengths keep the fields apart; the label keeps the signature from meaning anything else.
    public static func signedMessage(deviceID: String, challenge: [UInt8], channelBinding: [UInt8]) -> [UInt8] {
        var message = Array("rain.device-proof.v1".utf8) + [0]
        for field in [Array(deviceID.utf8), challenge, channelBinding] {
            let count = UInt32(clamping: field.count)
            message += [UInt8(count >> 24), UInt8((count >> 16) & 0xFF), UInt8((count >> 8) & 0xFF), UInt8(count & 0xFF)]
            message += field
        }
        return message
    }

    /// RAIN_501 `device_proof_required`: the call carries a token, but its caller proved no device
    /// key. Never ends the session: the device proves again (a new connection) and retries.
    public static func proofRequired() -> RainError {
        RainError(
            .provider,
            "the device did not prove its key on this connection; it proves it when it connects: try again, and check "
                + "that the device's key provider (TPM, keyring) is available",
            details: .init(reason: proofRequiredReason))
    }

    /// RAIN_501 `device_proof_failed`: a proof that does not verify, or that the device could not make.
    public static func proofFailed(_ why: String) -> RainError {
        RainError(.provider, "the device key proof failed: \(why)", details: .init(reason: proofFailedReason))
    }

    /// RAIN_501 for a proof the device's own keys could not sign (the TPM cannot be reached, the
    /// keyring is locked), with the key provider's reason (`tpm_unavailable`…): the device's
    /// failure, never the authority's. `isLocalKeyFailure` recognizes it.
    public static func localKeyFailure(_ error: RainError) -> RainError {
        RainError(
            .provider, "this device's key could not sign its proof to the authority: \(error.message)",
            details: .init(reason: error.details.reason ?? proofFailedReason), underlying: LocalKeyFailure())
    }

    /// Whether `error` is the device's own keys failing (`localKeyFailure`), not the authority.
    public static func isLocalKeyFailure(_ error: RainError) -> Bool { error.underlying is LocalKeyFailure }

    /// Marks an error as the device's keys' own.
    struct LocalKeyFailure: Error, Sendable, CustomStringConvertible {
        var description: String { "the device's key provider failed" }
    }
}

/// What one connection to the authority proved: its challenge, drawn when the device
/// first asks for it, and the device keys whose signatures over it verified. The server keeps one
/// per connection and drops it when the connection closes.
public struct ConnectionDeviceProof: Sendable {
    /// The connection's challenge.
    public let challenge: [UInt8]
    /// The keys proven so far (none at first).
    public private(set) var proof = DeviceProof.none()

    /// A fresh challenge, nothing proven.
    /// - Throws: RAIN_502 when the random source fails.
    public init() throws(RainError) {
        challenge = try SecureRandom.bytes(count: DeviceBinding.challengeByteCount)
    }

    /// Checks a proof and, when it verifies, adds its key. Proving a key again is harmless.
    /// - Parameter channelBinding: the connection's TLS exporter value; nil on plain TCP.
    /// - Throws: RAIN_102 for an empty device id, another device id than the connection's first
    ///   proof, a malformed key, or a key beyond `DeviceBinding.maximumKeysPerConnection`; RAIN_501
    ///   `device_proof_failed` when the signature does not verify.
    public mutating func verify(_ request: AuthorityProveDeviceRequest, channelBinding: [UInt8]?) throws(RainError) {
        guard !request.deviceID.isEmpty, request.deviceID.utf8.count <= 256 else {
            throw RainError.invalid("deviceId must be 1 to 256 bytes", field: "deviceId")
        }
        let key = try DevicePublicKey(wireBytes: request.devicePublicKey)
        if !proof.isEmpty, proof.deviceID != request.deviceID {
            throw RainError.invalid(
                "this connection already proved device \(proof.deviceID); prove another device on another connection",
                field: "deviceId")
        }
        if proof.contains(key) { return }
        guard proof.keys.count < DeviceBinding.maximumKeysPerConnection else {
            throw RainError.invalid(
                "a connection proves at most \(DeviceBinding.maximumKeysPerConnection) device keys; open another one",
                field: "devicePublicKey", reason: "too_many_keys")
        }
        let message = DeviceBinding.signedMessage(
            deviceID: request.deviceID, challenge: challenge, channelBinding: channelBinding ?? [])
        guard key.isValidSignature(request.signature, for: message) else {
            throw DeviceBinding.proofFailed(
                "the signature does not verify for this connection's challenge and channel binding; "
                    + "reconnect and prove again")
        }
        proof = DeviceProof(deviceID: request.deviceID, keys: proof.keys + [key])
    }
}
