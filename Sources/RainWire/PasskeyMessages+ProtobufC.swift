internal import CProtobufC
internal import CRainProto
import Foundation
import RainCore

// Swift ⇄ protobuf-c for the Passkey service's messages.

extension BeginPasskeyRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> BeginPasskeyRequest {
        try unpackMessage(bytes, name: "PasskeyBeginRequest", rain__wallet__v1__passkey_begin_request__init) {
            _ throws(RainError) in BeginPasskeyRequest()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}

extension BeginPasskeyResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> BeginPasskeyResponse {
        try unpackMessage(bytes, name: "PasskeyBeginResponse", rain__wallet__v1__passkey_begin_response__init) {
            (p) throws(RainError) in
            BeginPasskeyResponse(
                ceremonyID: try readString(p.pointee.ceremony_id, field: "ceremony id"),
                optionsJSON: try readString(p.pointee.options_json, field: "options json"),
                origin: try readString(p.pointee.origin, field: "origin"),
                expiresAt: Date(unixMilliseconds: p.pointee.expires_at_ms))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__passkey_begin_response__init)
        m.ceremony_id = try arena.string(ceremonyID, field: "ceremony id")
        m.options_json = try arena.string(optionsJSON, field: "options json")
        m.origin = try arena.string(origin, field: "origin")
        m.expires_at_ms = expiresAt.unixMilliseconds
        return packMessage(&m)
    }
}

extension FinishPasskeyRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> FinishPasskeyRequest {
        try unpackMessage(bytes, name: "PasskeyFinishRequest", rain__wallet__v1__passkey_finish_request__init) {
            (p) throws(RainError) in
            FinishPasskeyRequest(
                ceremonyID: try readString(p.pointee.ceremony_id, field: "ceremony id"),
                responseJSON: try readString(p.pointee.response_json, field: "response json"))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__passkey_finish_request__init)
        m.ceremony_id = try arena.string(ceremonyID, field: "ceremony id")
        m.response_json = try arena.string(responseJSON, field: "response json")
        return packMessage(&m)
    }
}

extension FinishPasskeyResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> FinishPasskeyResponse {
        try unpackMessage(bytes, name: "PasskeyFinishResponse", rain__wallet__v1__passkey_finish_response__init) {
            (p) throws(RainError) in
            FinishPasskeyResponse(
                session: try readSessionState(p.pointee.session), accountCreated: p.pointee.account_created != 0)
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__passkey_finish_response__init)
        m.session = try cSessionState(session, arena)
        m.account_created = accountCreated ? 1 : 0
        return packMessage(&m)
    }
}

extension CancelPasskeyRequest {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> CancelPasskeyRequest {
        try unpackMessage(bytes, name: "PasskeyCancelRequest", rain__wallet__v1__passkey_cancel_request__init) {
            (p) throws(RainError) in
            CancelPasskeyRequest(ceremonyID: try readString(p.pointee.ceremony_id, field: "ceremony id"))
        }
    }
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__passkey_cancel_request__init)
        m.ceremony_id = try arena.string(ceremonyID, field: "ceremony id")
        return packMessage(&m)
    }
}

extension CancelPasskeyResponse {
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> CancelPasskeyResponse {
        try unpackMessage(bytes, name: "PasskeyCancelResponse", rain__wallet__v1__passkey_cancel_response__init) {
            _ throws(RainError) in CancelPasskeyResponse()
        }
    }
    public func encode() throws(RainError) -> [UInt8] { [] }
}
