internal import CProtobufC
internal import CRainProto
import Foundation
import RainCore

// Swift ⇄ protobuf-c for the backup-contact messages of the authority hop (authority.proto).

extension AuthoritySendContactVerificationRequest {
    /// Decodes an `AuthoritySendContactVerificationRequest`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthoritySendContactVerificationRequest {
        try unpackMessage(
            bytes, name: "AuthoritySendContactVerificationRequest",
            rain__wallet__v1__authority_send_contact_verification_request__init
        ) { (p) throws(RainError) in
            let m = p.pointee
            return AuthoritySendContactVerificationRequest(
                appID: try readString(m.app_id, field: "app_id"), deviceID: try readString(m.device_id, field: "device_id"),
                accessToken: try readString(m.access_token, field: "access_token"), contact: try readContact(m.contact))
        }
    }
    /// Encodes as an `AuthoritySendContactVerificationRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_send_contact_verification_request__init)
        m.app_id = try arena.string(appID, field: "app_id")
        m.device_id = try arena.string(deviceID, field: "device_id")
        m.access_token = try arena.string(accessToken, field: "access_token")
        m.contact = try cContact(contact, arena)
        return packMessage(&m)
    }
}

extension AuthorityConfirmContactVerificationRequest {
    /// Decodes an `AuthorityConfirmContactVerificationRequest`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> AuthorityConfirmContactVerificationRequest {
        try unpackMessage(
            bytes, name: "AuthorityConfirmContactVerificationRequest",
            rain__wallet__v1__authority_confirm_contact_verification_request__init
        ) { (p) throws(RainError) in
            let m = p.pointee
            return AuthorityConfirmContactVerificationRequest(
                appID: try readString(m.app_id, field: "app_id"), deviceID: try readString(m.device_id, field: "device_id"),
                accessToken: try readString(m.access_token, field: "access_token"),
                challengeID: try readString(m.challenge_id, field: "challenge_id"), code: try readString(m.code, field: "code"),
                idempotencyKey: readBytes(m.idempotency_key))
        }
    }
    /// Encodes as an `AuthorityConfirmContactVerificationRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_confirm_contact_verification_request__init)
        m.app_id = try arena.string(appID, field: "app_id")
        m.device_id = try arena.string(deviceID, field: "device_id")
        m.access_token = try arena.string(accessToken, field: "access_token")
        m.challenge_id = try arena.string(challengeID, field: "challenge_id")
        m.code = try arena.string(code, field: "code")
        m.idempotency_key = arena.bytes(idempotencyKey)
        return packMessage(&m)
    }
}
