internal import CProtobufC
internal import CRainProto
import FoundationEssentials
import RainCore

// Swift ⇄ protobuf-c for wallet.proto's PasskeyInfo, whose Swift type is RainCore's (the
// authority's AccountInfo carries it too, with dates): generated messages convert it with these
// (the generator's HAND_WRITTEN table names them).

func cPasskeyInfo(_ passkey: PasskeyInfo, _ arena: CArena) throws(RainError) -> UnsafeMutablePointer<
    Rain__Wallet__V1__PasskeyInfo
> {
    var c = cMessage(rain__wallet__v1__passkey_info__init)
    c.credential_id = try arena.string(passkey.credentialID, field: "credential_id")
    c.rp_id = try arena.string(passkey.rpID, field: "rp_id")
    c.created_at_ms = passkey.createdAt.unixMilliseconds
    c.last_used_at_ms = passkey.lastUsedAt?.unixMilliseconds ?? 0
    c.kind = try arena.string(passkey.kind.rawValue, field: "kind")
    return arena.box(c)
}

func readPasskeyInfo(_ p: UnsafeMutablePointer<Rain__Wallet__V1__PasskeyInfo>?) throws(RainError) -> PasskeyInfo? {
    guard let c = p?.pointee else { return nil }
    return PasskeyInfo(
        credentialID: try readString(c.credential_id, field: "credential_id"),
        rpID: try readString(c.rp_id, field: "rp_id"), createdAt: Date(unixMilliseconds: c.created_at_ms),
        lastUsedAt: c.last_used_at_ms == 0 ? nil : Date(unixMilliseconds: c.last_used_at_ms),
        // A kind this build does not know (a newer authority's) is shown as unknown.
        kind: PasskeyKind(rawValue: try readString(c.kind, field: "kind")) ?? .unknown)
}
