/// `Authority/BeginDeviceProof` request (empty).
public struct AuthorityBeginDeviceProofRequest: WireMessage, Equatable {
    /// Creates the request.
    public init() {}
}

/// `Authority/BeginDeviceProof` answer: the connection's challenge.
public struct AuthorityBeginDeviceProofResponse: WireMessage, Equatable {
    /// 32 random bytes, the same for every call on the connection.
    public var challenge: [UInt8]

    /// Creates the answer.
    public init(challenge: [UInt8]) { self.challenge = challenge }
}

/// `Authority/ProveDevice` request: a device key and its signature over the connection's proof
/// message (`DeviceProof.signedMessage` in RainAuthorityAPI). Its description hides the signature.
public struct AuthorityProveDeviceRequest: WireMessage, Equatable, CustomStringConvertible {
    /// The device that proves.
    public var deviceID: String
    /// The key's wire bytes (`DevicePublicKey.wireBytes`).
    public var devicePublicKey: [UInt8]
    /// Ed25519 (64 bytes) or ECDSA-SHA256 in DER.
    public var signature: [UInt8]

    /// Creates the request.
    public init(deviceID: String, devicePublicKey: [UInt8], signature: [UInt8]) {
        self.deviceID = deviceID
        self.devicePublicKey = devicePublicKey
        self.signature = signature
    }

    /// The request without its signature's bytes.
    public var description: String {
        "AuthorityProveDeviceRequest(deviceID: \(deviceID), devicePublicKey: \(devicePublicKey.count) bytes, "
            + "signature: \(signature.count) bytes)"
    }
}

/// `Authority/ProveDevice` answer (empty).
public struct AuthorityProveDeviceResponse: WireMessage, Equatable {
    /// Creates the answer.
    public init() {}
}

/// `Authority/RebindDevice` request: step 1 of a device key move.
public struct AuthorityRebindDeviceRequest: WireMessage, Equatable {
    /// The device that moves.
    public var deviceID: String
    /// The new key's wire bytes.
    public var newPublicKey: [UInt8]

    /// Creates the request.
    public init(deviceID: String, newPublicKey: [UInt8]) {
        self.deviceID = deviceID
        self.newPublicKey = newPublicKey
    }
}

/// `Authority/RebindDevice` answer (empty).
public struct AuthorityRebindDeviceResponse: WireMessage, Equatable {
    /// Creates the answer.
    public init() {}
}

/// `Authority/ConfirmDeviceKey` request: step 2 of a device key move.
public struct AuthorityConfirmDeviceKeyRequest: WireMessage, Equatable {
    /// The device that moved.
    public var deviceID: String
    /// The confirmed key's wire bytes.
    public var devicePublicKey: [UInt8]

    /// Creates the request.
    public init(deviceID: String, devicePublicKey: [UInt8]) {
        self.deviceID = deviceID
        self.devicePublicKey = devicePublicKey
    }
}

/// `Authority/ConfirmDeviceKey` answer (empty).
public struct AuthorityConfirmDeviceKeyResponse: WireMessage, Equatable {
    /// Creates the answer.
    public init() {}
}
