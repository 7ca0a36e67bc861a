internal import CProtobufC
internal import CRainProto
import Foundation
import RainCore

// Swift ⇄ protobuf-c for the authority hop's messages whose Swift shape differs from the wire's
// (proto/authority.proto; the others are generated). Generated `Rain__Wallet__V1__…` names stay here.

// MARK: shared pieces

// Contacts convert with `cContact` / `readContact` (Contact+ProtobufC.swift).

func cTokens(_ tokens: SessionTokens, _ arena: CArena) throws(RainError)
    -> UnsafeMutablePointer<Rain__Wallet__V1__AuthoritySessionTokens>
{
    var c = cMessage(rain__wallet__v1__authority_session_tokens__init)
    c.access_token = try arena.string(tokens.accessToken, field: "access_token")
    c.refresh_token = try arena.string(tokens.refreshToken, field: "refresh_token")
    c.access_lifetime_ms = tokens.accessLifetime.milliseconds
    return arena.box(c)
}

/// Absent tokens read as empty ones (the receiver refuses them where they matter).
func readTokens(_ p: UnsafeMutablePointer<Rain__Wallet__V1__AuthoritySessionTokens>?) throws(RainError)
    -> SessionTokens
{
    guard let c = p?.pointee else { return .empty }
    return SessionTokens(
        accessToken: try readString(c.access_token, field: "access_token"),
        refreshToken: try readString(c.refresh_token, field: "refresh_token"),
        accessLifetime: .milliseconds(c.access_lifetime_ms))
}

// MARK: messages

extension SendCodeRequest {
    /// Decodes an `AuthoritySendLoginCodeRequest`.
    /// - Throws: RAIN_102 (field `contact`) when it names no contact.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> SendCodeRequest {
        try unpackMessage(bytes, name: "AuthoritySendLoginCodeRequest", rain__wallet__v1__authority_send_login_code_request__init)
        { (p) throws(RainError) in
            let m = p.pointee
            guard let contact = try readContact(m.contact) else {
                throw RainError.invalid("the request names no contact", field: "contact")
            }
            return SendCodeRequest(
                appID: try readString(m.app_id, field: "app_id"), deviceID: try readString(m.device_id, field: "device_id"),
                contact: contact)
        }
    }
    /// Encodes as an `AuthoritySendLoginCodeRequest`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_send_login_code_request__init)
        m.app_id = try arena.string(appID, field: "app_id")
        m.device_id = try arena.string(deviceID, field: "device_id")
        m.contact = try cContact(contact, arena)
        return packMessage(&m)
    }
}

extension SendCodeResult {
    /// Decodes an `AuthoritySendLoginCodeResponse`.
    /// - Throws: RAIN_102 (field `contact`) when it names no contact.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> SendCodeResult {
        try unpackMessage(
            bytes, name: "AuthoritySendLoginCodeResponse", rain__wallet__v1__authority_send_login_code_response__init
        ) { (p) throws(RainError) in
            let m = p.pointee
            guard let contact = try readContact(m.contact) else {
                throw RainError.invalid("the answer names no contact", field: "contact")
            }
            return SendCodeResult(
                challengeID: try readString(m.challenge_id, field: "challenge_id"), contact: contact,
                expiresAt: Date(unixMilliseconds: m.expires_at_ms))
        }
    }
    /// Encodes as an `AuthoritySendLoginCodeResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_send_login_code_response__init)
        m.challenge_id = try arena.string(challengeID, field: "challenge_id")
        m.contact = try cContact(contact, arena)
        m.expires_at_ms = expiresAt.unixMilliseconds
        return packMessage(&m)
    }
}
