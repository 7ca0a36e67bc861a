internal import CProtobufC
internal import CRainProto
import Foundation
import RainCore

// Swift ⇄ protobuf-c for the authority hop's passkey messages whose Swift shape differs from the wire's.

extension PasskeyFinishResult {
    /// Decodes an `AuthorityPasskeyFinishResponse`.
    public static func decode(_ bytes: [UInt8]) throws(RainError) -> PasskeyFinishResult {
        try unpackMessage(
            bytes, name: "AuthorityPasskeyFinishResponse", rain__wallet__v1__authority_passkey_finish_response__init
        ) { (p) throws(RainError) in
            let m = p.pointee
            guard m.logged_in != 0 else { return PasskeyFinishResult(login: nil) }
            return PasskeyFinishResult(
                login: LoginResult(
                    accountID: try readString(m.account_id, field: "account_id"),
                    walletID: try readString(m.wallet_id, field: "wallet_id"), accountCreated: m.account_created != 0,
                    tokens: try readTokens(m.tokens)))
        }
    }
    /// Encodes as an `AuthorityPasskeyFinishResponse`.
    public func encode() throws(RainError) -> [UInt8] {
        let arena = CArena()
        var m = cMessage(rain__wallet__v1__authority_passkey_finish_response__init)
        // Not logged in: empty fields and an empty tokens message, as this message always carried.
        m.logged_in = login == nil ? 0 : 1
        m.account_id = try arena.string(login?.accountID ?? "", field: "account_id")
        m.wallet_id = try arena.string(login?.walletID ?? "", field: "wallet_id")
        m.account_created = login?.accountCreated == true ? 1 : 0
        m.tokens = try cTokens(login?.tokens ?? .empty, arena)
        return packMessage(&m)
    }
}
