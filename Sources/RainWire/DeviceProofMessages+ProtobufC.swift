internal import CProtobufC
internal import CRainProto
import RainCore

// Swift ⇄ protobuf-c for the device-proof messages of the authority hop (proto/authority.proto).

extension AuthorityBeginDeviceProofRequest {
    /// Decodes an `AuthorityBeginDeviceProofRequest` (empty; unknown fields are ignored).
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityBeginDeviceProofRequest {
        try unpackMessage(
            bytes, name: "AuthorityBeginDeviceProofRequest", rain__wallet__v1__authority_begin_device_proof_request__init
        ) { _ throws(RainError) in AuthorityBeginDeviceProofRequest() }
    }
    /// Encodes as an `AuthorityBeginDeviceProofRequest` (zero bytes).
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension AuthorityBeginDeviceProofResponse {
    /// Decodes an `AuthorityBeginDeviceProofResponse`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityBeginDeviceProofResponse {
        try unpackMessage(
            bytes, name: "AuthorityBeginDeviceProofResponse",
            rain__wallet__v1__authority_begin_device_proof_response__init
        ) { (p) throws(RainError) in AuthorityBeginDeviceProofResponse(challenge: readBytes(p.pointee.challenge)) }
    }
    /// Encodes as an `AuthorityBeginDeviceProofResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_begin_device_proof_response__init)
        m.challenge = arena.bytes(challenge)
        return packMessage(&m)
    }
}

extension AuthorityProveDeviceRequest {
    /// Decodes an `AuthorityProveDeviceRequest`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityProveDeviceRequest {
        try unpackMessage(
            bytes, name: "AuthorityProveDeviceRequest", rain__wallet__v1__authority_prove_device_request__init
        ) { (p) throws(RainError) in
            let m = p.pointee
            return AuthorityProveDeviceRequest(
                deviceID: try readString(m.device_id, field: "device_id"), devicePublicKey: readBytes(m.device_public_key),
                signature: readBytes(m.signature))
        }
    }
    /// Encodes as an `AuthorityProveDeviceRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_prove_device_request__init)
        m.device_id = try arena.string(deviceID, field: "device_id")
        m.device_public_key = arena.bytes(devicePublicKey)
        m.signature = arena.bytes(signature)
        return packMessage(&m)
    }
}

extension AuthorityProveDeviceResponse {
    /// Decodes an `AuthorityProveDeviceResponse` (empty; unknown fields are ignored).
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityProveDeviceResponse {
        try unpackMessage(
            bytes, name: "AuthorityProveDeviceResponse", rain__wallet__v1__authority_prove_device_response__init
        ) { _ throws(RainError) in AuthorityProveDeviceResponse() }
    }
    /// Encodes as an `AuthorityProveDeviceResponse` (zero bytes).
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension AuthorityRebindDeviceRequest {
    /// Decodes an `AuthorityRebindDeviceRequest`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityRebindDeviceRequest {
        try unpackMessage(
            bytes, name: "AuthorityRebindDeviceRequest", rain__wallet__v1__authority_rebind_device_request__init
        ) { (p) throws(RainError) in
            AuthorityRebindDeviceRequest(
                deviceID: try readString(p.pointee.device_id, field: "device_id"),
                newPublicKey: readBytes(p.pointee.new_public_key))
        }
    }
    /// Encodes as an `AuthorityRebindDeviceRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_rebind_device_request__init)
        m.device_id = try arena.string(deviceID, field: "device_id")
        m.new_public_key = arena.bytes(newPublicKey)
        return packMessage(&m)
    }
}

extension AuthorityRebindDeviceResponse {
    /// Decodes an `AuthorityRebindDeviceResponse` (empty; unknown fields are ignored).
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityRebindDeviceResponse {
        try unpackMessage(
            bytes, name: "AuthorityRebindDeviceResponse", rain__wallet__v1__authority_rebind_device_response__init
        ) { _ throws(RainError) in AuthorityRebindDeviceResponse() }
    }
    /// Encodes as an `AuthorityRebindDeviceResponse` (zero bytes).
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension AuthorityConfirmDeviceKeyRequest {
    /// Decodes an `AuthorityConfirmDeviceKeyRequest`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityConfirmDeviceKeyRequest {
        try unpackMessage(
            bytes, name: "AuthorityConfirmDeviceKeyRequest", rain__wallet__v1__authority_confirm_device_key_request__init
        ) { (p) throws(RainError) in
            AuthorityConfirmDeviceKeyRequest(
                deviceID: try readString(p.pointee.device_id, field: "device_id"),
                devicePublicKey: readBytes(p.pointee.device_public_key))
        }
    }
    /// Encodes as an `AuthorityConfirmDeviceKeyRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_confirm_device_key_request__init)
        m.device_id = try arena.string(deviceID, field: "device_id")
        m.device_public_key = arena.bytes(devicePublicKey)
        return packMessage(&m)
    }
}

extension AuthorityConfirmDeviceKeyResponse {
    /// Decodes an `AuthorityConfirmDeviceKeyResponse` (empty; unknown fields are ignored).
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityConfirmDeviceKeyResponse {
        try unpackMessage(
            bytes, name: "AuthorityConfirmDeviceKeyResponse",
            rain__wallet__v1__authority_confirm_device_key_response__init
        ) { _ throws(RainError) in AuthorityConfirmDeviceKeyResponse() }
    }
    /// Encodes as an `AuthorityConfirmDeviceKeyResponse` (zero bytes).
    public func encode() throws(RainError) -> [UInt8] { [] }
}
